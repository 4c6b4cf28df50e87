"""The one-shot reads through the user's OpenSSH (cockpit.remote.mux) against the lab: the same
answers as the asyncssh connection, the same sentences for what is missing or refused, no
`ssh` left behind, and asyncssh's connection used instead when OpenSSH cannot log in."""

from __future__ import annotations

import asyncio
import json
import marshal
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cockpit.cli.target import early_reader
from cockpit.config import Config, HostConfig
from cockpit.lab.paths import ssh_configs
from cockpit.remote.base import FileMissing, HostError
from cockpit.remote.mux import MuxHost
from cockpit.remote.ssh import SSHHost
from cockpit.remote.ssh_client import config_paths
from cockpit.session import Listener, Session
from cockpit.systemd import status
from cockpit.targets import Target
from tests.conftest import LabHandle

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
UNIT = "sglang-demo.service"


def _files() -> list[str]:
    return config_paths([str(p) for p in ssh_configs()])


def _left_running() -> str:
    return subprocess.run(["pgrep", "-af", "cockpit-mux-"], capture_output=True, text=True).stdout.strip()


async def test_the_reads_answer_as_the_asyncssh_connection_does(lab: LabHandle) -> None:
    mux = MuxHost(HostConfig(name=lab.name), _files(), first=status.show_argv([UNIT]))
    root = SSHHost(HostConfig(name=lab.name))
    try:
        await mux.ready()
        first, again = await status.fetch(mux, UNIT), await status.fetch(mux, UNIT)  # `first`, then a client
        truth = await status.fetch(root, UNIT)
        for st in (first, again):
            assert (st.active_state, st.main_pid, st.invocation_id) == (
                truth.active_state,
                truth.main_pid,
                truth.invocation_id,
            )
            assert st.main_pid and st.main_pid > 0
        fragment = truth.fragment_path
        assert fragment is not None
        assert await mux.read_file(fragment) == await root.read_file(fragment)
        assert await mux.read_file(fragment, limit=7) == (await root.read_file(fragment))[:7]
        assert await mux.stat(fragment) == await root.stat(fragment)
        assert await mux.realpath("/etc/../etc/systemd") == "/etc/systemd"
        with pytest.raises(FileMissing, match=f"/nonexistent does not exist on {lab.name}"):
            await mux.read_file("/nonexistent")
        assert (await mux.http_request("GET", "127.0.0.1", 30000, "/health"))[0] == 200
        with pytest.raises(OSError):  # nothing listens there: the same family as a refused socket
            await mux.http_request("GET", "127.0.0.1", 30009, "/health")
        with pytest.raises(HostError, match="only reads"):
            await mux.write_file("/tmp/x", b"x", 0o644)
        odd = await mux.run(["printf", "%s|", "a b", "$HOME", "it's", "x\ny"])  # quoted once, as given
        assert odd.stdout == b"a b|$HOME|it's|x\ny|"
    finally:
        await mux.close()
        await root.close()
    assert _left_running() == ""


async def test_a_first_answer_already_in_is_read_in_the_same_turn_of_the_loop(lab: LabHandle) -> None:
    """The app's imports outlast the login: by the time it asks, ssh has answered, and the status
    is read without handing the loop back (the app then draws it with its first frame)."""
    mux = MuxHost(HostConfig(name=lab.name), _files(), first=status.show_argv([UNIT]))
    try:
        await mux.ready()
        assert mux._master is not None
        await asyncio.to_thread(mux._master.wait)  # ssh has answered and ended
        asked = status.fetch(mux, UNIT)
        with pytest.raises(StopIteration) as answered:  # it never suspended
            asked.send(None)
        assert answered.value.value.active_state == "active"
    finally:
        await mux.close()
    assert _left_running() == ""


async def test_a_file_the_login_may_not_read_is_a_permission_sentence(lab: LabHandle) -> None:
    mux = MuxHost(HostConfig(name=f"{lab.name}-operator"), _files())
    try:
        await mux.ready()
        with pytest.raises(HostError, match=f"permission denied reading /etc/shadow on {lab.name}-operator"):
            await mux.read_file("/etc/shadow")
    finally:
        await mux.close()


