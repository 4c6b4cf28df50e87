"""The master forked before the cockpit imports itself (cockpit/remote/early_master.py): started
only from what an earlier launch with the same words remembered, only while the files that
chose it are unchanged, kept only when the cockpit would run the same, ended otherwise."""

from __future__ import annotations

import marshal
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.remote import early_master
from cockpit.remote.early_master import DIR, SSH_CONFIG, STDOUT

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["--host", "gpu1", "--unit", "sglang-k26"]


def _program(directory: Path, body: str) -> str:
    """A program named `ssh` (the early master runs nothing else) that runs `body` in Python."""
    path = directory / "bin" / "ssh"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport sys, time\n{body}\n")
    path.chmod(0o755)
    return str(path)


def _master(tmp_path: Path, marker: str) -> list[str]:
    """A stand-in for `ssh -M ...` that shows what it was given: its ssh_config, in its directory."""
    return [_program(tmp_path, f"print({marker!r}, open(sys.argv[1]).read(), end='')"), f"{DIR}/{SSH_CONFIG}"]


@pytest.fixture
def launches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state directory of its own, and the module as a fresh command finds it."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(early_master, "_key", None)
    monkeypatch.setattr(early_master, "_forked", None)
    config = tmp_path / "config.toml"
    config.write_text("[hosts.gpu1]\n")
    yield config
    if early_master._forked is not None:
        early_master._end(early_master._forked)


def _launch_remembering(argv: list[str], conf: str, watched: list[str]) -> None:
    """A first launch: nothing to fork yet; it remembers what it ran."""
    assert early_master.fork(WORDS) is False
    assert early_master._forked is None
    assert early_master.take(argv, conf) is None
    early_master.remember(argv, conf, watched)


def test_a_second_launch_forks_what_the_first_ran_and_the_cockpit_takes_it(launches: Path) -> None:
    argv, conf = _master(launches.parent, "early"), "Include /etc/ssh/ssh_config\n"
    _launch_remembering(argv, conf, [str(launches), str(launches.parent / "absent")])
    early_master._key = None

    assert early_master.fork(WORDS) is True
    taken = early_master.take(argv, conf)
    assert taken is not None
    directory, process = taken
    assert process.ended_within(10) == 0
    assert Path(directory, STDOUT).read_text() == f"early {conf}"  # its own directory, its ssh_config
    assert early_master.take(argv, conf) is None  # once
    shutil.rmtree(directory)  # the taker's to remove (MuxHost.close)


def test_other_words_or_a_changed_file_fork_nothing(launches: Path) -> None:
    argv, conf = _master(launches.parent, "early"), ""
    _launch_remembering(argv, conf, [str(launches), str(launches.parent / "absent")])
    early_master.fork([*WORDS, "--read-only"])
    assert early_master._forked is None
    (launches.parent / "absent").write_text("")  # a file that was not there now is
    early_master.fork(WORDS)
    assert early_master._forked is None
    (launches.parent / "absent").unlink()
    launches.write_text("[hosts.gpu1]\nuser = 'ops'\n")  # the config changed
    early_master.fork(WORDS)
    assert early_master._forked is None


def test_a_master_unlike_the_cockpits_is_ended_with_its_directory(launches: Path) -> None:
    """The cockpit would run another command line now (a changed default, a different ssh_config
    text): the early one is ended and its directory removed, and the new one is remembered."""
    sleeper = [_program(launches.parent / "old", "time.sleep(60)"), f"{DIR}/{SSH_CONFIG}"]
    _launch_remembering(sleeper, "", [str(launches)])
    early_master._key = None
    early_master.fork(WORDS)
    forked = early_master._forked
    assert forked is not None and forked.process is not None and forked.process.poll() is None
    assert early_master.take(_master(launches.parent, "now"), "") is None
    assert forked.process.poll() is not None
    assert not os.path.exists(forked.dir)
    early_master.remember(_master(launches.parent, "now"), "", [str(launches)])
    early_master.fork(WORDS)
    assert early_master._forked is not None and early_master._forked.argv == _master(launches.parent, "now")


