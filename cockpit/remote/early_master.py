"""The OpenSSH master the last launch with the same words ran, forked by the `cockpit` command
before the cockpit imports anything of its own (cockpit/command.py).

The app shows the unit's state once the host has answered the master's first command
(cockpit/remote/mux.py, cockpit/ui/early_state.py), so every hundredth of a second before the
fork is on screen too. Building the master's command line takes `import cockpit.cli`, its
parser and the config: the fork came 0.14 s after the command started, where this module forks
at about 0.05 s (docs/facts.md, "Start-up").

It runs only an `ssh` this user's cockpit itself ran before for the same words (a memory
file another user could write is not read), in the same directory and environment, and only
while none of the files that chose that command line (the config, the ssh_config files it
includes, the labs' directory) has changed since. The cockpit then builds its command line as
always and keeps the early master only when the two are the same (`take`); otherwise, or when
nothing takes it before the command ends, it is ended.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from typing import TYPE_CHECKING

from cockpit.statedir import state_dir

if TYPE_CHECKING:
    from collections.abc import Sequence

DIR = "{dir}"  # stands for the master's directory in a remembered command line
# The files in the master's directory (cockpit/remote/mux.py names them through these).
SSH_CONFIG, SOCKET, STDOUT, STDERR = "ssh_config", "ctl", "stdout", "stderr"
# What else chose the command line: the config's place ($COCKPIT_CONFIG, ~), the ssh_config
# files ($COCKPIT_SSH_CONFIG, the labs'), the ssh found on $PATH, the state kept in $XDG_STATE_HOME.
ENVIRONMENT = ("HOME", "PATH", "COCKPIT_CONFIG", "COCKPIT_SSH_CONFIG", "COCKPIT_LAB_STATE", "XDG_STATE_HOME")
REMEMBERED = 16  # launches remembered (the words of each, and what they ran)


class Forked:
    """A master forked early (a plain class: `dataclasses` would cost 9 ms before the fork)."""

    def __init__(self, directory: str, argv: list[str], conf: str) -> None:
        self.dir, self.argv, self.conf = directory, argv, conf  # argv with DIR for the directory
        self.process: subprocess.Popen[bytes] | None = None


_words: list[str] | None = None  # the command's words, when the `cockpit` command forked
_forked: Forked | None = None


def _file() -> str:
    return str(state_dir("launch.json"))


def _key(words: Sequence[str]) -> str:
    return json.dumps([list(words), os.getcwd(), [os.environ.get(name) for name in ENVIRONMENT]])


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def filled(argv: Sequence[str], directory: str) -> list[str]:
    """`argv` with DIR as `directory` (only where a word starts with it: a path in it)."""
    return [directory + word[len(DIR) :] if word.startswith(DIR + "/") else word for word in argv]


def fork(words: Sequence[str]) -> None:
    """Start the master remembered for `words`, if any and its files are unchanged, and
    remember this command's master for `words` (`remember`). Whatever goes wrong here (no
    state yet, a file half written) only means no early master."""
    global _forked, _words
    _words = list(words)
    try:
        with open(_file(), encoding="utf-8") as f:
            mine = os.fstat(f.fileno())
            entry = json.load(f)[_key(words)]
        argv, conf, watched = entry["argv"], entry["conf"], entry["watched"]
        if mine.st_uid != os.getuid() or mine.st_mode & 0o022 or os.path.basename(argv[0]) != "ssh":
            return  # only this user's own memory, and only ever an ssh
        if any(_stamp(path) != stamp for path, stamp in watched):
            return
        directory = tempfile.mkdtemp(prefix="cockpit-mux-")
    except (OSError, ValueError, KeyError, TypeError):
        return
    forked = Forked(directory, argv, conf)
    _forked = forked
    atexit.register(_end_untaken)
    try:
        with open(os.path.join(directory, SSH_CONFIG), "w") as f:
            f.write(conf)
        out, said = os.path.join(directory, STDOUT), os.path.join(directory, STDERR)
        with open(out, "wb") as out_file, open(said, "wb") as said_file:
            forked.process = subprocess.Popen(
                filled(argv, directory), stdin=subprocess.DEVNULL, stdout=out_file, stderr=said_file
            )
    except OSError:
        return


def take(argv: Sequence[str], conf: str) -> tuple[str, subprocess.Popen[bytes]] | None:
    """The early master's directory and process when it runs `argv` (DIR for its directory)
    with `conf` as its ssh_config; None when there is none, or it runs something else (it is
    ended then)."""
    global _forked
    forked, _forked = _forked, None
    if forked is None:
        return None
    if forked.process is not None and forked.argv == list(argv) and forked.conf == conf:
        return forked.dir, forked.process
    _end(forked)
    return None


def remember(argv: Sequence[str], conf: str, watched: Sequence[str]) -> None:
    """Keep the master's command line for the next launch with this command's words, with the
    state of the files that chose it (`watched`). Nothing when `fork` was not called (the
    cockpit run other than as the `cockpit` command: tests, `main()`)."""
    if _words is None:
        return
    path = _file()
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)
        if not isinstance(entries, dict):
            entries = {}
    except (OSError, ValueError):
        entries = {}
    key = _key(_words)
    entry = {"argv": list(argv), "conf": conf, "watched": [[p, _stamp(p)] for p in watched]}
    if entries.get(key) == entry:
        return
    entries.pop(key, None)
    entries[key] = entry
    kept = dict(list(entries.items())[-REMEMBERED:])
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}"
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
            json.dump(kept, f)  # this user's alone, whatever the umask (`fork` reads no other)
        os.replace(temporary, path)


def _end_untaken() -> None:
    if _forked is not None:
        _end(_forked)


def _end(forked: Forked) -> None:
    """End a master nobody took: the process if it still runs, the master it left logged in
    in the background (`ControlPersist`), and its directory."""
    process = forked.process
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()
    socket = os.path.join(forked.dir, SOCKET)
    if os.path.exists(socket):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                ["ssh", "-S", socket, "-O", "exit", "early"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=5,
            )
    shutil.rmtree(forked.dir, ignore_errors=True)
