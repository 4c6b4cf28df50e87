"""The pre-flight dry run (`cockpit.sglang.preflight.preflight.dry_run`) against a Python that really imports SGLang.

NOT PART OF CI: it needs SGLang importable in a virtual environment outside the repository, and
each case imports SGLang afresh (about 7-11 s a case on a two-core machine, a minute a release).
Why it exists: the unit tests feed the dry run recorded tracebacks, and the lab's SGLang source
has no torch, so the lab only ever shows "not run: ... cannot import SGLang". This runs the
release's own `prepare_server_args` (+ `resolve_once` where the release has it) through the
cockpit's real `dry_run` on a `LocalHost`, and checks the outcome and the findings it makes of
the real output.

Building the venv on a CPU-only machine without downloading torch again: reuse the torch 2.14.1 /
transformers 5.24 of the guidellm peer venv (see compare_peers.py) through a .pth file, install
SGLang without its dependencies, then only the small modules that the import and the argument
resolution ask for (everything from PyPI; 186 MB for 0.5.9, 338 MB for 0.5.23, on top of
guidellm's 6 GB; about 25 s each to install):

    python3 -m venv /tmp/sglang-venv
    echo /tmp/guidellm-venv/lib/python3.11/site-packages > /tmp/sglang-venv/lib/python3.11/site-packages/zz-guidellm.pth
    /tmp/sglang-venv/bin/pip install --no-deps sglang==0.5.9 pybase64 requests urllib3 ipython traitlets \
        aiohttp attrs yarl propcache aiohappyeyeballs aiosignal frozenlist orjson psutil pyzmq pillow \
        starlette openai partial-json-parser torchvision sentencepiece compressed-tensors gguf

    python3 -m venv /tmp/sglang-venv-0523
    echo /tmp/guidellm-venv/lib/python3.11/site-packages \
        > /tmp/sglang-venv-0523/lib/python3.11/site-packages/zz-guidellm.pth
    /tmp/sglang-venv-0523/bin/pip install --no-deps sglang==0.5.23 orjson psutil pybase64 requests urllib3 \
        pillow starlette msgspec pyzmq ipython traitlets aiohttp attrs yarl propcache aiohappyeyeballs \
        aiosignal frozenlist torchvision apache-tvm-ffi==0.1.11 sentencepiece compressed-tensors gguf

(`--no-deps` throughout: SGLang pins torch 2.9.1 / transformers 4.57.1 for 0.5.9, and CUDA-only
kernels; none of them is needed to parse and resolve arguments. Several modules are imported
lazily, inside the resolution, so `import sglang.srt.server_args` working is not enough.)

Run it with the repository's Python:

    .venv/bin/python benchmarks/check_dry_run_sglang.py --python /tmp/sglang-venv/bin/python --version 0.5.9
        [--only CASE] [--out FILE] [--record tests/data/dryrun]

`--record` keeps each probe's raw output (paths made placeholders) in tests/data/dryrun/, which
tests/unit/test_preflight.py reads in CI against the release's real source: the dry run's reading
of real SGLang output is tested there, this script checks it end to end.

The cases (model directories are made in a temp dir: a minimal Llama config.json, which the
resolution reads through transformers' AutoConfig; no weights):
- plain: `--model-path DIR` -> "passed";
- eagle-seed: the seed incident, EAGLE3 with --speculative-eagle-topk 4 and
  --speculative-num-draft-tokens 3 but no --speculative-num-steps -> AssertionError in
  _handle_speculative_decoding (0.5.9) / _handle_eagle_family (0.5.23), the three flags named;
- eagle-steps-only: --speculative-num-steps 3 alone -> TypeError (None > 1), --speculative-eagle-topk named;
- argparse: `--tp-size abc` -> argparse's "invalid int value", SystemExit;
- mm-modality: `--limit-mm-data-per-request '{"text": 1}'` -> ValueError raised in the release's
  validations, which the static layer cannot see (it has no rule for the value's content);
- served-name-colon: `--served-model-name a:b` -> launch_server stops with an AssertionError in
  `check_server_args()`, which launch_server calls after resolving (the static layer's
  served-name-colon rule names it too).
Each case also records what the static layer (`check_static`) says, and its errors' `would_raise`.
With `--rules`, each static rule of cockpit/sglang/preflight/rule_families.py adds a breaking case
(`rule-NAME-break`: the release refuses it with the rule's exception, and the static layer says
the same, or an INFO for a rule the GPU or the model decides) and a passing one (`rule-NAME-pass`:
it resolves, and the static layer says no error); tests/unit/test_rule_families.py reads them.

Prints JSON (and writes it to --out); exit 1 when a check fails.

What it showed (0.5.9 and 0.5.23, CPU-only machine, torch 2.14.1, transformers 5.24; 6-11 s a case,
about a minute a release): the first run found three gaps, since closed in `dry_run`: the probe
did not run `check_server_args()` (so `--served-model-name a:b` read "passed"), an argparse
refusal named no flag, and a check that names its flag only in its message (the modality one)
named none. Every check now holds on both releases.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import emit

from cockpit.remote.base import RunResult
from cockpit.remote.local import LocalHost
from cockpit.sglang.catalog.flags import Catalog, load_catalog
from cockpit.sglang.catalog.releases import sglang_source
from cockpit.sglang.preflight.preflight import ERROR, PROBE, Finding, check_static, dry_run

TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
}
SPEC = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")


def model_dirs(work: Path) -> tuple[Path, Path]:
    """A target and a draft model directory in `work`, each a TINY_LLAMA config.json and nothing
    else: what the resolution reads through transformers' AutoConfig."""
    made = []
    for name in ("model", "draft"):
        (work / name).mkdir()
        (work / name / "config.json").write_text(json.dumps(TINY_LLAMA))
        made.append(work / name)
    return made[0], made[1]