async def test_a_master_that_cannot_log_in_says_why(lab: LabHandle, tmp_path: Path) -> None:
    """An empty known_hosts: OpenSSH, told never to ask, refuses; `ready` gives ssh's word."""
    known = tmp_path / "known_hosts"
    known.write_text("")
    cfg = tmp_path / "ssh_config"
    lab_cfg = next(p for p in ssh_configs() if p.parent.name == lab.name)
    cfg.write_text(f"Host {lab.name}\n  UserKnownHostsFile {known}\n" + lab_cfg.read_text())
    mux = MuxHost(HostConfig(name=lab.name), [str(cfg)])
    try:
        with pytest.raises(HostError, match="Host key verification failed"):
            await mux.ready()
    finally:
        await mux.close()
    assert _left_running() == ""


async def test_the_apps_first_status_comes_before_asyncssh_has_connected(lab: LabHandle) -> None:
    """The early master's status is on screen first; the poll's own connection comes after."""
    heard: list[str] = []

    class Heard(Listener):
        def status(self, st: status.UnitStatus) -> None:
            heard.append(f"status {st.active_state}")

        def connection(self, state: str, detail: str | None) -> None:
            heard.append(state)

        def failed(self, what: str, detail: str) -> None:
            heard.append(f"failed: {what}: {detail}")

    target = Target(lab.name, UNIT)
    session = Session(Config(), target, reader=early_reader(Config(), target))
    session.listener = Heard()
    session.start()
    try:
        deadline = asyncio.get_running_loop().time() + 30
        while "connected" not in heard or heard.count("status active") < 2:
            assert asyncio.get_running_loop().time() < deadline, heard
            await asyncio.sleep(0.05)
    finally:
        await session.close()
    assert heard[0] == "status active", heard  # before "connecting": no asyncssh yet
    assert not [h for h in heard if h.startswith("failed")], heard
    assert session.reader is None and _left_running() == ""


def test_cockpit_status_needs_no_asyncssh_when_openssh_logs_in(lab: LabHandle, tmp_path: Path) -> None:
    """With OpenSSH: asyncssh is never imported. Without it on PATH: the same answer through
    asyncssh. Either way the same JSON."""
    argv = [sys.executable, "-X", "importtime", "-m", "cockpit", "status", "--host", lab.name, "--unit", UNIT]
    with_ssh = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=60)
    assert with_ssh.returncode == 0, with_ssh.stderr[-2000:]
    assert "asyncssh" not in with_ssh.stderr
    bare = tmp_path / "bin"
    bare.mkdir()
    env = dict(os.environ, PATH=str(bare))  # no ssh (nor anything else) to be found
    without = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=60, env=env)
    assert without.returncode == 0, without.stderr[-2000:]
    assert "asyncssh" in without.stderr
    a, b = json.loads(with_ssh.stdout), json.loads(without.stdout)
    assert a["active_state"] == "active" and a["ready"] is True
    assert (a["active_state"], a["main_pid"], a["invocation_id"], a["ready"]) == (
        b["active_state"],
        b["main_pid"],
        b["invocation_id"],
        b["ready"],
    )


async def test_the_early_state_line_draws_the_masters_first_answer_and_leaves_it_to_query(lab: LabHandle) -> None:
    """The line the terminal gets before the app is imported (cockpit/ui/early_state.py) holds
    what `systemctl show` says of the unit, drawn from the master's own first answer; the
    session's first `query` still gets that answer, and no second login is made for it."""
    from cockpit.ui.early_state import BACK, ENTER, EarlyState

    mux = MuxHost(HostConfig(name=lab.name), _files(), first=status.show_argv([UNIT]))
    root = SSHHost(HostConfig(name=lab.name))
    read, write = os.pipe()
    try:
        early = EarlyState(mux, write)
        await asyncio.to_thread(early._thread.join, 30)
        assert early.drawn
        drawn = os.read(read, 1 << 16).decode()
        truth = await status.fetch(root, UNIT)
        assert drawn.startswith(ENTER) and drawn.endswith(BACK), drawn
        assert f"{truth.active_state} ({truth.sub_state})" in drawn and f"{UNIT}\x1b[0m" in drawn, drawn
        assert (await status.fetch(mux, UNIT)).invocation_id == truth.invocation_id
    finally:
        os.close(read)
        os.close(write)
        await mux.close()
        await root.close()


