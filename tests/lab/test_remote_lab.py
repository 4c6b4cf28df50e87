"""The remote and systemd layers against the lab: real sshd, systemd and journald."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import asyncssh
import pytest

from cockpit.config import HostConfig
from cockpit.lab.lab import Lab
from cockpit.lab.network import set_link
from cockpit.remote.base import HostError, HostKeyChanged, HostKeyUnknown
from cockpit.remote.ssh import MAX_SESSIONS, SSHHost
from cockpit.systemd import journal, status
from cockpit.systemd.control import ControlError, ReadOnlyError, UnitControl
from cockpit.systemd.entry import JournalEntry
from tests.conftest import TEST_LAB, LabHandle, until

EDGE_WRITER = Path(__file__).resolve().parent.parent / "data" / "journal-edge-writer.py"
TICKER = (
    "[Unit]\nDescription=cockpit test ticker\n[Service]\n"
    'ExecStart=/usr/bin/python3 -u -c "import time, itertools\\nfor i in itertools.count():\\n'
    "    print(f'tick {i}', flush=True)\\n    time.sleep(0.05)\"\n"
)


@pytest.fixture
async def root(lab: LabHandle):
    host = SSHHost(HostConfig(name=lab.name))
    yield host
    await host.close()


@pytest.fixture(scope="module")
def ticker(lab: LabHandle):
    lab.ssh("tee", "/etc/systemd/system/ticker.service", input=TICKER)
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "start", "ticker")
    yield "ticker.service"
    lab.ssh("systemctl", "stop", "ticker", check=False)


def show_props(lab: LabHandle, unit: str) -> dict[str, str]:
    out = lab.ssh("systemctl", "show", "--timestamp=unix", unit).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


async def test_status_fields_match_systemctl_show(lab: LabHandle, root: SSHHost) -> None:
    st = await status.fetch(root, "sglang-demo.service")
    props = show_props(lab, "sglang-demo.service")
    assert st.active_state == props["ActiveState"] == "active"
    assert st.sub_state == props["SubState"]
    assert st.main_pid == int(props["MainPID"]) > 0
    assert st.n_restarts == int(props["NRestarts"])
    assert st.invocation_id == props["InvocationID"]
    assert st.fragment_path == props["FragmentPath"] == "/etc/systemd/system/sglang-demo.service"
    assert st.active_enter == float(props["ActiveEnterTimestamp"].lstrip("@"))
    assert st.need_daemon_reload is (props["NeedDaemonReload"] == "yes")


async def test_missing_unit_is_one_sentence(root: SSHHost) -> None:
    with pytest.raises(status.UnitNotFound, match=f"^unit nope.service not found on {TEST_LAB}$"):
        await status.fetch(root, "nope.service")


async def test_restart_changes_main_pid(lab: LabHandle, root: SSHHost) -> None:
    before = await status.fetch(root, "sglang-demo.service")
    await UnitControl(root, root.config).act("restart", "sglang-demo.service")
    after = await status.fetch(root, "sglang-demo.service")
    assert after.main_pid != before.main_pid and after.invocation_id != before.invocation_id
    assert after.main_pid == int(show_props(lab, "sglang-demo.service")["MainPID"])


async def test_follow_delivers_every_line_of_a_restart(lab: LabHandle, root: SSHHost) -> None:
    got: list[JournalEntry] = []
    follower = journal.JournalFollower(root, "sglang-demo.service", backlog=5)
    task = asyncio.create_task(follower.run(got.extend))
    await asyncio.sleep(1.0)
    first_new = len(got)
    await UnitControl(root, root.config).act("restart", "sglang-demo.service")
    deadline = time.monotonic() + 30
    while not any("ready to roll" in e.message for e in got[first_new:]):
        assert time.monotonic() < deadline, "the restart's ready line never arrived"
        await asyncio.sleep(0.2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    truth = await journal.after(root, "sglang-demo.service", got[0].cursor)
    delivered = [e.cursor for e in got[1:]]
    assert delivered == [e.cursor for e in truth][: len(delivered)]  # same cursors, in order
    assert len(set(delivered)) == len(delivered)  # none twice
    started = max(i for i, e in enumerate(got) if e.message.startswith("Started sglang-demo.service"))
    assert any(e.message.startswith("Stopping sglang-demo.service") for e in got[first_new:started])
    assert sum("Load weight begin" in e.message for e in got[started:]) == 8  # every rank's line


async def test_the_follow_reads_what_a_json_read_of_the_same_journal_reads(lab: LabHandle, root: SSHHost) -> None:
    """The follow reads export, a finished read json: a unit writing every kind of line the
    export sends differently (colours, `\\r`, invalid UTF-8, newlines in native messages, a
    field stored twice, a forged entry inside a message) is delivered live as json reads it."""
    lab.ssh("tee", "/tmp/journal-edge-writer.py", input=EDGE_WRITER.read_text())  # noqa: ASYNC240 - a small file
    unit = f"journal-edge-{os.getpid()}.service"
    got: list[JournalEntry] = []
    states: list[str] = []
    follower = journal.JournalFollower(root, unit, backlog=0, on_state=lambda state, detail: states.append(state))
    task = asyncio.create_task(follower.run(got.extend))
    try:
        await until(lambda: "following" in states, 15, states)
        lab.ssh("systemd-run", f"--unit={unit}", "--quiet", "--wait", "/usr/bin/python3", "/tmp/journal-edge-writer.py")
        await until(lambda: any("Deactivated successfully" in e.message for e in got), 30, got)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    truth = await journal.query(root, journal.journal_argv(unit))
    assert got == list(truth) and len(got) >= 19
    assert [e.binary for e in got].count(True) == 3  # colours, `\r`, invalid UTF-8; a newline is text


async def test_no_remote_journalctl_remains_after_cancel(lab: LabHandle, root: SSHHost) -> None:
    follower = journal.JournalFollower(root, "sglang-demo.service", backlog=1)
    task = asyncio.create_task(follower.run(lambda batch: None))
    await asyncio.sleep(1.0)
    assert "journalctl" in lab.ssh("pgrep", "-a", "journalctl", check=False).stdout
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0.7)
    assert lab.ssh("pgrep", "-a", "journalctl", check=False).stdout.strip() == ""


async def test_only_a_closing_hosts_stream_ends_before_its_command(root: SSHHost, lab: LabHandle) -> None:
    """A stream's end waits for sshd to close the channel, which it does once the command has
    exited: the next channel would otherwise be an eleventh. A host whose connection closes next
    (the session quitting) has no next channel, so its streams end at once: a quit no longer waits
    seconds for nvidia-smi's loop to reach its next block and notice its channel is gone."""
    for closing in (False, True):
        end = f"/tmp/stream-end-{closing}"
        # writes a line every 1.5 s (under the 2 s bound); the first write after the channel
        # closed fails, and the command stamps its end on the host's clock, which is this one's
        loop = f"rm -f {end}; trap '' PIPE; while echo tick; do sleep 1.5; done; date +%s.%N > {end}"
        root.closing = closing
        async with root.stream(["sh", "-c", loop]) as lines:
            assert (await lines.read_chunk()).startswith(b"tick")
        stream_ended = time.time()
        await until(lambda end=end: lab.ssh("test", "-s", end, check=False).returncode == 0, 15, f"{end} never written")
        command_ended = float(lab.ssh("cat", end).stdout)
        assert (stream_ended < command_ended) is closing, (closing, stream_ended, command_ended)


