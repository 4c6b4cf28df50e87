"""Pre-flight: the static layer predicts what each release does with each EAGLE flag set."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.remote.base import RunResult
from cockpit.remote.local import LocalHost
from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.preflight.preflight import check_static, read_dry_run
from cockpit.sglang.preflight.rules import release_tuple
from tests.conftest import FIXTURES, ROOT

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
BASE = [
    "--model-path",
    "/m",
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "/d",
    "--device",
    "cuda",
]
SETS = {  # the fixture names' flag sets (shared/fixtures/README.md)
    "c1-topk4-drafttok3-nosteps": ["--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "3"],
    "c2-drafttok3-only": ["--speculative-num-draft-tokens", "3"],
    "c3-steps3-only": ["--speculative-num-steps", "3"],
    "c4-steps3-drafttok4-notopk": ["--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4"],
    "c5-topk4-only": ["--speculative-eagle-topk", "4"],
    "ok1-all-three": [
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "8",
    ],
    "ok2-none-auto": [],
    "ok3-topk1-linear": [
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    ],
}
RELEASES = ["0.4.6.post5", "0.5.2", "0.5.3", "0.5.9", "0.5.12", "0.5.13", "0.5.19", "0.5.23"]


def predicted(version: str, flags: list[str], sglang_root) -> str:
    findings = check_static(BASE + flags, load_catalog(sglang_root(version)))
    errors = [f for f in findings if f.severity == "error"]
    return errors[0].would_raise if errors else "OK"


def fixture_outcome(version: str, name: str) -> str:
    text = (FIXTURES / "sglang" / "preflight" / f"traceback-{version}-{name}.txt").read_text()
    if "PREFLIGHT OK" in text:
        return "OK"
    return re.match(r"(\w+)", text.strip().splitlines()[-1]).group(1)


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
@pytest.mark.parametrize("name", list(SETS))
def test_static_layer_predicts_the_fixture(sglang_root, version: str, name: str) -> None:
    assert predicted(version, SETS[name], sglang_root) == fixture_outcome(version, name)


@pytest.mark.parametrize("version", RELEASES)
def test_every_release_from_0_4_6_post5(sglang_root, version: str) -> None:
    type_error = "TypeError" if release_tuple(version) >= (0, 5, 2) else "OK"
    expected = {
        "c1-topk4-drafttok3-nosteps": "AssertionError",
        "c2-drafttok3-only": "AssertionError",
        "c3-steps3-only": type_error,
        "c4-steps3-drafttok4-notopk": type_error,
        "c5-topk4-only": "AssertionError",
        "ok1-all-three": "OK",
        "ok2-none-auto": "OK",
        "ok3-topk1-linear": "OK",
    }
    assert {name: predicted(version, flags, sglang_root) for name, flags in SETS.items()} == expected


def test_finding_says_what_the_server_would_do(sglang_root) -> None:
    [finding] = [
        f
        for f in check_static(BASE + SETS["c1-topk4-drafttok3-nosteps"], load_catalog(sglang_root("0.5.9")))
        if f.severity == "error"
    ]
    assert finding.message.startswith(
        "SGLang 0.5.9 will stop at start-up: AssertionError in _handle_speculative_decoding"
    )
    assert finding.flags == ["--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"]
    assert "together" in finding.fix
    [later] = [
        f
        for f in check_static(BASE + SETS["c3-steps3-only"], load_catalog(sglang_root("0.5.23")))
        if f.severity == "error"
    ]
    assert later.message.startswith("SGLang 0.5.23 will stop at start-up: TypeError in _handle_eagle_family")


def test_argparse_mistakes(sglang_root) -> None:
    catalog = load_catalog(sglang_root("0.5.23"))
    findings = check_static(
        [
            "--model-path",
            "/m",
            "--num-speculative-tokens",
            "16",
            "--tp-size",
            "eight",
            "--load-format",
            "weird",
            "--speculative-algo",
            "EAGLE3",
            "--port",
        ],
        catalog,
    )
    by_rule = {f.rule: f for f in findings}
    assert "Did you mean --speculative-num-draft-tokens?" in by_rule["unknown-flag"].message
    assert by_rule["bad-type"].flags == ["--tp-size"] and by_rule["bad-choice"].flags == ["--load-format"]
    assert by_rule["abbreviated-flag"].severity == "warning"
    assert by_rule["missing-value"].flags == ["--port"]
    missing = check_static(["--tp-size", "2"], catalog)
    assert [f.rule for f in missing if f.severity == "error"] == ["missing-required"]


def test_cli_json_contract_and_exit_status(sglang_root) -> None:
    root = str(sglang_root("0.5.9"))
    bad = subprocess.run(
        [COCKPIT, "preflight", "--sglang-source", root, "--static-only", "--json", "--", *BASE, *SETS["c5-topk4-only"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1
    [finding] = json.loads(bad.stdout)
    assert set(finding) >= {"severity", "rule", "flags", "message", "would_raise"}
    assert finding["would_raise"] == "AssertionError"
    good = subprocess.run(
        [COCKPIT, "preflight", "--sglang-source", root, "--static-only", "--", *BASE, *SETS["ok1-all-three"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert good.returncode == 0 and "the server should start" in good.stdout


# --- the dry run's reading of real probe output ---------------------------------------------

DRY_RUNS = ROOT / "tests" / "data" / "dryrun"
SPEC = {"--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"}
EXPECTED = {  # case -> (exception, flags that must be named, text the message must hold)
    "eagle-seed": ("AssertionError", SPEC, "AssertionError"),
    "eagle-steps-only": ("TypeError", {"--speculative-eagle-topk"}, "'>' not supported"),
    "argparse": ("SystemExit(2)", {"--tp-size"}, "invalid int value: 'abc'"),
    "mm-modality": ("ValueError", {"--limit-mm-data-per-request"}, "Invalid modality 'text'"),
    "served-name-colon": ("AssertionError", {"--served-model-name"}, "in check_server_args"),
}


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
@pytest.mark.parametrize("case", ["plain", *EXPECTED])
async def test_dry_run_reads_what_real_sglang_printed(sglang_root, tmp_path: Path, version: str, case: str) -> None:
    """Output of the probe under real SGLang (benchmarks/check_dry_run_sglang.py --record), read
    against that release's real source, as on the host."""
    recorded = json.loads((DRY_RUNS / f"{version}-{case}.json").read_text())
    root = str(sglang_root(version))

    def place(text: str) -> str:
        return text.replace("{SGLANG_ROOT}", root).replace("{WORK}", str(tmp_path))

    argv = [place(a) for a in recorded["argv"]]
    result = RunResult(
        ("python",), recorded["returncode"], place(recorded["stdout"]).encode(), place(recorded["stderr"]).encode()
    )
    outcome, findings = await read_dry_run(
        LocalHost(), "/opt/sglang/bin/python", result, argv, load_catalog(sglang_root(version))
    )
    if case == "plain":
        assert (outcome, findings) == ("passed", [])
        return
    exception, flags, text = EXPECTED[case]
    [finding] = findings
    assert outcome == "failed" and finding.would_raise == exception
    assert flags <= set(finding.flags) and text in finding.message
    given = {a for a in argv if a.startswith("--")}
    named_given = [f for f in finding.flags if f in given]
    assert finding.flags[: len(named_given)] == named_given  # the flags on the command line first