def _now(lab: LabHandle) -> str:
    return "@" + lab.ssh("date", "+%s.%N").stdout.strip()


def _connections(lab: LabHandle, since: str, until: str) -> tuple[int, int]:
    """Between two `_now`s: the logins sshd accepted (less the one the second `_now` made), and
    the connections it saw closed before a login (an ssh ended while it logged in)."""
    said = lab.ssh("journalctl", "--since", since, "--until", until, "-o", "cat", "--no-pager").stdout.splitlines()
    logins = sum("Accepted publickey" in line for line in said) - 1
    return logins, sum("[preauth]" in line and "Connection" in line for line in said)


def test_a_second_launch_logs_in_once_with_the_master_forked_before_the_cockpit_imports(
    lab: LabHandle, tmp_path: Path
) -> None:
    """`cockpit status` remembers its master's command line; the next launch with the same words
    forks it first (cockpit/remote/early_master.py) and the cockpit takes it: one connection,
    the same answer. A remembered line the cockpit would no longer run is started and ended (a
    second connection, closed), with no process nor directory of it left behind, and the
    cockpit's own line remembered again."""
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path))
    argv = [COCKPIT, "status", "--host", lab.name, "--unit", UNIT, "--json"]
    mux_dirs = lambda: {p.name for p in Path(tempfile.gettempdir()).glob("cockpit-mux-*")}  # noqa: E731
    before = mux_dirs()

    def launch() -> tuple[dict, tuple[int, int]]:
        since = _now(lab)
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        until = _now(lab)
        lab.wait_for(lambda: _connections(lab, since, until)[0] >= 1, timeout=10, what="the login in sshd's journal")
        time.sleep(0.5)  # a closed connection's line, if any, after the login's
        return json.loads(out.stdout), _connections(lab, since, until)

    first, connections = launch()
    assert connections == (1, 0) and first["active_state"] == "active"
    memory = tmp_path / "cockpit" / "launch.marshal"
    remembered = marshal.loads(memory.read_bytes())
    assert [entry["argv"][-3] for entry in remembered.values()] == [lab.name]

    second, connections = launch()
    assert connections == (1, 0)  # the early master's login was the cockpit's
    assert (second["main_pid"], second["invocation_id"]) == (first["main_pid"], first["invocation_id"])

    def remember(argv: list[str]) -> None:
        memory.write_bytes(marshal.dumps({key: {**entry, "argv": argv} for key, entry in remembered.items()}))

    # what an older cockpit ran: forked, unlike, ended (so the count above can see one)
    (real,) = [entry["argv"] for entry in remembered.values()]
    remember([word.replace("ControlPersist=", "ControlPersist=4") for word in real])
    _, (logins, closed) = launch()
    assert logins + closed == 2, (logins, closed)

    marker = tmp_path / "forked"
    program = tmp_path / "bin" / "ssh"  # the early master runs nothing but an ssh
    program.parent.mkdir()
    program.write_text(f"#!/bin/sh\necho early > {marker}\nexec sleep 60\n")
    program.chmod(0o755)
    for _ in range(3):  # the cockpit may end it before the shell has written
        remember([str(program), "-M"])
        third, connections = launch()
        if marker.exists():
            break
    assert marker.read_text() == "early\n"
    assert connections == (1, 0) and third["invocation_id"] == first["invocation_id"]
    assert not subprocess.run(["pgrep", "-f", "^sleep 60$"], capture_output=True).stdout
    assert _left_running() == ""
    assert mux_dirs() <= before
    lines = lambda memory: [(e["argv"], e["conf"]) for e in memory.values()]  # noqa: E731
    assert lines(marshal.loads(memory.read_bytes())) == lines(remembered)  # this launch's own, remembered again