async def test_follow_resumes_after_the_link_goes_down(lab: LabHandle, root: SSHHost, ticker: str) -> None:
    got: list[JournalEntry] = []
    states: list[str] = []
    follower = journal.JournalFollower(root, ticker, backlog=1, on_state=lambda s, d: states.append(s))
    task = asyncio.create_task(follower.run(got.extend))
    await asyncio.sleep(1.5)
    net = Lab(lab.name).net()
    set_link(net, up=False)
    await asyncio.sleep(12)  # keepalive declares the connection dead, reconnects fail meanwhile
    set_link(net, up=True)
    deadline = time.monotonic() + 40
    while "following" not in states[states.index("reconnecting") :] if "reconnecting" in states else True:
        assert time.monotonic() < deadline, f"never resumed: {states}"
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    truth = await journal.after(root, ticker, got[0].cursor)
    delivered = [e.cursor for e in got[1:]]
    assert len(delivered) > 200  # about 12 s of ticks went by while the link was down
    assert delivered == [e.cursor for e in truth][: len(delivered)]
    ticks = [int(e.message.split()[1]) for e in got if e.message.startswith("tick ")]
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks)))  # no gap, no duplicate


async def test_reconnects_after_sshd_restart(lab: LabHandle) -> None:
    states: list[str] = []
    host = SSHHost(HostConfig(name=lab.name), on_state=lambda s, d: states.append(s))

    def sshd_started() -> int:
        return int(lab.ssh("systemctl", "show", "-p", "ActiveEnterTimestampMonotonic", "--value", "ssh").stdout)

    before = sshd_started()
    await status.fetch(host, "sglang-demo.service")
    assert states == ["connecting", "connected"]
    # Stop sshd and every session it serves, ours included, then start it again.
    lab.ssh(
        "systemd-run",
        "--on-active=1",
        "--timer-property=AccuracySec=10ms",
        f"--unit=sshd-bounce-{os.getpid()}-{time.monotonic_ns()}",
        "sh",
        "-c",
        # OpenSSH 9.8 and later serve each session from an `sshd-session` process
        "systemctl stop ssh; pkill -KILL -x sshd; pkill -KILL -x sshd-session; sleep 1; systemctl start ssh",
    )
    deadline = time.monotonic() + 30
    while states.count("connected") < 2:  # polling, as the status pane does, until a new connection
        assert time.monotonic() < deadline, f"no reconnection: {states}"
        with contextlib.suppress(HostError):
            st = await status.fetch(host, "sglang-demo.service")
        await asyncio.sleep(0.5)
    assert "reconnecting" in states and states[-1] == "connected"
    assert st.active_state == "active"
    lab.wait_for(lambda: lab.ssh("true", check=False).returncode == 0, what="sshd to answer OpenSSH too")
    assert sshd_started() > before
    await host.close()


