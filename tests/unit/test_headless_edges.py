"""Headless edges (issue 12): each bad input is one sentence on stderr with exit 2, never a
silent wrong answer; values that begin with a dash are values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.cli import build_parser, join_dashed_values, main
from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.preflight.preflight import check_static
from tests.conftest import FIXTURES, ROOT

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
DEMO = ROOT / "cockpit" / "lab" / "guest" / "sglang-demo.service"
DATA = ROOT / "tests" / "data"


def _unit(tmp_path: Path) -> Path:
    path = tmp_path / "sglang-demo.service"
    path.write_bytes(DEMO.read_bytes())
    return path


def test_a_bare_name_for_a_flag_with_a_value_is_refused(tmp_path: Path, capsys) -> None:
    path = _unit(tmp_path)
    assert main(["unit", "set", str(path), "--flag", "tp-size", "--in-place"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cockpit: --tp-size has the value 8 now: give --flag tp-size=VALUE") and err.count("\n") == 1
    assert path.read_bytes() == DEMO.read_bytes()


@pytest.mark.parametrize("argv", [["--flag", "--tp-size=4"], ["--flag=--tp-size=4"], ["--flag", "tp-size=4"]])
def test_a_flag_is_named_with_or_without_its_dashes(tmp_path: Path, capsysbinary, argv: list[str]) -> None:
    assert main(["unit", "set", str(_unit(tmp_path)), *argv]) == 0
    assert b"    --tp-size 4 \\\n" in capsysbinary.readouterr().out


def test_unset_takes_a_dashed_name_too(tmp_path: Path, capsysbinary) -> None:
    assert main(["unit", "set", str(_unit(tmp_path)), "--unset", "--tp-size"]) == 0
    assert b"--tp-size" not in capsysbinary.readouterr().out


def test_since_takes_a_value_that_begins_with_a_dash() -> None:
    for argv in (["--since", "-30min"], ["--since=-30min"]):
        args = build_parser().parse_args(join_dashed_values(["snapshot", "--host", "h", "--unit", "u", *argv]))
        assert args.since == "-30min"
    assert join_dashed_values(["preflight", "--", "--flag", "--x"]) == ["preflight", "--", "--flag", "--x"]


@pytest.mark.parametrize("option", ["--requests", "--input-len", "--output-len"])
def test_zero_requests_or_tokens_are_refused(capsys, option: str) -> None:
    assert main(["bench", "--url", "http://127.0.0.1:9", option, "0"]) == 2
    assert f"argument {option}: 0 is too few: give 1 or more" in capsys.readouterr().err


def test_preflight_words_a_type_as_a_person_would(sglang_root) -> None:
    catalog = load_catalog(sglang_root("0.5.23"))
    [finding] = [
        f for f in check_static(["python", "--model-path", "/m", "--tp-size", "abc"], catalog) if f.rule == "bad-type"
    ]
    assert finding.fix == "Give --tp-size an integer."


def test_an_unknown_release_is_one_sentence() -> None:
    proc = subprocess.run(
        [COCKPIT, "preflight", "--sglang-version", "0.0.0.404", "--", "--tp-size", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines()[-1]
        == "cockpit: SGLang 0.0.0.404 is not a release on PyPI (pip download found none)"
    )


def test_explain_says_which_traceback_it_picked(tmp_path: Path, sglang_root) -> None:
    launch = FIXTURES / "sglang" / "launch_server"
    both = tmp_path / "two.txt"
    both.write_bytes(
        (launch / "launch_server-0.5.9-eagle3-topk4-drafttok3.txt").read_bytes()
        + (launch / "launch_server-0.5.23-eagle3-topk4-drafttok3.txt").read_bytes()
    )
    last = subprocess.run(
        [COCKPIT, "explain", str(both), "--source-root", str(sglang_root("0.5.23"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert last.returncode == 0 and "speculative_hook.py" in last.stdout
    assert f"{both} holds 2 tracebacks; explaining the last (AssertionError); --index N picks another" in last.stderr
    first = subprocess.run(
        [COCKPIT, "explain", str(both), "--index", "1", "--source-root", str(sglang_root("0.5.9"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert first.returncode == 0 and "server_args.py" in first.stdout and "explaining the first" in first.stderr
    beyond = subprocess.run(
        [COCKPIT, "explain", str(both), "--index", "3", "--source-root", str(sglang_root("0.5.9"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert beyond.returncode == 2 and "holds 2 tracebacks with frames" in beyond.stderr


def test_explain_dates_a_journal_traceback_by_the_clock(tmp_path: Path, sglang_root) -> None:
    """Issue 26, item 5: the summary showed a journal traceback's raw __REALTIME_TIMESTAMP.
    The export: the lab's EAGLE crash, then the same crash a minute later (its restart)."""
    from datetime import datetime

    entries = [json.loads(line) for line in (DATA / "journal-eagle.jsonl").read_text().splitlines()]
    later = [
        {**e, "__REALTIME_TIMESTAMP": str(int(e["__REALTIME_TIMESTAMP"]) + 60_000_000), "__CURSOR": e["__CURSOR"] + "b"}
        for e in entries
    ]
    export = tmp_path / "two-starts.jsonl"
    export.write_text("".join(json.dumps(e) + "\n" for e in entries + later))
    first_us = next(
        int(e["__REALTIME_TIMESTAMP"]) for e in entries if "Traceback (most recent call last)" in str(e.get("MESSAGE"))
    )
    said = subprocess.run(
        [COCKPIT, "explain", str(export), "--index", "1", "--source-root", str(sglang_root("0.5.23"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    clock = f"{datetime.fromtimestamp(first_us / 1e6):%Y-%m-%d %H:%M:%S}"
    assert said.returncode == 0 and json.loads(said.stdout)["exception"].startswith("AssertionError"), said
    assert f"explaining the first (AssertionError at {clock})" in said.stderr, said.stderr
    assert str(first_us) not in said.stderr


def test_the_repository_stands_alone() -> None:
    """A clone has no ../shared: nothing in the package, the docs or the README points there, and the
    design and facts the docstrings cite are in docs/."""
    cited = []
    for path in [
        ROOT / "README.md",
        *ROOT.glob("docs/*.md"),
        *ROOT.glob("cockpit/**/*.py"),
        *ROOT.glob("benchmarks/*.py"),
        ROOT / "Makefile",
        ROOT / "pyproject.toml",
    ]:
        text = path.read_text(errors="replace")
        if "../shared" in text or "NOTES.md" in text or "DESIGN.md" in text:
            cited.append(str(path.relative_to(ROOT)))
    assert cited == []
    assert (ROOT / "docs" / "architecture.md").is_file() and (ROOT / "docs" / "facts.md").is_file()
    for path in ROOT.glob("cockpit/**/*.py"):
        if "docs/facts.md" in path.read_text():
            break
    else:
        raise AssertionError("no docstring points at docs/facts.md")
