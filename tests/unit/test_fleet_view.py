"""What a fleet round asks a host for, by what it knows of it (HostView), and what it makes of
the answer (issue 29, item 1: a settled host's round runs no systemctl, ss or nvidia-smi; the
live rounds: tests/lab/test_fleet_quiet_lab.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import replace

import pytest

from cockpit.sglang.deployments import fleet
from cockpit.sglang.deployments.fleet import SCRIPT, SEP, HostView, parse_probes, sections, start_key
from cockpit.systemd.readiness import HUNG_AFTER_S
from cockpit.systemd.status import UnitStatus

NOW = 1000.0


def _settled(**changes: object) -> HostView:
    """A host read in full at NOW, every unit settled."""
    view = HostView(
        files=" /etc/systemd/system/sglang-a.service",
        marks=" /system.slice/sglang-a.service:65",
        pid1="5170680524 2991003994 6816",
        states="sglang-a.service loaded active running A",
    )
    return replace(view, shown_at=NOW, checked_at=NOW, listened_at=NOW, gpus_at=NOW, settled=True, **changes)


def test_a_first_round_asks_everything_and_a_settled_host_nothing() -> None:
    assert HostView().asks(NOW, ()) == ["1", "1", "1", "1", "-", "-", "-", "", "0", "0"]
    view = _settled(listed=("sglang-a.service",))
    found = [view.files, view.marks, view.pid1, view.states]
    assert view.asks(NOW + 1, ("sglang-b.service",)) == [
        *("1", "0", "0", "0"),  # a unit the config names now: read
        *found,
        *("1", "sglang-b.service"),
        *("1", "sglang-a.service"),
    ]
    assert view.asks(NOW + 1, ())[:4] == ["0", "0", "0", "0"]
    assert fleet.STATES_S < fleet.GPUS_S < fleet.SETTLED_READ_S < fleet.OWNER_RECHECK_S
    assert view.asks(NOW + fleet.STATES_S, ())[:4] == ["0", "0", "0", "1"]  # PID 1's running may look
    assert view.asks(NOW + fleet.GPUS_S, ())[:4] == ["0", "0", "1", "1"]
    assert view.asks(NOW + fleet.SETTLED_READ_S, ())[:4] == ["1", "0", "1", "1"]
    assert view.asks(NOW + fleet.OWNER_RECHECK_S, ())[:4] == ["1", "1", "1", "1"]


def test_a_host_with_a_unit_not_settled_is_read_each_round_its_gpus_every_few_seconds() -> None:
    view = replace(_settled(), settled=False)
    assert view.asks(NOW + 1, ())[:3] == ["1", "1", "0"]
    assert view.asks(NOW + fleet.GPUS_BUSY_S, ())[:3] == ["1", "1", "1"]


def _answer(head: str, states: str = "", shown: str = "", listed: str = "", gpus: str = "", probes: str = "") -> str:
    return "\n".join([head, SEP, states, SEP, shown, SEP, listed, SEP, gpus, SEP, SEP, probes])


def test_an_answer_replaces_only_the_parts_the_host_read() -> None:
    status = UnitStatus("sglang-a.service", "h", active_state="active")
    view = _settled(statuses={"sglang-a.service": status}, listed=("sglang-a.service",))
    said = _answer("0 0 1 0 0\n files-now\n marks-now\n1 2 3", gpus="0, 2000, 143771", probes="sglang-a.service 0 x")
    after, probes = view.after(said, "h", NOW + 3, ())
    assert (after.files, after.marks, after.pid1) == (" files-now", " marks-now", "1 2 3")
    assert (after.gpus_at, after.shown_at, after.checked_at, after.states) == (NOW + 3, NOW, NOW, view.states)
    assert after.statuses == view.statuses and after.listed == view.listed and after.holders is None
    assert after.gpus is not None and after.gpus.busy == 1
    assert probes == "sglang-a.service 0 x"

    looked = _answer("0 0 0 0 1\n\n\n1 2 4", states="sglang-a.service loaded failed failed A")
    after, _ = view.after(looked, "h", NOW + 11, ())
    assert (after.states, after.checked_at, after.statuses) == (
        "sglang-a.service loaded failed failed A",
        NOW + 11,
        view.statuses,
    )

    shown = "Id=sglang-b.service\nActiveState=inactive\nInvocationID=\n"
    after, _ = view.after(_answer("1 0 0 1 0\n\n\n", shown=shown, listed="sglang-b.service"), "h", NOW + 4, ())
    assert list(after.statuses) == ["sglang-b.service"] and after.shown_at == after.checked_at == NOW + 4
    assert after.listed == ("sglang-b.service",) and after.gpus == view.gpus
    with pytest.raises(ValueError):
        view.after("sh: 1: Syntax error\n", "h", NOW, ())


def test_an_exec_start_is_read_once_a_start() -> None:
    running = UnitStatus("sglang-a.service", "h", active_state="active", invocation_id="i1", main_pid=7)
    stopped = UnitStatus("sglang-b.service", "h", active_state="inactive")
    view = HostView(
        statuses={u.unit: u for u in (running, stopped)}, commands={"sglang-a.service": (start_key(running), "x")}
    )
    assert view.unread_starts() == ["sglang-b.service"]
    again = replace(running, invocation_id="i2", main_pid=9)
    assert replace(view, statuses={"sglang-a.service": again}).unread_starts() == ["sglang-a.service"]


def _run(*words: str) -> str:
    argv = ["sh", "-c", SCRIPT, "fleet", *words]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False).stdout


def test_the_shell_reads_nothing_when_nothing_changed() -> None:
    """SCRIPT's comparisons in this machine's own sh: a first round (`-`) reads every part; one
    given back what the shell found reads none; new unit files list them and read the units; a
    new first process of a unit reads all but them; PID 1 having run looks at the states only
    where CHECK says it may, and goes on to the next round unlooked at where it may not."""

    def head(check: str, files: str, marks: str, pid1: str, states: str = "") -> list[str]:
        said = _run("all", "0", "0", "0", check, files, marks, pid1, states, "0", "0")
        return said.split(f"\n{SEP}\n")[0].split("\n")

    first = head("1", "-", "-", "-")
    assert first[0] == "1 1 1 1 0"
    files, marks, pid1 = first[1:]
    assert head("0", files, marks, pid1)[0] == "0 0 0 0 0"
    assert head("0", files, marks, "1 2 3") == ["0 0 0 0 0", files, marks, "1 2 3"]  # not looked at: kept
    assert head("0", files + " /etc/systemd/system/sglang-new.service", marks, pid1)[0] == "1 0 0 1 0"
    assert head("0", files, marks + " /system.slice/sglang-gone.service:7", pid1)[0] == "1 1 1 0 0"
    # Looked at: this machine has no `sglang*` unit, so its states are "" (or no systemctl at all).
    assert head("1", files, marks, "1 2 3", "sglang-gone.service loaded active running x")[0] == "1 0 0 0 1"
    assert head("1", files, marks, "1 2 3", "")[0] == "0 0 0 0 1"


# One HTTP answer from a process of its own: on CI's busy machine a thread of the test process did
# not answer within the 10 s the batch waits (stop 42), and a process does not wait on the GIL.
ANSWER_ONCE = """
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
conn.recv(1024)
conn.sendall(b"HTTP/1.1 200 OK\\r\\n\\r\\n")
conn.close()
"""


def test_the_probes_run_in_one_bash_and_a_timeout_leaves_the_answers_given() -> None:
    """One 200, one refused, one that never answers: the batch ends on HUNG_AFTER_S, and the
    units that answered keep their answers (their lines come before the `124` of every unit)."""
    ok = subprocess.Popen([sys.executable, "-c", ANSWER_ONCE], stdout=subprocess.PIPE, text=True)
    assert ok.stdout is not None
    ok_port = int(ok.stdout.readline())
    hung = socket.create_server(("127.0.0.1", 0))
    closed = socket.create_server(("127.0.0.1", 0))
    refused_port = closed.getsockname()[1]
    closed.close()
    asked = {
        "a.service": ("127.0.0.1", ok_port),
        "b.service": ("127.0.0.1", refused_port),
        "c.service": ("127.0.0.1", hung.getsockname()[1]),
    }
    try:
        said = _run("probes", *[str(w) for unit, (addr, port) in asked.items() for w in (unit, addr, port)])
    finally:
        ok.kill()
        ok.wait()
        hung.close()
    probes = parse_probes(sections(said, 1)[1], asked)
    assert probes["a.service"].ok, said
    assert probes["b.service"].detail == f"nothing answers on 127.0.0.1:{refused_port}"
    assert probes["c.service"].timed_out and probes["c.service"].detail == f"no answer within {HUNG_AFTER_S:g} s"
