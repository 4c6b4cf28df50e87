"""Host keys as strictly as OpenSSH checks them: the user's and the global known_hosts, a config
that says `UserKnownHostsFile none`, a key that contradicts any file, and a declined key that
is not offered again. Where OpenSSH refuses, the cockpit refuses too (checked side by side)."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from cockpit.config import HostConfig
from cockpit.lab.lab import Lab
from cockpit.remote.base import HostKeyChanged, HostKeyUnknown
from cockpit.remote.ssh import SSHHost
from tests.conftest import LabHandle


def _key_line(address: str, pub: Path) -> str:
    kind, key = pub.read_text().split()[:2]
    return f"{address} {kind} {key}\n"


@pytest.fixture
def keys(fault_lab: LabHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`write(user=..., global_=...)`: an ssh_config for alias `keytest` naming those two files
    (None: the option is `none`, unless `user_file` names a user file that does not exist yet);
    returns the config's path. `right`/`wrong`: known_hosts lines."""
    lab = Lab(fault_lab.name)
    info = lab.info()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    right = _key_line(info.address, lab.guest_keys / "ssh_host_ed25519_key.pub")
    wrong = _key_line(info.address, tmp_path / "other.pub")

    def write(user: str | None, global_: str | None, user_file: Path | None = None) -> Path:
        user_path = user_file or tmp_path / "user_known_hosts"
        global_path = tmp_path / "global_known_hosts"
        if user is not None:
            user_path.parent.mkdir(parents=True, exist_ok=True)
            user_path.write_text(user)
        if global_ is not None:
            global_path.write_text(global_)
        cfg = tmp_path / "ssh_config"
        cfg.write_text(
            f"Host keytest\n  HostName {info.address}\n  User root\n  IdentityFile {lab.client_key}\n"
            f"  UserKnownHostsFile {user_path if user is not None or user_file is not None else 'none'}\n"
            f"  GlobalKnownHostsFile {global_path if global_ is not None else 'none'}\n"
        )
        monkeypatch.setenv("COCKPIT_SSH_CONFIG", str(cfg))
        return cfg

    write.right, write.wrong = right, wrong  # type: ignore[attr-defined]
    return write


def _openssh_refuses(cfg: Path) -> bool:
    proc = subprocess.run(
        ["ssh", "-F", str(cfg), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "keytest", "true"],
        capture_output=True,
        timeout=30,
    )
    return proc.returncode == 255


class Prompt:
    def __init__(self, answer: bool) -> None:
        self.answer, self.asked = answer, []

    async def __call__(self, host: str, fingerprint: str) -> bool:
        self.asked.append(fingerprint)
        return self.answer


@pytest.mark.parametrize(
    "user,global_",
    [("wrong", ""), ("", "wrong"), (None, "wrong"), ("right", "wrong")],
    ids=["user-file", "global-file", "UserKnownHostsFile-none", "user-right-global-wrong"],
)
async def test_a_key_that_contradicts_any_file_is_refused_as_changed(keys, user, global_) -> None:
    text = {"wrong": keys.wrong, "right": keys.right, "": "", None: None}
    cfg = keys(text[user], text[global_])
    prompt = Prompt(True)
    host = SSHHost(HostConfig(name="keytest"), trust_prompt=prompt)
    try:
        if user == "right":  # OpenSSH accepts a key the user's file vouches for; so does the cockpit
            assert (await host.run(["true"])).ok and not _openssh_refuses(cfg)
            return
        with pytest.raises(HostKeyChanged, match="has CHANGED"):
            await host.run(["true"])
        assert prompt.asked == []  # never offered for trust
        assert _openssh_refuses(cfg)  # what OpenSSH does with the same files
    finally:
        await host.close()


async def test_a_key_the_global_file_vouches_for_connects_without_asking(keys, tmp_path: Path) -> None:
    keys("", keys.right)
    prompt = Prompt(False)
    host = SSHHost(HostConfig(name="keytest"), trust_prompt=prompt)
    try:
        assert (await host.run(["true"])).ok
        assert prompt.asked == [] and (tmp_path / "user_known_hosts").read_text() == ""
    finally:
        await host.close()


async def test_a_declined_key_is_not_offered_again(keys) -> None:
    keys("", "")
    prompt = Prompt(False)
    host = SSHHost(HostConfig(name="keytest"), trust_prompt=prompt)
    try:
        for _ in range(4):  # the status poll's retries: one question, then the same answer
            with pytest.raises(HostKeyUnknown):
                await host.run(["true"])
            host._next_attempt = 0.0  # skip the backoff, as time passing would
        assert len(prompt.asked) == 1
    finally:
        await host.close()


async def test_with_no_user_file_an_accepted_key_is_kept_for_the_session_only(keys, tmp_path: Path) -> None:
    keys(None, None)  # UserKnownHostsFile none, GlobalKnownHostsFile none: nothing vouches, nothing to write
    prompt = Prompt(True)
    host = SSHHost(HostConfig(name="keytest"), trust_prompt=prompt)
    try:
        assert (await host.run(["true"])).ok and len(prompt.asked) == 1
        await host.close()
        assert (await host.run(["true"])).ok and len(prompt.asked) == 1  # reconnecting does not ask again
        assert not (tmp_path / "user_known_hosts").exists()
    finally:
        await host.close()


async def test_an_accepted_key_creates_the_ssh_directory_private(keys, tmp_path: Path) -> None:
    user_file = tmp_path / "home" / ".ssh" / "known_hosts"
    keys(None, "", user_file=user_file)  # named in the config, not made: the cockpit makes it and its directory
    host = SSHHost(HostConfig(name="keytest"), trust_prompt=Prompt(True))
    try:
        assert (await host.run(["true"])).ok
        assert stat.S_IMODE(user_file.parent.stat().st_mode) == 0o700
        assert keys.right.split()[2] in user_file.read_text()
    finally:
        await host.close()


async def test_an_unreachable_host_is_said_to_be_unreachable(fault_lab: LabHandle) -> None:
    """With its link down the lab cannot be reached: that is what the sentence says, not that
    the host closed the connection."""
    from cockpit.lab.network import set_link
    from cockpit.remote.base import ConnectionLost

    net = Lab(fault_lab.name).net()
    host = SSHHost(HostConfig(name=fault_lab.name))
    set_link(net, up=False)
    try:
        with pytest.raises(ConnectionLost) as e:
            await host.run(["true"])
        assert str(e.value) == f"cannot reach {fault_lab.name} ({fault_lab.name}:22): no route to host"
    finally:
        set_link(net, up=True)
        await host.close()