async def test_a_python_without_sglang_is_asked_once_per_release(sglang_root) -> None:
    """The editor asks at every pause in typing: on a host whose Python cannot import SGLang it
    asks once, then keeps to the static layer, whatever the flags."""
    from cockpit.sglang.preflight.dry_runs import DryRuns, replace_static

    runs, catalog = DryRuns(), load_catalog(sglang_root("0.5.23"))
    first = await runs.verdict(LocalHost(), sys.executable, ["--model-path", "/m"], catalog)
    again = await runs.verdict(LocalHost(), sys.executable, ["--model-path", "/m", "--tp-size", "2"], catalog)
    assert runs.runs == 1 and again is first
    assert not first.decided and "cannot import SGLang (ModuleNotFoundError" in first.outcome
    seed = "--speculative-algorithm EAGLE3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 3"
    static = check_static(["--model-path", "/m", *seed.split()], catalog)
    assert replace_static(static, first) == static  # no verdict of SGLang's: the static errors stand
    assert [f.severity for f in static] == ["error"]


def test_a_json_flag_that_is_not_json_is_refused_as_argparse_would(sglang_root) -> None:
    """`--limit-mm-data-per-request` is read with `type=json.loads`: text that is not JSON stops
    argparse (exit 2, `invalid loads value`, as 0.5.23 did with the fourth held-out group's)."""
    catalog = load_catalog(sglang_root("0.5.23"))
    [said] = [f for f in check_static(["--model-path", "/m", "--limit-mm-data-per-request", "image=2"], catalog)]
    assert (said.rule, said.severity, said.would_raise) == ("bad-type", "error", "SystemExit(2)")
    assert said.message.endswith("""'image=2' is not JSON text (`{"image": 1}`) (`invalid loads value`).""")
    ok = check_static(["--model-path", "/m", "--limit-mm-data-per-request", '{"image": 2}'], catalog)
    assert [f for f in ok if f.severity == "error"] == []
