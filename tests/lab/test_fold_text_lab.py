"""Text that journalctl printed, and the same lines as collectors and loggers wrap them, fold into
the records of the JSON export (issue 27).

The scenarios of test_fold_lab crash under the lab's systemd; for each, the lab's own journalctl
prints the unit's journal in every short format, and the test folds each text with `cockpit fold`
as an operator would paste it. Every traceback comes back as the export's: its lines, frames,
exception, chain, rank, and the PID where the text carries one. The same messages wrapped as
docker compose, Kubernetes' CRI, docker's json-file and Python logging print them fold into the
same tracebacks (these name no PID, so only one process's crash is asked of them; ray's and
vLLM's worker prefixes name one, and the eight interleaved ranks fold apart through them too).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import LabHandle
from tests.lab.test_fold_lab import install_scenarios, run_fold_cli, run_scenario

pytestmark = pytest.mark.lab

FORMATS = [
    "short",
    "short-precise",
    "short-iso",
    "short-iso-precise",
    "short-full",
    "with-unit",
    "short-unix",
    "short-monotonic",
    "short-delta",
]
SINGLE_STREAM = ["one", "chained", "group", "syntax", "shared", "restart", "noise"]


def reading(records: list[dict]) -> list[dict]:
    """Every record but a plain line (a stack of another kind made by mistake counts too), less
    what only an export can say (the unit, journald's timestamp) or only text (the host)."""

    def plain(x: object) -> object:
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items() if k not in ("unit", "start", "host")}
        return [plain(v) for v in x] if isinstance(x, list) else x

    return [plain(r) for r in records if r["kind"] != "line"]


def without_pid(records: list[dict]) -> list[dict]:
    return [
        {**r, "pid": None, "chained": without_pid(r["chained"]), "sub_exceptions": without_pid(r["sub_exceptions"])}
        for r in records
    ]


def last_cursor(lab: LabHandle) -> str:
    return json.loads(lab.ssh("journalctl", "-n", "1", "-o", "json", "--no-pager").stdout)["__CURSOR"]


@pytest.fixture(scope="module")
def fold_lab(lab: LabHandle) -> LabHandle:
    return install_scenarios(lab)


def wrap(export: list[dict], kind: str) -> list[str]:
    """The export's messages as the collector or logger would have printed them."""
    out: list[str] = []
    for record in export:
        lines = record["lines"] if record["kind"] == "traceback" else [record["text"]]
        pid = record["pid"]
        if pid == 1:  # systemd's messages about the unit: not in the process's own output
            continue
        for i, line in enumerate(lines):
            if kind == "compose":
                out.append(f"sglang-1  | {line}")
            elif kind == "cri":
                out.append(f"2025-10-24T11:07:36.{len(out):09d}Z stderr F {line}")
            elif kind == "docker":
                out.append(json.dumps({"log": line + "\n", "stream": "stderr", "time": "2025-10-24T11:07:36.1Z"}))
            elif kind == "logging":  # a logger prefixes a record's first line; what it prints after is bare
                out.append(f"2025-10-24 11:07:36,123 - sglang - ERROR - {line}" if i == 0 else line)
            else:
                assert kind == "vllm"
                out.append(f"(VllmWorkerProcess pid={pid}) ERROR 03-05 05:40:33 [multiproc_executor.py:880] {line}")
    return out


def fold_text(capsysbinary, tmp_path: Path, name: str, text: str) -> list[dict]:
    path = tmp_path / name
    path.write_text(text)
    return run_fold_cli(capsysbinary, path)


@pytest.mark.parametrize("name", [*SINGLE_STREAM, "eight"])
def test_journalctl_text_and_wrapped_lines_fold_as_the_export(
    fold_lab: LabHandle, tmp_path: Path, capsysbinary, name: str
) -> None:
    """`noise` (log lines, lone exception lines, a warning, progress bars, a frame look-alike,
    beside one real traceback) folds into that traceback alone, from the text as from the export."""
    cursor = last_cursor(fold_lab)  # test_fold_lab ran the same units in this lab before
    run_scenario(fold_lab, name, tmp_path)
    export = run_fold_cli(capsysbinary, tmp_path / f"fold-{name}.json")
    want = reading(export)
    assert want and all(t["complete"] for t in want)
    for fmt in FORMATS:
        argv = ["journalctl", "-u", f"fold-{name}", f"--after-cursor={cursor}", "--no-pager", "-o", fmt]
        text = fold_lab.ssh(*argv).stdout
        got = reading(fold_text(capsysbinary, tmp_path, f"{name}.{fmt}.txt", text))
        assert got == want, fmt
    kinds = ["compose", "cri", "docker", "logging", "vllm"] if name in SINGLE_STREAM else ["vllm"]
    for kind in kinds:
        got = reading(fold_text(capsysbinary, tmp_path, f"{name}.{kind}.txt", "\n".join(wrap(export, kind)) + "\n"))
        assert got == (want if kind == "vllm" else without_pid(want)), kind


NATIVE = r"""
import socket, struct, sys
msg = sys.stdin.read().encode()
data = b"MESSAGE\n" + struct.pack("<Q", len(msg)) + msg + f"\nSYSLOG_IDENTIFIER={sys.argv[1]}\n".encode()
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(data, "/run/systemd/journal/socket")
"""


def test_a_multi_line_message_printed_by_journalctl_folds_as_its_export(
    fold_lab: LabHandle, tmp_path: Path, capsysbinary
) -> None:
    """A MESSAGE sent whole over journald's native protocol: journalctl indents its further lines."""
    # no newline at its end: journalctl's text drops a message's last newline, the export keeps it
    # and a blank line inside, which journalctl prints as the indent alone
    message = (
        'Traceback (most recent call last):\n  File "/x.py", line 3, in <module>\n    boom()\nValueError: bad\n\nend'
    )
    identifier = f"fold-native-{os.getpid()}-{time.monotonic_ns()}"  # this run's message alone
    fold_lab.ssh("tee", "/tmp/fold-native.py", input=NATIVE)
    fold_lab.ssh("python3", "/tmp/fold-native.py", identifier, input=message)
    argv = ["journalctl", "-t", identifier, "--no-pager"]
    fold_lab.wait_for(lambda: "ValueError" in fold_lab.ssh(*argv).stdout, what="the native message")
    want = reading(fold_text(capsysbinary, tmp_path, "native.json", fold_lab.ssh(*argv, "-o", "json").stdout))
    assert len(want) == 1 and want[0]["exception"] == "ValueError"
    for fmt in ("short", "short-iso", "with-unit", "short-monotonic"):
        text = fold_lab.ssh(*argv, "-o", fmt).stdout
        assert "\n      " in text  # the further lines are indented by the prefix's width
        assert reading(fold_text(capsysbinary, tmp_path, f"native.{fmt}.txt", text)) == want, fmt