def test_an_untaken_master_is_ended_when_the_command_ends(tmp_path: Path) -> None:
    """A launch that never builds its master (the config now fails to load): the early one does
    not outlive the command, nor does its directory."""
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path))
    sleeper = _program(tmp_path, "time.sleep(60)")
    code = (
        "import sys\nfrom cockpit.remote import early_master as e\n"
        f"argv = [{sleeper!r}, e.DIR + '/x']\n"
        "e.fork(['w']); e.remember(argv, '', []); e._key = None\n"
        "e.fork(['w']); print(e._forked.dir, e._forked.process.pid)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    directory, pid = out.stdout.split()
    assert not os.path.exists(directory)
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_a_memory_others_may_write_or_naming_another_program_forks_nothing(launches: Path) -> None:
    argv = _master(launches.parent, "early")
    old = os.umask(0o002)  # Ubuntu's, for a user with a group of their own
    try:
        _launch_remembering(argv, "", [])
    finally:
        os.umask(old)
    memory = Path(os.environ["XDG_STATE_HOME"], "cockpit", "launch.marshal")
    assert memory.stat().st_mode & 0o777 == 0o600  # whatever the umask
    memory.chmod(0o660)  # the group could have written it
    early_master.fork(WORDS)
    assert early_master._forked is None
    planted = marshal.loads(memory.read_bytes())
    planted["another launch"] = {"argv": ["/tmp/theirs/ssh"], "conf": "", "watched": []}
    memory.write_bytes(marshal.dumps(planted))
    early_master._forked, early_master._key = None, None
    early_master.fork(WORDS)
    early_master.remember(argv, "", [])  # written again as this user's: nothing of theirs carried
    assert list(marshal.loads(memory.read_bytes())) == [early_master._key]
    assert memory.stat().st_mode & 0o777 == 0o600
    early_master.fork(WORDS)  # the same memory, this user's alone: forked
    taken = early_master.take(argv, "")
    assert taken is not None
    shutil.rmtree(taken[0])
    early_master.remember([sys.executable, *argv[1:]], "", [])  # a Python, not an ssh
    early_master.fork(WORDS)
    assert early_master._forked is None


def test_a_broken_memory_is_no_early_master(launches: Path) -> None:
    state = Path(os.environ["XDG_STATE_HOME"], "cockpit")
    state.mkdir(parents=True)
    for data in (b"{", b"", marshal.dumps([]), marshal.dumps({"x": 1}), b"N" * 3, b"\xff"):
        (state / "launch.marshal").write_bytes(data)
        early_master.fork(WORDS)
        assert early_master._forked is None
    early_master.remember(_master(launches.parent, "early"), "", [])  # and a broken file is replaced
    early_master._key = None
    early_master.fork(WORDS)
    assert early_master._forked is not None


def test_the_command_forks_before_importing_the_cockpit() -> None:
    """What `cockpit` loads before its fork: the early master's module, the state directory's and
    the process's, nothing of the CLI, the config or asyncio (`import cockpit.cli` alone takes
    0.06 s), nor `typing` (3 ms), `pathlib` (9 ms), `subprocess` or `contextlib` (13 ms
    together). Without `site`, as a wheel install has nothing of it here: this checkout's
    editable hook imports `pathlib` itself."""
    watched = ("cockpit", "asyncio", "typing", "pathlib", "subprocess", "contextlib", "signal", "re")
    code = (
        "import sys\nfrom cockpit.remote.early_master import fork\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {watched!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert out.stdout.strip() == str(
        ["cockpit", "cockpit.remote", "cockpit.remote.early_master", "cockpit.remote.spawned", "cockpit.statedir"]
    )


@pytest.mark.parametrize(
    "entry",
    [
        {"argv": [], "conf": "", "watched": []},
        {"argv": ["ssh", 1], "conf": "", "watched": []},
        {"argv": ["ssh", "a\u0000b"], "conf": "", "watched": []},
        {"argv": ["ssh"], "conf": 7, "watched": []},
        {"argv": ["ssh"], "conf": "", "watched": [["/etc", 1, 2]]},
        {"argv": ["ssh"], "conf": ""},
        "ssh",
    ],
)
def test_a_memory_of_another_shape_is_no_early_master(launches: Path, entry: object) -> None:
    """A memory that is not what `remember` writes (a bug of an older cockpit, a hand's edit)
    forks nothing and raises nothing: the command goes on as on its first launch."""
    early_master.fork(WORDS)
    key = early_master._key
    memory = Path(os.environ["XDG_STATE_HOME"], "cockpit", "launch.marshal")
    memory.parent.mkdir(parents=True)
    memory.write_bytes(marshal.dumps({key: entry}))
    memory.chmod(0o600)
    early_master.fork(WORDS)
    assert early_master._forked is None
    memory.write_bytes(b"[\x01\x00\x00\x00" * 100_000)  # deeper than the reader goes
    early_master.fork(WORDS)
    assert early_master._forked is None


def test_a_file_changed_while_the_command_ran_is_not_vouched_for(launches: Path) -> None:
    """The config edited between the fork and the config's read: which text chose the command
    line cannot be said, so nothing is remembered."""
    early_master.fork(WORDS)
    launches.write_text("[hosts.gpu1]\nuser = 'ops'\n")
    early_master.remember(_master(launches.parent, "early"), "", [str(launches)])
    assert not Path(os.environ["XDG_STATE_HOME"], "cockpit", "launch.marshal").exists()


def test_a_command_run_from_a_removed_directory_still_runs(tmp_path: Path) -> None:
    """No working directory, no key for the memory: no early master, and no error either."""
    gone = tmp_path / "gone"
    gone.mkdir()
    code = (
        "import os\nfrom cockpit.remote import early_master as e\n"
        f"os.chdir({str(gone)!r}); os.rmdir({str(gone)!r})\n"
        "e.fork(['w']); e.remember(['ssh'], '', []); print(e._forked, e._key)\n"
    )
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "None"]


def test_an_import_yielding_to_the_login_runs_at_the_lowest_priority_and_raises_in_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`import_yielding` (the CLI's and the app's imports while the early master logs in): the
    module runs in a thread of nice 19, the calling thread keeps its own, and an import that
    fails raises in the caller."""
    (tmp_path / "cockpit_probe_nice.py").write_text(
        "import os, threading\n"
        "NICE = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())\n"
        "MAIN = threading.current_thread() is threading.main_thread()\n"
    )
    (tmp_path / "cockpit_probe_broken.py").write_text("raise LookupError('half a module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = os.getpriority(os.PRIO_PROCESS, 0)
    early_master.import_yielding("cockpit_probe_nice")
    probe = sys.modules.pop("cockpit_probe_nice")
    assert (probe.NICE, probe.MAIN) == (early_master.YIELDING_NICE, False)
    assert os.getpriority(os.PRIO_PROCESS, 0) == before
    with pytest.raises(LookupError, match="half a module"):
        early_master.import_yielding("cockpit_probe_broken")
