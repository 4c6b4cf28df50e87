"""The stacks a real crash leaves that are not Python tracebacks, from the real-SGLang lab (issue 27).

- kill -SEGV of tp 1's `sglang::scheduler`: SGLang's scheduler enabled faulthandler, so the real
  dump lands in the unit's journal (under the main process's PID, whose journal stream every child
  inherits); the export folds it into one faulthandler record, its frames SGLang's own scheduler
  loop; journalctl's text of the same start folds the same.
- a c10::Error from the lab's own torch: a `TORCH_CHECK` built against the venv's torch headers
  and run with its libc10 as a transient unit: libstdc++'s terminate handler prints the error
  with its C++ frames, which fold into one record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LabHandle
from tests.lab.test_real_sglang_lab import end, start_ready

pytestmark = pytest.mark.real_sglang

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
TP1 = "sglang-real-tp1.service"
TORCH = "/opt/sglang/venv/lib/python3.11/site-packages/torch"
CHECK = r"""
#include <c10/util/Exception.h>
void load_draft_weights(int hidden) {
  TORCH_CHECK(hidden == 7168, "draft model hidden size ", hidden, " does not match the target's 7168");
}
int main() { load_draft_weights(4096); }
"""


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
        main = int(lab.ssh("systemctl", "show", "-p", "MainPID", "--value", TP1).stdout)
        script = 'kill -SEGV "$(pgrep -P "$(systemctl show -p MainPID --value "$1")" -xf sglang::scheduler)"'
        lab.ssh("sh", "-c", script, "sh", TP1)
        argv = ["journalctl", "-u", TP1, f"_SYSTEMD_INVOCATION_ID={invocation}", "--no-pager"]
        lab.wait_for(lambda: "Extension modules" in lab.ssh(*argv, "-o", "cat").stdout, 30, "the dump")
        export = lab.ssh(*argv, "-o", "json", "--all").stdout
    finally:
        end(lab, TP1)
    [dump] = stacks(fold(export, tmp_path, "segv.json"), "faulthandler")
    assert (dump["exception"], dump["message"]) == ("Fatal Python error", "Segmentation fault")
    assert dump["pid"] == main  # the scheduler writes to the journal stream its parent opened
    assert dump["complete"] and dump["lines"][-1].startswith("Extension modules: ")
    said = [json.loads(line) for line in export.splitlines()]
    mine = [e["MESSAGE"] for e in said if e.get("_PID") == str(dump["pid"]) and isinstance(e.get("MESSAGE"), str)]
    start = mine.index("Fatal Python error: Segmentation fault")
    assert dump["lines"] == mine[start : start + len(dump["lines"])]  # the scheduler's dump, whole
    functions = [f["function"] for f in dump["frames"]]
    assert "run_scheduler_process" in functions, functions  # SGLang's own scheduler, outermost first
    assert dump["frames"][-1]["file"].endswith(".py") and dump["frames"][0]["file"]
    text = lab.ssh(*argv, "-o", "short-precise").stdout
    assert stacks(fold(text, tmp_path, "segv.txt"), "faulthandler") == [{**dump, "unit": None, "start": None}]


def test_a_c10_error_from_the_labs_torch_is_one_record_with_its_cpp_frames(real_lab: LabHandle, tmp_path: Path) -> None:
    lab = real_lab
    lab.ssh("tee", "/tmp/check.cpp", input=CHECK)
    lab.ssh(
        "g++",
        "-std=c++17",
        f"-I{TORCH}/include",
        "/tmp/check.cpp",
        "-o",
        "/tmp/check",
        f"-L{TORCH}/lib",
        "-lc10",
        f"-Wl,-rpath,{TORCH}/lib",
        timeout=180,
    )
    unit = f"c10-check-{os.getpid()}"
    lab.ssh("systemd-run", f"--unit={unit}", "--wait", "--collect", "--quiet", "/tmp/check", check=False, timeout=60)
    argv = ["journalctl", "-u", unit, "--no-pager"]
    lab.wait_for(lambda: "frame #6" in lab.ssh(*argv, "-o", "cat").stdout, 30, "the terminate handler's lines")
    [error] = stacks(fold(lab.ssh(*argv, "-o", "json", "--all").stdout, tmp_path, "c10.json"), "cpp")
    assert (error["exception"], error["message"]) == (
        "c10::Error",
        "draft model hidden size 4096 does not match the target's 7168",
    )
    assert len(error["cpp_frames"]) == 7 and "libc10.so" in error["cpp_frames"][0]
    assert error["lines"][2].startswith("Exception raised from load_draft_weights at /tmp/check.cpp:4")
