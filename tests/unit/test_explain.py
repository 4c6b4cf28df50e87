"""`cockpit explain` and the explainer, on real tracebacks and the real source of each release."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.explain.explain import explain
from tests.conftest import FIXTURES, ROOT

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
# 0.5.9 checks the trio under `if self.speculative_algorithm in ("EAGLE", "EAGLE3", "STANDALONE"):`
# too: the algorithm decides the check, after the innermost guard's --speculative-num-steps.
ASSERT_FLAGS_0_5_9 = [
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-num-steps",
    "--speculative-algorithm",
]
ASSERT_FLAGS_0_5_23 = [
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-adaptive",
    "--speculative-num-steps",
]
# (fixture, release, failing file, line range, flags, exception)
CASES = [
    (
        "launch_server/launch_server-0.5.9-eagle3-topk4-drafttok3.txt",
        "0.5.9",
        "srt/server_args.py",
        (2423, 2426),
        ASSERT_FLAGS_0_5_9,
        "AssertionError",
    ),
    (
        "launch_server/launch_server-0.5.23-eagle3-topk4-drafttok3.txt",
        "0.5.23",
        "srt/arg_groups/speculative_hook.py",
        (1160, 1163),
        ASSERT_FLAGS_0_5_23,
        "AssertionError",
    ),
    (
        "launch_server/launch_server-0.5.23-eagle3-topk4-drafttok3.tail20.txt",
        "0.5.23",
        "srt/arg_groups/speculative_hook.py",
        (1160, 1163),
        ASSERT_FLAGS_0_5_23,
        "AssertionError",
    ),
    (
        "launch_server/launch_server-0.5.23-eagle3-steps3-only.txt",
        "0.5.23",
        "srt/arg_groups/speculative_hook.py",
        (1274, 1274),
        ["--speculative-eagle-topk"],
        "TypeError",
    ),
] + [
    (
        f"preflight/traceback-{v}-{case}.txt",
        v,
        "srt/server_args.py" if v == "0.5.9" else "srt/arg_groups/speculative_hook.py",
        rng[v],
        flags[v],
        exc,
    )
    for v in ("0.5.9", "0.5.23")
    for case, rng, flags, exc in (
        (
            "c1-topk4-drafttok3-nosteps",
            {"0.5.9": (2423, 2426), "0.5.23": (1160, 1163)},
            {"0.5.9": ASSERT_FLAGS_0_5_9, "0.5.23": ASSERT_FLAGS_0_5_23},
            "AssertionError",
        ),
        (
            "c2-drafttok3-only",
            {"0.5.9": (2423, 2426), "0.5.23": (1160, 1163)},
            {"0.5.9": ASSERT_FLAGS_0_5_9, "0.5.23": ASSERT_FLAGS_0_5_23},
            "AssertionError",
        ),
        (
            "c3-steps3-only",
            {"0.5.9": (2453, 2453), "0.5.23": (1274, 1274)},
            {"0.5.9": ["--speculative-eagle-topk"], "0.5.23": ["--speculative-eagle-topk"]},
            "TypeError",
        ),
        (
            "c4-steps3-drafttok4-notopk",
            {"0.5.9": (2453, 2453), "0.5.23": (1274, 1274)},
            {"0.5.9": ["--speculative-eagle-topk"], "0.5.23": ["--speculative-eagle-topk"]},
            "TypeError",
        ),
        (
            "c5-topk4-only",
            {"0.5.9": (2423, 2426), "0.5.23": (1160, 1163)},
            {"0.5.9": ASSERT_FLAGS_0_5_9, "0.5.23": ASSERT_FLAGS_0_5_23},
            "AssertionError",
        ),
    )
]


@pytest.mark.parametrize("fixture,version,file,lines,flags,exception", CASES, ids=[c[0].split("/")[1] for c in CASES])
def test_explain_every_fixture_traceback(sglang_root, fixture, version, file, lines, flags, exception) -> None:
    out = subprocess.run(
        [COCKPIT, "explain", str(FIXTURES / "sglang" / fixture), "--source-root", str(sglang_root(version))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["file"].endswith(f"site-packages/sglang/{file}")
    assert (data["start_line"], data["end_line"]) == lines
    assert data["flags"] == flags
    assert data["exception"] == exception
    if exception == "AssertionError":
        assert data["statement"].strip().startswith("assert (")
        assert data["requirement"] in ("speculative_eagle_topk is None and speculative_num_draft_tokens is None",)
    else:
        assert data["none_flag"] == "--speculative-eagle-topk"
        assert data["statement"].endswith("speculative_eagle_topk > 1")


def _eagle_assert_line(text: str) -> int:
    """The line Python 3.11 names for the EAGLE assert: its `and ...` clause."""
    lines = text.splitlines()
    for i, line in enumerate(lines, 1):
        if (
            line.strip().startswith("and ")
            and "speculative_num_draft_tokens is None" in line
            and "speculative_eagle_topk is None" in lines[i - 2]
        ):
            return i
    raise AssertionError("no EAGLE assert in this file")


@pytest.mark.parametrize(
    "version,where",
    [
        ("0.4.6.post5", "server_args.py:__post_init__"),
        ("0.5.2", "server_args.py:__post_init__"),
        ("0.5.3", "server_args.py:_handle_speculative_decoding"),
        ("0.5.12", "server_args.py:_handle_speculative_decoding"),
        ("0.5.13", "arg_groups/speculative_hook.py:_handle_eagle_family"),
        ("0.5.19", "arg_groups/speculative_hook.py:_handle_eagle_family"),
    ],
)
def test_other_releases_without_a_table_of_versions(sglang_root, version: str, where: str) -> None:
    root = sglang_root(version)
    relative, function = where.split(":")
    path = root / "sglang" / "srt" / relative
    text = path.read_text()
    line = _eagle_assert_line(text)
    result = explain(text, str(path), line, exception="AssertionError", catalog=load_catalog(root))
    assert result.kind == "assert" and result.start_line == line - 2 and result.end_line == line + 1
    assert set(ASSERT_FLAGS_0_5_9) - {"--speculative-algorithm"} <= set(result.flags)
    assert set(result.flags) <= set(ASSERT_FLAGS_0_5_23) | {"--speculative-algorithm"}
    assert f"def {function}(" in "\n".join(text.splitlines()[:line])


def test_sentence_names_current_values(sglang_root) -> None:
    root = sglang_root("0.5.9")
    path = root / "sglang/srt/server_args.py"
    result = explain(path.read_text(), str(path), 2425, exception="AssertionError", catalog=load_catalog(root))
    assert result.sentence({"--speculative-eagle-topk": "4", "--speculative-num-draft-tokens": "3"}) == (
        "This check failed: `speculative_algorithm in ('EAGLE', 'EAGLE3', 'STANDALONE') and "
        "speculative_num_steps is None` requires `speculative_eagle_topk is None and "
        "speculative_num_draft_tokens is None`. Flags involved: --speculative-eagle-topk, "
        "--speculative-num-draft-tokens, --speculative-num-steps, --speculative-algorithm (current values "
        "from the unit: --speculative-eagle-topk 4, --speculative-num-draft-tokens 3, --speculative-num-steps "
        "unset, --speculative-algorithm unset)."
    )


def test_none_comparison_picks_the_flag_that_defaults_to_none(sglang_root) -> None:
    root = sglang_root("0.4.6.post5")
    path = root / "sglang/srt/server_args.py"
    text = path.read_text()
    line = next(
        i
        for i, source_line in enumerate(text.splitlines(), 1)
        if "self.page_size > 1 and self.speculative_eagle_topk > 1" in source_line
    )
    result = explain(
        text,
        str(path),
        line,
        exception="TypeError",
        message="'>' not supported between instances of 'NoneType' and 'int'",
        catalog=load_catalog(root),
    )
    assert result.none_flag == "--speculative-eagle-topk" and result.flags == ["--speculative-eagle-topk"]


def test_explain_errors_are_one_sentence(tmp_path: Path, sglang_root) -> None:
    empty = tmp_path / "t.txt"
    empty.write_text("no traceback here\n")
    out = subprocess.run(
        [COCKPIT, "explain", str(empty), "--source-root", str(sglang_root("0.5.9"))], capture_output=True, text=True
    )
    assert out.returncode == 2 and out.stderr.strip() == f"cockpit: {empty}: no Python traceback with a frame in it"
    fixture = FIXTURES / "sglang/launch_server/launch_server-0.5.9-eagle3-topk4-drafttok3.txt"
    out = subprocess.run(
        [COCKPIT, "explain", str(fixture), "--source-root", str(tmp_path)], capture_output=True, text=True
    )
    assert out.returncode == 2 and "is not under" in out.stderr


@pytest.mark.parametrize("how", ["dot-dot", "symlink"])
def test_a_frame_path_never_leads_out_of_the_source_root(tmp_path: Path, how: str) -> None:
    """A forged frame that climbs out of --source-root (`..`, or a symlink inside it that points
    out) opened the file it reached and printed its line: the failing statement of /etc/shadow."""
    root = tmp_path / "site-packages"
    (root / "sglang").mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("DB_PASSWORD = 'hunter2-do-not-leak'\n")
    if how == "symlink":
        (root / "sglang" / "notes.py").symlink_to(secret)
        frame = "/opt/venv/lib/python3.11/site-packages/sglang/notes.py"
    else:
        frame = "/opt/venv/lib/python3.11/site-packages/" + "../" * 12 + str(secret).lstrip("/")
    forged = tmp_path / "forged.txt"
    forged.write_text(
        f'Traceback (most recent call last):\n  File "{frame}", line 1, in <module>\nValueError: forged\n'
    )
    out = subprocess.run([COCKPIT, "explain", str(forged), "--source-root", str(root)], capture_output=True, text=True)
    assert "hunter2" not in out.stdout + out.stderr
    assert out.returncode == 2 and out.stderr == f"cockpit: {frame} is not under {root}\n"


EXPLAIN_23 = ROOT / "tests" / "data" / "sglang-0.5.23" / "explain"
CASE_FLAGS = json.loads((EXPLAIN_23 / "cases.json").read_text())
MODELS = ROOT / "tests" / "data" / "models"


def explain_case(sglang_root, case: str, *, with_flags: bool = True) -> dict:
    """`cockpit explain` of a real 0.5.23 failure with the command line that produced it (run.py's:
    the model, `--device cuda`, the case's flags), as an operator would pass the unit's ExecStart."""
    argv = ["--model-path", str(MODELS / "Llama-3.1-8B-Instruct"), "--device", "cuda", *CASE_FLAGS[case]]
    out = subprocess.run(
        [COCKPIT, "explain", str(EXPLAIN_23 / f"{case}.txt"), "--source-root", str(sglang_root("0.5.23"))]
        + (["--flags", shlex.join(argv)] if with_flags else []),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def assert_values_said(sentence: str, argv: list[str], flags: list[str]) -> None:
    """Each flag with its value from `argv`: the unit's, a switch by its name alone, or "unset"."""
    given = {
        a: (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None)
        for i, a in enumerate(argv)
        if a.startswith("--")
    }
    said = sentence.split("(current values from the unit: ", 1)[1].removesuffix(").").split(", ")
    assert said == [f if f in given and given[f] is None else f"{f} {given.get(f, 'unset')}" for f in flags]


@pytest.mark.parametrize(
    ("case", "flags", "environment", "caller"),
    [
        # raised in from_string(name): the parameter is bound one frame up, under that frame's own guard
        ("spec-unknown", ["--speculative-algorithm"], [], ("handle_speculative_decoding", ["--speculative-algorithm"])),
        # a message built from a parameter, passed as `context_length if ... else cfg.context_length`
        # two frames up, and an environment variable in the guard (the model's value: below)
        (
            "context-length",
            ["--context-length"],
            ["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"],
            ("from_server_args", ["--context-length"]),
        ),
        # argparse's namespace, `raw_args`, is the flags too
        ("log-level", ["--log-level"], [], None),
        ("disagg", ["--disaggregation-transfer-backend", "--disaggregation-mode"], [], None),
        # topk was filled from --speculative-ngram-max-bfs-breadth by the same hook, lines before
        (
            "ngram-breadth",
            [
                "--speculative-num-draft-tokens",
                "--speculative-eagle-topk",
                "--speculative-num-steps",
                "--speculative-ngram-max-bfs-breadth",
                "--device",
            ],
            [],
            None,
        ),
        # attn_dp_size was filled from --dp-size by a hook the pipeline ran earlier, off the failing
        # path, because the unit gives --enable-dp-attention (and no --attn-dp-size)
        ("dp-attention", ["--tp-size", "--attn-dp-size", "--dp-size", "--enable-dp-attention"], [], None),
        # the trio, and no ngram hook: that one is dispatched only for NGRAM, so it is not named
        ("eagle-topk", ASSERT_FLAGS_0_5_23, [], None),
        # the check sits below `if cfg.dwdp_size <= 1: return`
        ("dwdp", ["--dwdp-size", "--tp-size"], [], None),
        ("attn-dp-replicas", ["--dp-size", "--attn-dp-size"], [], None),
        ("attn-dp-negative", ["--attn-dp-size"], [], None),
        # two nested `if`s, the inner one first
        ("lmcache-radix", ["--disable-radix-cache", "--enable-lmcache"], [], None),
        # the field read by name: resolution_result(server_args, "swa_full_tokens_ratio")
        ("swa-ratio", ["--swa-full-tokens-ratio"], [], None),
    ],
)
def test_the_flags_a_real_failure_depends_on_across_the_stack(
    sglang_root, case: str, flags: list[str], environment: list[str], caller: tuple | None
) -> None:
    """Issue 28: real 0.5.23 failures of twelve families (tests/data/sglang-0.5.23/explain/README.md):
    every flag named, each with the unit's value, and nothing else."""
    data = explain_case(sglang_root, case)
    assert (data["flags"], data["environment"]) == (flags, environment), data["sentence"]
    assert_values_said(data["sentence"], ["--device", "cuda", *CASE_FLAGS[case]], flags)
    if case == "ngram-breadth":
        [resolved] = data["resolved"]
        assert (resolved["field"], resolved["value"]) == ("speculative_eagle_topk", "speculative_ngram_max_bfs_breadth")
        assert "speculative_eagle_topk is resolved from `speculative_ngram_max_bfs_breadth`" in data["sentence"]
    if caller is not None:
        assert [(c["function"], c["passed"]) for c in data["callers"]] == [caller], data["callers"]
        assert f"Its caller {caller[0]} passed {caller[1][0]}" in data["sentence"]


def test_a_hook_off_the_failing_path_counts_only_where_the_units_flags_show_it_ran(sglang_root) -> None:
    """Without the unit's flags nothing says `_handle_deprecated_dp_attention` ran: it is not named."""
    with_flags = explain_case(sglang_root, "dp-attention")
    [resolved] = with_flags["resolved"]
    assert (resolved["field"], resolved["function"], resolved["value"]) == (
        "attn_dp_size",
        "handle_deprecated_dp_attention",
        "dp_size",
    )
    assert (
        "attn_dp_size is resolved from `dp_size` when `enable_dp_attention and attn_dp_size == 1`"
        in (with_flags["sentence"])
    )
    alone = explain_case(sglang_root, "dp-attention", with_flags=False)
    assert (alone["flags"], alone["resolved"]) == (["--tp-size", "--attn-dp-size"], [])


def test_the_context_length_case_says_the_models_value_and_where_it_comes_from(sglang_root) -> None:
    data = explain_case(sglang_root, "context-length")
    [model] = data["model"]
    assert (model["name"], model["function"], model["module"]) == (
        "derived_context_len",
        "get_context_length",
        "sglang.srt.utils.hf_transformers.common",  # through 0.5.23's star-import shim and a re-export
    )
    assert model["keys"][-1] == "max_position_embeddings" and "rope_scaling" in model["keys"]
    assert model["values"]["max_position_embeddings"] == 131072
    assert model["values"]["rope_scaling"]["rope_type"] == "llama3"
    sentence = data["sentence"]
    assert "Llama-3.1-8B-Instruct/config.json has rope_scaling" in sentence
    assert "max_position_embeddings 131072" in sentence and "--context-length 1000000" in sentence


def test_a_guard_is_held_only_where_the_values_decide_it() -> None:
    from cockpit.sglang.explain.judge import holds

    values = {"enable_dp_attention": True, "attn_dp_size": 1, "dp_size": 3, "device": None}
    assert holds("enable_dp_attention and attn_dp_size == 1", values) is True
    assert holds("dp_size % attn_dp_size == 1", values) is False
    assert holds("device in ('cuda', 'cpu')", values) is False  # None is in neither
    assert holds("gpu_mem is not None", values) is None  # a local: unknown, never held
    assert holds("is_npu() or enable_dp_attention", values) is True  # decided by the known side
    assert holds("is_npu() and enable_dp_attention", values) is None


EXPLAIN_OLDEST = ROOT / "tests" / "data" / "sglang-0.4.6.post5" / "explain"


@pytest.mark.parametrize(
    ("case", "flags"),
    [
        ("eagle-topk", ASSERT_FLAGS_0_5_9),
        ("dp-attention", ["--tp-size", "--dp-size", "--enable-dp-attention"]),
        ("dp-attention-one", ["--dp-size", "--enable-dp-attention"]),
        ("dp-lm-head", ["--enable-dp-attention", "--enable-dp-lm-head"]),
        ("chunk-page", ["--chunked-prefill-size", "--page-size"]),
        ("moe-dense", ["--moe-dense-tp-size"]),
        ("nnodes", ["--nnodes", "--tp-size", "--pp-size"]),
        ("gpu-step", ["--gpu-id-step"]),
    ],
)
def test_the_oldest_release_the_same_way(sglang_root, case: str, flags: list[str]) -> None:
    """Issue 28, releases: real 0.4.6.post5 failures (tests/data/sglang-0.4.6.post5/explain/README.md),
    checked in ServerArgs' own methods, no hooks: every flag, with the unit's value."""
    case_flags = json.loads((EXPLAIN_OLDEST / "cases.json").read_text())[case]
    argv = ["--model-path", str(MODELS / "Llama-3.1-8B-Instruct"), *case_flags]
    out = subprocess.run(
        [COCKPIT, "explain", str(EXPLAIN_OLDEST / f"{case}.txt"), "--source-root", str(sglang_root("0.4.6.post5"))]
        + ["--flags", shlex.join(argv)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["flags"] == flags, data["sentence"]
    assert data["resolved"] == [] and data["callers"] == []
    assert_values_said(data["sentence"], case_flags, flags)


def test_a_constructors_positional_arguments_bind_past_self() -> None:
    """`ModelConfig(server_args.model_path, server_args.context_length)` runs the frame `__init__`:
    its first positional argument is `model_path`, not `self` (a review found it one place off)."""
    import ast

    from cockpit.sglang.explain.stack import walk_callers
    from cockpit.traceback.frames import Frame

    callee = (
        "class ModelConfig:\n"
        "    def __init__(self, model_path, context_length):\n"
        "        raise ValueError(model_path)\n"
    )
    caller = "def build(server_args):\n    return ModelConfig(server_args.model_path, server_args.context_length)\n"
    frames = [Frame("/a/caller.py", 2, "build", None), Frame("/a/config.py", 3, "__init__", None)]
    failing = ast.parse(callee).body[0].body[0].body[0]
    [step] = walk_callers(frames, {"/a/caller.py": caller, "/a/config.py": callee}, failing, None)
    assert step.passed == ["--model-path"]