def _custom_config(tmp_path: Path, lab: LabHandle, known_hosts: str) -> Path:
    info = Lab(lab.name).info()
    (tmp_path / "known_hosts").write_text(known_hosts)
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host keytest\n  HostName {info.address}\n  User root\n"
        f"  IdentityFile {Lab(lab.name).client_key}\n  UserKnownHostsFile {tmp_path / 'known_hosts'}\n"
    )
    return cfg


async def test_changed_host_key_is_refused(tmp_path: Path, lab: LabHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    info = Lab(lab.name).info()
    other = tmp_path / "other"
    await asyncio.to_thread(
        subprocess.run, ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True
    )
    fake = (tmp_path / "other.pub").read_text().split()
    monkeypatch.setenv(
        "COCKPIT_SSH_CONFIG", str(_custom_config(tmp_path, lab, f"{info.address} {fake[0]} {fake[1]}\n"))
    )
    asked = []

    async def prompt(host: str, fp: str) -> bool:
        asked.append(fp)
        return True

    host = SSHHost(HostConfig(name="keytest"), trust_prompt=prompt)
    with pytest.raises(HostKeyChanged, match="has CHANGED"):
        await host.run(["true"])
    assert asked == []  # never offered for trust
    assert (tmp_path / "known_hosts").read_text().count("\n") == 1


async def test_unknown_host_key_is_trusted_only_when_accepted(
    tmp_path: Path, lab: LabHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COCKPIT_SSH_CONFIG", str(_custom_config(tmp_path, lab, "")))
    pub = Lab(lab.name).guest_keys / "ssh_host_ed25519_key.pub"
    keygen = await asyncio.to_thread(subprocess.run, ["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True)
    expected = keygen.stdout.split()[1]
    asked: list[str] = []

    async def refuse(host: str, fp: str) -> bool:
        asked.append(fp)
        return False

    with pytest.raises(HostKeyUnknown):
        await SSHHost(HostConfig(name="keytest"), trust_prompt=refuse).run(["true"])
    with pytest.raises(HostKeyUnknown):
        await SSHHost(HostConfig(name="keytest")).run(["true"])  # no prompt: never trusted silently
    assert asked == [expected] and (tmp_path / "known_hosts").read_text() == ""

    async def accept(host: str, fp: str) -> bool:
        return True

    host = SSHHost(HostConfig(name="keytest"), trust_prompt=accept)
    assert (await host.run(["hostname"])).text.strip() == lab.name
    await host.close()
    assert (await SSHHost(HostConfig(name="keytest")).run(["true"])).ok  # now known


async def test_operator_without_sudo_rights_gets_the_sudo_message(lab: LabHandle) -> None:
    op = SSHHost(HostConfig(name=f"{lab.name}-operator", sudo=True, user="operator"))
    try:
        await UnitControl(op, op.config).act("restart", "sglang-demo.service")  # allowed by sudoers
        lab.ssh("mv", "/etc/sudoers.d/operator", "/root/operator.sudoers")
        with pytest.raises(ControlError) as e:
            await UnitControl(op, op.config).act("restart", "sglang-demo.service")
        assert str(e.value) == (
            f"sudo on {lab.name}-operator needs a password: allow `systemctl` for operator with NOPASSWD"
        )
        plain = HostConfig(name=f"{lab.name}-operator", sudo=False, user="operator")
        with pytest.raises(ControlError, match="may not manage units without sudo: set `sudo = true`"):
            await UnitControl(op, plain).act("restart", "sglang-demo.service")
        with pytest.raises(ReadOnlyError):
            await UnitControl(op, op.config, read_only=True).act("stop", "sglang-demo.service")
    finally:
        lab.ssh("mv", "/root/operator.sudoers", "/etc/sudoers.d/operator", check=False)
        await op.close()


async def test_channels_stay_under_max_sessions(root: SSHHost, lab: LabHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """Six followers and six commands at once on one connection while status queries go through the
    command channel: the queries share that one channel, and the rest never hold more than the
    eight sessions left to them (sshd's MaxSessions is 10). sshd may still refuse an open while a
    closed follower's journalctl has not exited (a busy host takes a while): that open is tried
    again, and counted apart."""
    lab.wait_ready()  # as written: the followers below read a demo that logs (the operator test restarts it)
    conn = await root.connection()
    live: set[int] = set()  # the session channels open now, by channel number
    opened: list[int] = []
    peak = 0
    add, remove = conn.add_channel, conn.remove_channel

    def add_channel(chan: object) -> int:  # every channel asyncssh makes goes through these two
        nonlocal peak
        number = add(chan)
        if isinstance(chan, asyncssh.SSHClientChannel):  # sessions: what MaxSessions counts (TCP forwards do not)
            live.add(number)
            opened.append(number)
            peak = max(peak, len(live))
        return number

    def remove_channel(number: int) -> None:  # called once the channel is closed both ways
        live.discard(number)
        remove(number)

    refused = 0  # opens sshd refused and the host tried again (cockpit.remote.ssh._opened)
    create_process = conn.create_process  # what every command, follower and query opens through

    async def counting(*args: object, **kwargs: object) -> asyncssh.SSHClientProcess:
        nonlocal refused
        try:
            return await create_process(*args, **kwargs)
        except asyncssh.ChannelOpenError:
            refused += 1
            raise

    monkeypatch.setattr(conn, "add_channel", add_channel)
    monkeypatch.setattr(conn, "remove_channel", remove_channel)
    monkeypatch.setattr(conn, "create_process", counting)

    for _ in range(3):
        assert (await root.query(["systemctl", "is-active", "sglang-demo"])).text.strip() == "active"
    assert len(opened) == 1 and live == set(opened)  # three queries, one command channel, still open
    [command_channel] = opened

    async def follow() -> None:
        async with root.stream(["journalctl", "-u", "sglang-demo", "-n", "1", "-f"]) as lines:
            async for _ in lines:
                await asyncio.sleep(1.0)
                return

    results = await asyncio.gather(
        *(follow() for _ in range(6)),
        *(root.run(["sleep", "0.5"]) for _ in range(6)),
        *(root.query(["systemctl", "is-active", "sglang-demo"]) for _ in range(6)),
        return_exceptions=True,
    )
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert [r.text.strip() for r in results[12:]] == ["active"] * 6
    # a channel for each follower and command, all nine queries on the first; and the opens sshd
    # refused while a closed follower's journalctl had not exited yet, each tried again
    assert len(opened) - refused == 1 + 12
    assert peak == 1 + (MAX_SESSIONS - 2)  # the command channel and eight others at most; SFTP's slot stays free
    assert live == {command_channel}  # the followers' and commands' channels are closed again


async def test_a_session_sshd_still_counts_is_waited_for(root: SSHHost) -> None:
    """sshd counts a session until its command exits, whatever the channel's state: with the
    connection full, a command waits (tries the refused open again) until one ends, and runs."""
    conn = await root.connection()
    held: list[asyncssh.SSHClientProcess] = []
    try:
        with pytest.raises(asyncssh.ChannelOpenError):  # fill the connection past the semaphore's back
            for _ in range(MAX_SESSIONS + 1):
                held.append(await conn.create_process("cat", encoding=None))  # ends when its stdin closes
        assert len(held) <= MAX_SESSIONS
        began = time.monotonic()
        waiting = asyncio.ensure_future(root.run(["echo", "ran"]))
        await asyncio.sleep(0.5)
        assert not waiting.done()  # refused so far, and not given up
        held.pop().close()
        result = await asyncio.wait_for(waiting, 5)
        assert result.text == "ran\n" and time.monotonic() - began >= 0.5
    finally:
        for process in held:
            process.close()


async def test_through_a_jump_host(lab: LabHandle, tmp_path: Path) -> None:
    jump_lab = Lab(f"{TEST_LAB}-j")
    jump_lab.up(progress=lambda m: None)
    try:
        jump = SSHHost(HostConfig(name=jump_lab.name))
        target = SSHHost(HostConfig(name=lab.name, jump=jump_lab.name), jump=jump)
        st = await status.fetch(target, "sglang-demo.service")
        assert st.active_state == "active"
        who = (await jump.run(["sh", "-c", "ss -tn state established '( dport = :22 )'"])).text
        assert Lab(lab.name).info().address in who  # the session to the target leaves from the jump host
        await target.close()
        await jump.close()
    finally:
        jump_lab.down()


def test_cli_status_json(lab: LabHandle) -> None:
    lab.wait_ready()  # the operator test before restarts the demo
    out = subprocess.run(
        [
            str(Path(__import__("sys").executable).with_name("cockpit")),
            "status",
            "--host",
            lab.name,
            "--unit",
            "sglang-demo",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    data = json.loads(out.stdout)
    assert data["active_state"] == "active" and data["ready"] is True and out.returncode == 0
    assert data["main_pid"] == int(show_props(lab, "sglang-demo.service")["MainPID"])
    missing = subprocess.run(
        [str(Path(__import__("sys").executable).with_name("cockpit")), "status", "--host", lab.name, "--unit", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and missing.stderr.strip() == f"cockpit: unit nope.service not found on {lab.name}"


async def test_a_forward_goes_through_openssh_and_falls_back_to_the_connection(
    lab: LabHandle, root: SSHHost, monkeypatch
) -> None:
    """Load runs leave through the user's `ssh -L` (it keeps up at 256 streams); with no OpenSSH
    client, through the shared asyncssh connection. Either way the server answers, and no
    `ssh` is left running afterwards."""
    import shutil
    import subprocess
    import urllib.request

    lab.wait_ready()  # the operator test restarts the demo: its /health says 503 while it warms up

    def health(port: int) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as resp:
            return resp.status

    for expected in ("openssh", "asyncssh"):
        if expected == "asyncssh":
            monkeypatch.setattr(shutil, "which", lambda name: None)
        async with root.forward_port("127.0.0.1", 30000) as local:
            assert await asyncio.to_thread(health, local) == 200
        assert root.forwarded_by is not None and root.forwarded_by.startswith(expected), root.forwarded_by
    argv = ["pgrep", "-f", "cockpit-ssh-.*-L 127.0.0.1:"]
    left = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True)
    assert left.stdout.strip() == ""