Result = tuple[str, list[Finding]]


@dataclass
class Check:
    what: str
    test: Callable[[Result], bool]


@dataclass
class Case:
    name: str
    argv: list[str]
    why: str
    checks: list[Check] = field(default_factory=list)
    static_raises: str | None = None  # what check_static's first error should say, "" for no error


def _flags(result: Result) -> set[str]:
    return {f for finding in result[1] for f in finding.flags}


def _raises(result: Result) -> str:
    return result[1][0].would_raise or "" if result[1] else ""


def _says(result: Result, text: str) -> bool:
    return any(text in f.message for f in result[1])


def cases(model: str, draft: str) -> list[Case]:
    m = ["--model-path", model]
    eagle = [*m, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft]
    failed = Check("outcome is failed", lambda r: r[0] == "failed")
    return [
        Case("plain", m, "a valid command resolves", [Check("outcome is passed", lambda r: r == ("passed", []))], ""),
        Case(
            "eagle-seed",
            [*eagle, "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "3"],
            "the seed incident: topk and draft tokens without steps",
            [
                failed,
                Check("AssertionError", lambda r: _raises(r) == "AssertionError"),
                Check("names the three speculative flags", lambda r: set(SPEC) <= _flags(r)),
                Check("the two given flags come first", lambda r: set(r[1][0].flags[:2]) == set(SPEC[1:])),
            ],
            "AssertionError",
        ),
        Case(
            "eagle-steps-only",
            [*eagle, "--speculative-num-steps", "3"],
            "steps without topk: None > 1",
            [
                failed,
                Check("TypeError", lambda r: _raises(r) == "TypeError"),
                Check("names --speculative-eagle-topk", lambda r: "--speculative-eagle-topk" in _flags(r)),
            ],
            "TypeError",
        ),
        Case(
            "argparse",
            [*m, "--tp-size", "abc"],
            "a value argparse refuses",
            [
                failed,
                Check("SystemExit(2)", lambda r: _raises(r) == "SystemExit(2)"),
                Check(
                    "quotes argparse", lambda r: _says(r, "error: argument") and _says(r, "invalid int value: 'abc'")
                ),
                Check("names --tp-size", lambda r: "--tp-size" in _flags(r)),
            ],
            "SystemExit(2)",
        ),
        Case(
            "mm-modality",
            [*m, "--limit-mm-data-per-request", '{"text": 1}'],
            "a value only the release's validation refuses (the static layer has no rule for it)",
            [
                failed,
                Check("ValueError", lambda r: _raises(r) == "ValueError"),
                Check("quotes the release's message", lambda r: _says(r, "Invalid modality 'text'")),
                Check("names --limit-mm-data-per-request", lambda r: "--limit-mm-data-per-request" in _flags(r)),
            ],
            "",
        ),
        Case(
            "served-name-colon",
            [*m, "--served-model-name", "a:b"],
            "refused by check_server_args(), which launch_server runs after resolution",
            [
                failed,
                Check("AssertionError", lambda r: _raises(r) == "AssertionError"),
                Check("names --served-model-name", lambda r: "--served-model-name" in _flags(r)),
            ],
            "AssertionError",
        ),
    ]


def rule_cases(model: str, draft: str) -> dict[str, tuple[list[str], list[str]]]:
    """Rule name (cockpit/sglang/preflight/rule_families.py) -> (flags that break it, flags next to them that
    do not), each added to `--model-path MODEL`. `D` stands for the draft model directory."""
    spec = ["--speculative-algorithm"]
    eagle = [*spec, "EAGLE", "--speculative-draft-model-path", draft]
    eagle_tree = [*eagle, "--speculative-num-steps", "3", "--speculative-eagle-topk", "4"]
    eagle_tree += ["--speculative-num-draft-tokens", "8", "--page-size", "16"]
    linear = ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    lora = ["--lora-paths", "a=/tmp/a"]
    dflash = [*spec, "DFLASH", "--speculative-draft-model-path", draft]
    return {
        "served-name-colon": (["--served-model-name", "a:b"], ["--served-model-name", "a-b"]),
        "nnodes-divides-tp": (["--nnodes", "2", "--tp-size", "1"], ["--nnodes", "2", "--tp-size", "2"]),
        "dp-replicas-multinode": (
            ["--nnodes", "2", "--tp-size", "2", "--dp-size", "2"],
            ["--nnodes", "2", "--tp-size", "2", "--attn-dp-size", "2"],
        ),
        "attn-dp-positive": (["--attn-dp-size", "0"], ["--attn-dp-size", "1"]),
        "attn-dp-with-dp-replicas": (
            ["--tp-size", "4", "--attn-dp-size", "2", "--dp-size", "2"],
            ["--tp-size", "4", "--attn-dp-size", "2"],
        ),
        "attn-dp-divides-tp": (
            ["--tp-size", "2", "--dp-size", "4", "--enable-dp-attention"],
            ["--tp-size", "4", "--dp-size", "2", "--enable-dp-attention"],
        ),
        "retraction-needs-priority": (
            ["--retraction-policy", "priority"],
            ["--retraction-policy", "priority", "--enable-priority-scheduling"],
        ),
        "priority-schedule-policy": (
            ["--enable-priority-scheduling", "--schedule-policy", "lpm"],
            ["--enable-priority-scheduling", "--schedule-policy", "lof"],
        ),
        "tokenizer-workers": (["--tokenizer-worker-num", "0"], ["--tokenizer-worker-num", "2"]),
        "detokenizer-workers": (["--detokenizer-worker-num", "0"], ["--detokenizer-worker-num", "2"]),
        "base-gpu-id": (["--base-gpu-id", "-1"], ["--base-gpu-id", "2"]),
        "gpu-id-step": (["--gpu-id-step", "0"], ["--gpu-id-step", "2"]),
        "moe-dense-tp": (
            ["--tp-size", "4", "--moe-dense-tp-size", "2"],
            ["--tp-size", "4", "--moe-dense-tp-size", "1"],
        ),
        "cuda-graph-padding-compile": (
            ["--disable-cuda-graph-padding", "--enable-torch-compile"],
            ["--enable-torch-compile"],
        ),
        "pp-micro-batch": (["--pp-max-micro-batch-size", "0"], ["--pp-max-micro-batch-size", "4"]),
        "pdmux-pp": (
            ["--enable-pdmux", "--pp-size", "2", "--chunked-prefill-size", "-1", "--disable-overlap-schedule"],
            ["--enable-pdmux", "--chunked-prefill-size", "-1", "--disable-overlap-schedule"],
        ),
        "pdmux-chunked-prefill": (
            ["--enable-pdmux", "--disable-overlap-schedule"],
            ["--enable-pdmux", "--chunked-prefill-size", "-1", "--disable-overlap-schedule"],
        ),
        "lora-per-batch": ([*lora, "--max-loras-per-batch", "0"], [*lora, "--max-loras-per-batch", "2"]),
        "lora-nothing-to-load": (
            ["--enable-lora"],
            ["--enable-lora", "--max-lora-rank", "8", "--lora-target-modules", "q_proj"],
        ),
        "lora-target-all-alone": (
            ["--enable-lora", "--max-lora-rank", "8", "--lora-target-modules", "all", "q_proj"],
            ["--enable-lora", "--max-lora-rank", "8", "--lora-target-modules", "all"],
        ),
        "lora-max-loaded": ([*lora, "--max-loaded-loras", "2"], [*lora, "--max-loaded-loras", "8"]),
        "lora-paths-over-max-loaded": (
            [
                "--lora-paths",
                "a=/tmp/a",
                "b=/tmp/b",
                "c=/tmp/c",
                "--max-loaded-loras",
                "2",
                "--max-loras-per-batch",
                "2",
            ],
            ["--lora-paths", "a=/tmp/a", "b=/tmp/b", "--max-loaded-loras", "2", "--max-loras-per-batch", "2"],
        ),
        "lora-overlap-loading": (
            [*lora, "--enable-lora-overlap-loading"],
            [*lora, "--enable-lora-overlap-loading", "--max-loaded-loras", "16"],
        ),
        "lora-speculative": (
            [*lora, *spec, "STANDALONE", "--speculative-draft-model-path", draft],
            [*lora, *spec, "NGRAM"],
        ),
        "standalone-dp-attention": (
            [*spec, "STANDALONE", "--speculative-draft-model-path", draft, "--tp-size", "2", "--attn-dp-size", "2"],
            [*spec, "STANDALONE", "--speculative-draft-model-path", draft, "--tp-size", "2"],
        ),
        "ngram-dp-attention": (
            [*spec, "NGRAM", "--tp-size", "2", "--attn-dp-size", "2"],
            [*spec, "NGRAM", "--tp-size", "2"],
        ),
        "dflash-draft-path": ([*spec, "DFLASH"], [*dflash, "--speculative-dflash-block-size", "8"]),
        "dflash-pp": ([*dflash, "--pp-size", "2"], [*dflash, "--speculative-dflash-block-size", "4"]),
        "dflash-block-size": (
            [*dflash, "--speculative-dflash-block-size", "8", "--speculative-num-draft-tokens", "4"],
            [*dflash, "--speculative-dflash-block-size", "8", "--speculative-num-draft-tokens", "8"],
        ),
        "draft-sink-needs-window": (
            ["--speculative-draft-sink-size", "4"],
            ["--speculative-draft-sink-size", "4", "--speculative-draft-window-size", "64"],
        ),
        "draft-window-positive": (
            ["--speculative-draft-window-size", "0"],
            ["--speculative-draft-window-size", "64"],
        ),
        "block-verification-algorithm": (
            [*spec, "NGRAM", "--speculative-use-block-verification"],
            [*eagle, "--speculative-use-block-verification", *linear],  # it turns rejection sampling on: topk 1
        ),
        "decode-radix-speculative": (
            ["--disaggregation-mode", "decode", "--disaggregation-decode-enable-radix-cache", *spec, "NGRAM"],
            ["--disaggregation-mode", "decode", "--disaggregation-decode-enable-radix-cache", *eagle],
        ),
        "host-receive-threshold": (
            ["--disaggregation-decode-host-receive-threshold", "2"],
            ["--disaggregation-mode", "decode", "--disaggregation-decode-host-receive-threshold", "0.5"],
        ),
        "prefill-dequant-needs-nvfp4": (
            ["--prefill-kv-cache-dequant-dtype", "fp8_e4m3"],
            ["--prefill-kv-cache-dequant-dtype", "auto", "--kv-cache-dtype", "fp8_e4m3"],
        ),
        "lmcache-hicache": (["--enable-lmcache", "--enable-hierarchical-cache"], ["--enable-hierarchical-cache"]),
        "lmcache-radix": (["--enable-lmcache", "--disable-radix-cache"], ["--disable-radix-cache"]),
        "kv-mxfp8-blackwell": (["--kv-cache-dtype", "mxfp8"], ["--kv-cache-dtype", "fp8_e4m3"]),
        "spec-algorithm-unknown": (
            [*spec, "MEDUSA2", "--speculative-draft-model-path", draft],
            [*spec, "eagle3", "--speculative-draft-model-path", draft],
        ),
        "log-level-unknown": (["--log-level", "verbose"], ["--log-level", "Warning"]),
        "nnodes-zero": (["--nnodes", "0", "--tp-size", "2"], ["--nnodes", "1", "--tp-size", "2"]),
        "chunked-prefill-page": (
            ["--chunked-prefill-size", "100", "--page-size", "16"],
            ["--chunked-prefill-size", "128", "--page-size", "16"],
        ),
        "eagle-topk-page-backend": (
            [*eagle_tree, "--attention-backend", "torch_native"],
            [*eagle_tree, "--attention-backend", "triton"],
        ),
        "ngram-topk-page-backend": (
            [*spec, "NGRAM", "--page-size", "16", "--attention-backend", "triton"],
            [*spec, "NGRAM", "--page-size", "16", "--attention-backend", "flashinfer"],
        ),
    }


def rule_case_list(model: str, draft: str) -> list[Case]:
    """A breaking and a passing case of every rule: the real outcome, and the static layer naming
    the rule (an error, or an INFO for a rule the GPU or the model may decide) or saying nothing."""
    from cockpit.sglang.preflight.rule_families import BY_NAME

    failed = Check("outcome is failed", lambda r: r[0] == "failed")
    passed = Check("outcome is passed", lambda r: r == ("passed", []))
    out = []
    for name, (breaking, passing) in rule_cases(model, draft).items():
        rule = BY_NAME[name]
        raises = Check(f"raises {rule.exception}", lambda r, e=rule.exception: _raises(r) == e)
        out.append(
            Case(
                f"rule-{name}-break",
                ["--model-path", model, *breaking],
                f"breaks {name}",
                [failed, raises],
                rule.exception if rule.sure else "",
            )
        )
        out.append(Case(f"rule-{name}-pass", ["--model-path", model, *passing], f"keeps {name}", [passed], ""))
    return out


def installed_version(python: str) -> str:
    proc = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.stdout.strip() or f"? ({proc.stderr.strip().splitlines()[-1:]})"


class RecordingHost(LocalHost):
    """Keeps the probe's output so the tests can read it offline (tests/data/dryrun/)."""

    def __init__(self) -> None:
        super().__init__()
        self.probe: RunResult | None = None

    async def run(self, argv: Sequence[str], **kwargs: Any) -> RunResult:
        result = await super().run(argv, **kwargs)
        if PROBE in argv:
            self.probe = result
        return result


def record(path: Path, case: Case, result: RunResult, python: str, work: Path) -> None:
    """The probe's output with the machine's paths made placeholders: the directory holding
    `sglang/` becomes {SGLANG_ROOT} (the tests put the release's real source there) and the
    case's model directories {WORK}."""
    site = subprocess.run(
        [python, "-c", "import sglang, os; print(os.path.dirname(os.path.dirname(sglang.__file__)))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()

    def clean(data: bytes) -> str:
        return data.decode("utf-8", "replace").replace(site, "{SGLANG_ROOT}").replace(str(work), "{WORK}")

    path.write_text(
        json.dumps(
            {
                "case": case.name,
                "argv": [a.replace(str(work), "{WORK}") for a in case.argv],
                "returncode": result.returncode,
                "stdout": clean(result.stdout),
                "stderr": clean(result.stderr),
            },
            indent=1,
        )
        + "\n"
    )


async def run_case(
    case: Case, python: str, catalog: Catalog, timeout: float
) -> tuple[dict[str, Any], RunResult | None]:
    started = time.monotonic()
    host = RecordingHost()
    result = await dry_run(host, python, case.argv, catalog, timeout=timeout)
    seconds = round(time.monotonic() - started, 2)
    checks = [{"check": c.what, "ok": bool(c.test(result))} for c in case.checks]
    static = [f for f in check_static(case.argv, catalog) if f.severity == ERROR]
    static_raises = static[0].would_raise or "" if static else ""
    if case.static_raises is not None:
        checks.append(
            {
                "check": f"static layer says {case.static_raises or 'no error'}",
                "ok": static_raises == case.static_raises,
            }
        )
    return {
        "case": case.name,
        "why": case.why,
        "argv": case.argv,
        "seconds": seconds,
        "outcome": result[0],
        "findings": [f.to_json() for f in result[1]],
        "static_errors": [{"rule": f.rule, "flags": f.flags, "would_raise": f.would_raise} for f in static],
        "checks": checks,
    }, host.probe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="a Python that imports SGLang (see the docstring)")
    parser.add_argument("--version", required=True, help="its SGLang release, for the cockpit's catalog")
    parser.add_argument("--timeout", type=float, default=120.0, help="dry_run's timeout per case")
    parser.add_argument("--only", action="append", help="run only this case (repeatable)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--record", type=Path, help="keep each probe's output here (tests/data/dryrun)")
    parser.add_argument("--rules", action="store_true", help="also run each static rule's breaking and passing case")
    args = parser.parse_args()

    installed = installed_version(args.python)
    if installed != args.version:
        print(f"{args.python} has sglang {installed}, not {args.version}", file=sys.stderr)
        return 1
    catalog = load_catalog(sglang_source(args.version, progress=lambda m: print(m, file=sys.stderr)))
    work = Path(tempfile.mkdtemp(prefix="cockpit-dry-run-"))
    try:
        model, draft = model_dirs(work)
        every = cases(str(model), str(draft)) + (rule_case_list(str(model), str(draft)) if args.rules else [])
        chosen = [c for c in every if not args.only or c.name in args.only]
        results = []
        for case in chosen:
            outcome, probe = asyncio.run(run_case(case, args.python, catalog, args.timeout))
            results.append(outcome)
            if args.record and probe is not None:
                args.record.mkdir(parents=True, exist_ok=True)
                record(args.record / f"{args.version}-{case.name}.json", case, probe, args.python, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failing = [f"{r['case']}: {c['check']}" for r in results for c in r["checks"] if not c["ok"]]
    report = {"python": args.python, "sglang": installed, "cases": results, "failing": failing, "ok": not failing}
    emit(report)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
