"""The stacks a real crash leaves that are not Python tracebacks, from the real-SGLang lab (issue 27).

kill -SEGV of tp 1's `sglang::scheduler`: SGLang's scheduler enabled faulthandler, so the real dump
lands in the unit's journal under the scheduler's own PID; the export folds it into one faulthandler
record, its frames SGLang's own scheduler loop; journalctl's text of the same start folds the same.
(A c10::Error with its C++ frames from the same image's torch is a fixture made with a compiler the
lab does not carry: tests/data/fold/native/, folded in tests/unit/test_native_stacks.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LabHandle
from tests.lab.test_real_sglang_lab import end, start_ready

pytestmark = pytest.mark.real_sglang

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
TP1 = "sglang-real-tp1.service"


def fold(data: str, tmp_path: Path, name: str) -> list[dict]:
    path = tmp_path / name
    path.write_text(data)
    out = subprocess.run([COCKPIT, "fold", "--json", str(path)], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def stacks(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["kind"] == kind]


@pytest.mark.timeout(480)
def test_a_segfaulting_schedulers_faulthandler_dump_is_one_record(real_lab: LabHandle, tmp_path: Path) -> None:
    lab = real_lab
    start_ready(lab, TP1)
    try:
        invocation = lab.ssh("systemctl", "show", "-p", "InvocationID", "--value", TP1).stdout.strip()
        script = 'pid=$(pgrep -P "$(systemctl show -p MainPID --value "$1")" -xf sglang::scheduler); echo $pid'
        scheduler = int(lab.ssh("sh", "-c", script, "sh", TP1).stdout)
        lab.ssh("kill", "-SEGV", str(scheduler))
        argv = ["journalctl", "-u", TP1, f"_SYSTEMD_INVOCATION_ID={invocation}", "--no-pager"]
        lab.wait_for(lambda: "Extension modules" in lab.ssh(*argv, "-o", "cat").stdout, 30, "the dump")
        export = lab.ssh(*argv, "-o", "json", "--all").stdout
    finally:
        end(lab, TP1)
    [dump] = stacks(fold(export, tmp_path, "segv.json"), "faulthandler")
    assert (dump["exception"], dump["message"]) == ("Fatal Python error", "Segmentation fault")
    assert dump["pid"] == scheduler  # journald stamps each line with its writer, not the stream's opener
    assert dump["complete"] and dump["lines"][-1].startswith("Extension modules: ")
    said = [json.loads(line) for line in export.splitlines()]
    mine = [e["MESSAGE"] for e in said if e.get("_PID") == str(dump["pid"]) and isinstance(e.get("MESSAGE"), str)]
    start = mine.index("Fatal Python error: Segmentation fault")
    assert dump["lines"] == mine[start : start + len(dump["lines"])]  # the scheduler's dump, whole
    functions = [f["function"] for f in dump["frames"]]
    assert "run_scheduler_process" in functions, functions  # SGLang's own scheduler, outermost first
    # where the signal met it may be a frozen module's (`<frozen os>`): every frame names a file and line
    assert all(f["file"] and f["line"] > 0 for f in dump["frames"]), dump["frames"]
    scheduler_frame = next(f for f in dump["frames"] if f["function"] == "run_scheduler_process")
    assert scheduler_frame["file"].endswith("/sglang/srt/managers/scheduler.py"), scheduler_frame
    text = lab.ssh(*argv, "-o", "short-precise").stdout
    [from_text] = stacks(fold(text, tmp_path, "segv.txt"), "faulthandler")
    said_by = next(line for line in text.splitlines() if "Fatal Python error" in line).split()[3]
    assert from_text.pop("host") == said_by  # the text names its host; the export's record has none
    assert from_text == {**dump, "unit": None, "start": None}
