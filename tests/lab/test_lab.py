"""The lab: a real systemd, journald and sshd, and the stand-in running as a unit in it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from cockpit.lab.lab import Lab, _cgroup_dirs, _is_lab_process
from cockpit.lab.network import LabNet
from tests.conftest import FIXTURES, LAB_PYTHON, TEST_LAB, LabHandle

EAGLE_BAD = [
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "/models/EAGLE3-LLaMA3.1-Instruct-8B",
    "--speculative-eagle-topk",
    "4",
    "--speculative-num-draft-tokens",
    "3",
]


def journal(lab: LabHandle, *extra: str) -> list[dict]:
    out = lab.ssh("journalctl", "-u", "sglang-demo", "-o", "json", "--all", "--no-pager", *extra).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def messages(entries: list[dict]) -> list[str]:
    out = []
    for e in entries:
        m = e.get("MESSAGE")
        out.append(bytes(m).decode("utf-8", "replace") if isinstance(m, list) else (m or ""))
    return out


def test_system_is_running_over_ssh_with_strict_host_keys(lab: LabHandle) -> None:
    info = Lab(lab.name).info()
    assert info is not None
    config = Path(info.ssh_config).read_text()
    assert "StrictHostKeyChecking yes" in config and f"UserKnownHostsFile {info.known_hosts}" in config
    state = subprocess.run(
        ["ssh", "-F", info.ssh_config, lab.name, "systemctl", "is-system-running"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.strip()
    assert state in ("running", "degraded")


def test_journal_holds_the_standin_start_up(lab: LabHandle) -> None:
    lines = messages(journal(lab))
    assert any("Running cockpit lab stand-in" in m for m in lines)
    for rank in range(8):  # one worker per --tp-size rank, each with its prefix
        assert any(re.search(rf"^\[[\d\- :]+ TP{rank}\] Load weight begin", m) for m in lines), rank
    assert any("max_total_num_tokens=" in m for m in lines)
    assert lines.index(next(m for m in lines if "ready to roll" in m)) > 8


def test_operator_may_only_use_sudo_for_systemctl_and_the_write_contract(lab: LabHandle) -> None:
    ok = lab.ssh("sudo", "-n", "systemctl", "is-active", "sglang-demo", user="operator", check=False)
    assert ok.stdout.strip() == "active"
    refused = lab.ssh("sudo", "-n", "cat", "/etc/shadow", user="operator", check=False)
    assert refused.returncode != 0 and "password is required" in refused.stderr
    assert lab.ssh("id", "-un", user="operator").stdout.strip() == "operator"


def test_lab_traffic_stays_in_the_lab_range(lab: LabHandle) -> None:
    routes = lab.ssh("ip", "route").stdout
    assert "default" not in routes and "10.213.0.0/16" in routes
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() == "0"


def test_eagle_flags_fail_with_the_real_traceback_and_real_source(lab: LabHandle) -> None:
    dropin = "/etc/systemd/system/sglang-demo.service.d/eagle.conf"
    exec_start = (
        "ExecStart=/opt/sglang/venv/bin/python -m cockpit.lab.standin "
        "--model-path /models/Llama-3.1-8B-Instruct --tp-size 8 " + " ".join(EAGLE_BAD)
    )
    lab.ssh("mkdir", "-p", "/etc/systemd/system/sglang-demo.service.d")
    lab.ssh("tee", dropin, input=f"[Service]\nRestart=no\nExecStart=\n{exec_start}\n")
    cursor = journal(lab, "-n", "1")[-1]["__CURSOR"]
    try:
        lab.ssh("systemctl", "daemon-reload")
        lab.ssh("systemctl", "restart", "sglang-demo")
        lab.wait_for(
            lambda: lab.ssh("systemctl", "is-failed", "sglang-demo", check=False).stdout.strip() == "failed",
            what="the unit to fail",
        )
        # journald may read the stream's last lines after systemd has seen the exit.
        lab.wait_for(
            lambda: "AssertionError" in messages(journal(lab, "--after-cursor", cursor)),
            what="the traceback in the journal",
        )
        lines = messages(journal(lab, "--after-cursor", cursor))
        expected = (FIXTURES / "sglang/launch_server/launch_server-0.5.23-eagle3-topk4-drafttok3.txt").read_text()
        expected = expected.replace("/python3.11/", f"/{LAB_PYTHON}/")  # the lab's own Python's site-packages
        start = expected.index("Traceback (most recent call last):")
        want = expected[start:].rstrip("\n").splitlines()
        got = lines[lines.index("Traceback (most recent call last):") :][: len(want)]
        assert got == want  # the whole traceback, line for line, nothing cut
        # Every frame names a file that exists in the lab with the quoted code on that line.
        frames = re.findall(r'^  File "(/opt/[^"]+)", line (\d+), in \S+\n    (.+)$', expected[start:], re.M)
        assert len(frames) >= 7
        for path, line, code in frames:
            shown = lab.ssh("sed", "-n", f"{line}p", path).stdout.strip()
            assert shown == code.strip(), (path, line)
    finally:
        lab.ssh("rm", "-f", dropin)
        lab.ssh("systemctl", "daemon-reload")
        lab.ssh("systemctl", "reset-failed", "sglang-demo", check=False)
        lab.ssh("systemctl", "restart", "sglang-demo")
        lab.wait_ready()  # the next tests ask the demo's server: since lab down stopped waiting 10 s, at once


@pytest.mark.lab
def test_down_is_idempotent_and_leaves_nothing(tmp_path: Path) -> None:
    second = Lab(f"{TEST_LAB}-b")
    info = second.up(progress=lambda m: None)
    net = LabNet(second.name, info.index)
    assert Path(net.netns_path).exists()
    assert second.down() is True
    assert not Path(net.netns_path).exists()
    assert not Path(f"/sys/class/net/{net.host_if}").exists()
    assert not any(cg.exists() for cg in _cgroup_dirs(second.name))
    assert not second.state_dir.exists()  # keys, ssh_config and units go too
    assert second.down() is False  # twice is safe
    assert second.info() is None


@pytest.mark.lab
def test_a_payload_cgroup_left_by_an_earlier_run_does_not_stop_the_boot() -> None:
    """CI's real lab once failed to boot ("Failed to chown() cgroup .../payload", "Parent died too
    early"): its unified hierarchy kept an empty `payload` from the run before, so nspawn took it
    for its own and never made the compat one. Remade here as it was."""
    again = Lab(f"{TEST_LAB}-c")
    unified, *_ = _cgroup_dirs(again.name)
    (unified / "payload").mkdir(parents=True)
    try:
        info = again.up(progress=lambda m: None)
        assert Lab(again.name).info() == info
        assert again.down() is True
    finally:
        again.down()
    assert not unified.exists()


@pytest.mark.lab
def test_an_nspawn_that_died_unreaped_is_not_taken_for_a_booting_lab() -> None:
    """The boot above waited its whole 30 s for SSH: the dead nspawn, a zombie nobody reaped, still
    named the lab's cgroup. A dead launcher ends the wait at once, with its console's words."""
    name = f"{TEST_LAB}-z"
    cgroups = _cgroup_dirs(name)
    for cg in cgroups:
        cg.mkdir()
    try:

        def join() -> None:
            for cg in cgroups:
                (cg / "cgroup.procs").write_text(f"{os.getpid()}\n")

        child = subprocess.Popen(["sleep", "0.2"], preexec_fn=join)
        assert _is_lab_process(child.pid, name)
        time.sleep(0.6)  # exited, not reaped: a zombie
        assert Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
        assert f"/cockpit-lab-{name}" in Path(f"/proc/{child.pid}/cgroup").read_text()
        assert not _is_lab_process(child.pid, name)
        child.wait()
    finally:
        for cg in cgroups:
            cg.rmdir()


def _cockpit(*argv: str) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run(
        [str(Path(sys.executable).with_name("cockpit")), *argv], capture_output=True, text=True, timeout=60
    )


def test_lab_ssh_runs_exactly_the_argv_and_one_string_as_a_shell_command(lab: LabHandle) -> None:
    script = "import sys, urllib.request as u; print(sys.argv[1:], u.Request('http://x/', data=b'').get_method())"
    out = _cockpit("lab", "ssh", "--name", lab.name, "--", "python3", "-c", script, "a b", "$HOME", "it's")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['a b', '$HOME', \"it's\"] POST"
    shell = _cockpit("lab", "ssh", "--name", lab.name, "--", "echo $((6 * 7)) | tr 4 x")
    assert shell.stdout.strip() == "x2"


def test_lab_crash_makes_every_rank_print_its_traceback(lab: LabHandle) -> None:
    lab.wait_ready()  # an earlier test may have restarted it: its server must be up to be asked
    since = lab.ssh("date", "+%Y-%m-%d %H:%M:%S").stdout.strip()
    out = _cockpit("lab", "crash", "--name", lab.name)
    assert out.returncode == 0 and "crashes on 8 ranks" in out.stdout, out.stderr

    def crashed() -> int:
        text = lab.ssh("journalctl", "-u", "sglang-demo", "--since", since, "-o", "cat").stdout
        return len(set(re.findall(r" (TP\d)\] Scheduler hit an exception: Traceback", text)))

    lab.wait_for(lambda: crashed() == 8, what="eight ranks' tracebacks")
    lab.wait_for_line("sglang-demo", "ready to roll", 60, "--since", since)
