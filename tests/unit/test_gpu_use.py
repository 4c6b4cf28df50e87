"""GPU hygiene's reading: the real H200's nvidia-smi output (tests/data/nvidia-smi/), the lab's
stand-in against it, and the one-round-trip script run for real on this machine."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.remote.local import LocalHost
from cockpit.systemd import gpu_use
from cockpit.systemd.gpu_use import GpuProcess
from cockpit.systemd.process_facts import SEP, Viewpoint

CAPTURE = json.loads((Path(__file__).parents[1] / "data" / "nvidia-smi" / "apps-capture.json").read_text())
FORMS = ("--format=csv", "--format=csv,noheader,nounits")


def _real(when: str, query: str, form: str) -> str:
    return next(
        c["stdout"] for c in CAPTURE["captures"] if c["when"].startswith(when) and c["argv"][1:] == [query, form]
    )


def test_the_real_output_of_two_holders_reads_as_two_processes_on_gpu_0() -> None:
    text = (
        _real("two", gpu_use.GPU_QUERY, gpu_use.FORMAT) + SEP + "\n" + _real("two", gpu_use.APPS_QUERY, gpu_use.FORMAT)
    )
    use = gpu_use.parse(text)
    assert [(g.index, g.used_mib, g.total_mib) for g in use.gpus] == [(0, 29723, 143771)]
    assert [(p.pid, p.name, p.used_mib, p.gpu) for p in use.processes] == [
        (468, "/opt/torch/.venv/bin/python3", 20998, 0),
        (469, "/opt/torch/.venv/bin/python3", 8710, 0),
    ]
    assert CAPTURE["holder_pids"] == [468, 469]  # nvidia-smi named the PIDs the holders saw


def test_an_idle_gpu_has_no_processes() -> None:
    text = (
        _real("idle", gpu_use.GPU_QUERY, gpu_use.FORMAT)
        + SEP
        + "\n"
        + _real("idle", gpu_use.APPS_QUERY, gpu_use.FORMAT)
    )
    use = gpu_use.parse(text)
    assert [g.used_mib for g in use.gpus] == [0] and use.processes == []


def _shape(line: str) -> str:
    """A line with its values abstracted: PIDs, numbers, UUIDs and process names."""
    line = re.sub(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID", line)
    line = re.sub(r"^(\d+), [^,]+, ", r"\1, NAME, ", line)
    return re.sub(r"\d+", "9", line)


@pytest.fixture
def holder() -> subprocess.Popen[bytes]:
    env = dict(os.environ, COCKPIT_STANDIN_GPU_MIB="70000", COCKPIT_STANDIN_GPUS="0")
    proc = subprocess.Popen(["sleep", "60"], env=env)
    yield proc
    proc.kill()
    proc.wait()


def _standin(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "cockpit.lab.standin.nvidia_smi", *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("query", [gpu_use.APPS_QUERY, gpu_use.GPU_QUERY])
def test_the_standin_prints_the_real_tools_format(holder: subprocess.Popen[bytes], query: str, form: str) -> None:
    real = [_shape(line) for line in _real("two", query, form).splitlines()]
    ours = [_shape(line) for line in _standin(query, form).splitlines()]
    assert set(ours) == set(real), (ours, real)
    if form == "--format=csv":
        assert _real("two", query, form).splitlines()[0] == _standin(query, form).splitlines()[0]  # the header


def test_the_standin_names_exactly_the_processes_that_say_they_hold_memory(holder: subprocess.Popen[bytes]) -> None:
    """The holder, and not a process without the variable (a lab up on this machine shows its
    own ranks too: its processes are in this /proc)."""
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        text = _standin(gpu_use.GPU_QUERY, gpu_use.FORMAT) + SEP + "\n" + _standin(gpu_use.APPS_QUERY, gpu_use.FORMAT)
    finally:
        bystander.kill()
        bystander.wait()
    use = gpu_use.parse(text)
    assert [(p.used_mib, p.gpu) for p in use.processes if p.pid == holder.pid] == [(70000, 0)]
    assert bystander.pid not in {p.pid for p in use.processes}
    assert use.gpus[0].used_mib >= 70000 and len(use.gpus) == 8
    refused = subprocess.run(
        [sys.executable, "-m", "cockpit.lab.standin.nvidia_smi", "-q"], capture_output=True, text=True
    )
    assert refused.returncode == 2 and "STAND-IN" in refused.stdout


@pytest.fixture
def standin_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "nvidia-smi"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m cockpit.lab.standin.nvidia_smi "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


@pytest.fixture
def invoked_holder() -> subprocess.Popen[bytes]:
    env = dict(os.environ, COCKPIT_STANDIN_GPU_MIB="1234", COCKPIT_STANDIN_GPUS="2,5", INVOCATION_ID="ab" * 16)
    proc = subprocess.Popen(["sleep", "60"], env=env)
    time.sleep(0.3)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def my_cgroup() -> str:
    return Path(f"/proc/{os.getpid()}/cgroup").read_text().splitlines()[-1].split("::", 1)[-1]


async def test_the_script_ties_each_pid_to_its_cgroup_parent_age_and_invocation(
    standin_on_path: None, invoked_holder: subprocess.Popen[bytes], my_cgroup: str
) -> None:
    """The real script on this machine, with the stand-in as its nvidia-smi."""
    use = await gpu_use.read(LocalHost("here"))
    mine = [p for p in use.processes if p.pid == invoked_holder.pid]
    assert [(p.gpu, p.used_mib) for p in mine] == [(2, 1234), (5, 1234)]
    for p in mine:
        assert p.ppid == os.getpid() and p.invocation == "ab" * 16 and p.cgroup == my_cgroup
        assert p.age_s is not None and 0 <= p.age_s < 30


async def test_a_host_without_nvidia_smi_has_nothing_to_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    use = await gpu_use.read(LocalHost("cpu-box"))
    assert use.missing == "no nvidia-smi on cpu-box" and use.gpus == []


def _p(**kw: object) -> GpuProcess:
    base: dict = dict(pid=7, name="python3", used_mib=1000, gpu=0, gpu_uuid="GPU-x", cgroup="/system.slice/a.service")
    base.update(invocation="new", ppid=50)
    base.update(kw)
    return GpuProcess(**base)  # type: ignore[arg-type]


def test_owners_from_the_units_side() -> None:
    view = Viewpoint("a.service", "new")
    assert _p().owner(view) == "a.service" and not _p().outside(view)
    old = _p(invocation="0123456789abcdef", ppid=1)
    assert old.owner(view) == "PID 1's child from a.service's earlier invocation 0123456789ab"
    assert old.outside(view)
    other = _p(cgroup="/system.slice/run-u12.service")
    assert other.owner(view) == "unit run-u12.service" and other.outside(view)
    loose = _p(cgroup="/", invocation=None)
    assert loose.owner(Viewpoint("a.service")) == "no unit (cgroup /)"
    assert _p(cgroup="/user.slice/user-0.slice/session-3.scope").unit == "session-3.scope"


def test_a_left_over_that_left_the_cgroup_is_named_by_its_invocation() -> None:
    """An orphan moved out of the unit's cgroup still carries the INVOCATION_ID of the start
    it belonged to: a start the session saw is named as the unit's."""
    orphan = _p(cgroup="/cockpit-orphans", invocation="feedfacecafe0001", ppid=1)
    assert orphan.owner(Viewpoint("a.service", "new")) == "no unit (cgroup /cockpit-orphans)"
    seen = Viewpoint("a.service", "new", frozenset({"feedfacecafe0001"}))
    assert orphan.owner(seen) == (
        "PID 1's child from a.service's earlier invocation feedfacecafe, out of its cgroup (now /cockpit-orphans)"
    )
    assert orphan.outside(seen)
    stranger = _p(cgroup="/system.slice/b.service", invocation="0000")
    assert stranger.owner(seen) == "unit b.service"  # another unit's start is not ours


def test_the_running_start_is_the_one_whose_processes_may_hold_the_gpus() -> None:
    """A start under way (weights loading for minutes) owns its ranks; a unit waiting to
    restart after a crash has none: what holds its GPUs then is left over."""
    from cockpit.systemd.status import UnitStatus

    def running(active: str, sub: str) -> str | None:
        return UnitStatus("u", "h", active_state=active, sub_state=sub, invocation_id="inv").running_invocation

    assert running("active", "running") == running("reloading", "reload") == "inv"
    assert running("activating", "start") == "inv"
    assert running("activating", "auto-restart") is None and running("failed", "failed") is None
    starting = Viewpoint("u.service", running("activating", "start"))
    rank = _p(cgroup="/system.slice/u.service", invocation="inv")
    assert not rank.outside(starting)
