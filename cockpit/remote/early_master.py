"""The OpenSSH master the last launch with the same words ran, forked by the `cockpit` command
before the cockpit imports anything of its own (cockpit/command.py).

The app shows the unit's state once the host has answered the master's first command
(cockpit/remote/mux.py, cockpit/ui/early_state.py), so every hundredth of a second before the
fork is on screen too. Building the master's command line takes `import cockpit.cli`, its
parser and the config: the fork came 0.14 s after the command started, where this module forks
at about 0.03 s (docs/facts.md, "Start-up").

It runs only what this user's cockpit itself ran before for the same words (a memory file
another user could have written is not read: that is the boundary, as the command line and the
ssh_config it holds say what runs), in the same directory and environment, and only while none
of the files that chose that command line (the config, the ssh_config files it includes, the
labs' directories) has changed since. The cockpit then builds its command line as
always and keeps the early master only when the two are the same (`take`); otherwise, or when
nothing takes it before the command ends, it is ended.

Before the fork it imports only what the fork needs: the memory is `marshal`'s (built into
the interpreter; `json` brings `re`, 6 ms), its key a `repr`, the process `os.posix_spawnp`'s
(cockpit/remote/spawned.py: `subprocess` and `contextlib` cost 13 ms), and `tempfile`,
`shutil` and `typing` wait until after it. A wheel install forks about 13 ms after the
interpreter starts (it was 28 ms with `subprocess`).
"""

from __future__ import annotations

import atexit
import marshal
import os
import time

from cockpit.remote.spawned import Spawned, spawn
from cockpit.statedir import state_path

TYPE_CHECKING = False  # `typing` costs 3 ms before the fork (cockpit/statedir.py)
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
        self.process: Spawned | None = None


_key: str | None = None  # this command's words, directory and environment, when `fork` ran
_began_ns = 0  # when `fork` ran: a file changed since then is not vouched for
_forked: Forked | None = None


_DIR_PREFIX = "cockpit-mux-"  # then `<PID>.<where()>-` and 8 random hex digits


def new_dir() -> str:
    """A master's directory, named for this process: one left by a cockpit that was killed
    (a signal, a dropped session) is known as such and removed by the next (`mux.sweep`).

    Made here in the first of $TMPDIR, $TEMP and $TMP that is set, else /tmp: the place
    `tempfile.gettempdir()` (the sweep's) picks when it can be written. `tempfile` brings
    `shutil`, `fnmatch` and `re` (5 ms before the fork); a place that cannot be written is
    left to `tempfile.mkdtemp`, which passes over it as `gettempdir` does."""
    prefix = f"{_DIR_PREFIX}{os.getpid()}.{where()}-"
    root = next((value for name in ("TMPDIR", "TEMP", "TMP") if (value := os.environ.get(name))), "/tmp")
    for _ in range(100):
        path = os.path.join(root, prefix + os.urandom(4).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        except OSError:
            break
        return os.path.abspath(path)
    import tempfile

    return tempfile.mkdtemp(prefix=prefix)


def maker(name: str, here: str) -> int | None:
    """The PID of the cockpit that made the directory `name` with `new_dir` where `where()` is
    `here`; None for any other name (another host's, an older cockpit's, not a master's)."""
    if not name.startswith(_DIR_PREFIX):
        return None
    pid, _, made = name[len(_DIR_PREFIX) :].partition("-")[0].partition(".")
    return int(pid) if made == here and pid.isascii() and pid.isdecimal() else None


def where() -> str:
    """This host and PID namespace, as 8 hex digits (FNV-1a of the host name and the namespace's
    inode): a PID means a process only there. A temporary directory shared with a container or
    with other hosts (a TMPDIR on a shared home) holds other cockpits' directories, whose PIDs
    this process cannot see."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    digest = 0x811C9DC5
    for byte in f"{os.uname().nodename}/{namespace}".encode():
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{digest:08x}"


def _file() -> str:
    return state_path("launch.marshal")


def _memory() -> dict[object, object] | None:
    """The launch memory when only this user can have written it, as it names what runs (the
    boundary): `fork` runs it, and `remember` writes it again as this user's file, which `fork`
    would then trust. None for one that others could have written, or that is not a dict.
    Raises what reading and `marshal` raise (a missing file, a truncated or corrupt one)."""
    with open(_file(), "rb") as f:
        mine = os.fstat(f.fileno())
        if mine.st_uid != os.getuid() or mine.st_mode & 0o022:
            return None
        memory = marshal.load(f)
    return memory if isinstance(memory, dict) else None


def _stamp(path: str) -> list[int] | None:
    """What a change to the file changes: its content's time and size, and which file it is (a
    link pointed elsewhere, a file put in its place) with when that last changed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size]


def filled(argv: Sequence[str], directory: str) -> list[str]:
    """`argv` with DIR as `directory` (only where a word starts with it: a path in it)."""
    return [directory + word[len(DIR) :] if word.startswith(DIR + "/") else word for word in argv]


def start(argv: Sequence[str], conf: str, directory: str) -> Spawned:
    """The master `argv` (DIR for `directory`) with `conf` as its ssh_config, its output in
    files (a pipe that nobody reads would stall ssh once full)."""
    with open(os.path.join(directory, SSH_CONFIG), "w") as f:
        f.write(conf)
    return spawn(filled(argv, directory), os.path.join(directory, STDOUT), os.path.join(directory, STDERR))


def _entry_of(entry: object) -> tuple[list[str], str, list[tuple[str, object]]] | None:
    """A remembered entry's command line, ssh_config and watched files, if it has that shape."""
    if not isinstance(entry, dict):
        return None
    argv, conf, watched = entry.get("argv"), entry.get("conf"), entry.get("watched")
    if not (isinstance(argv, list) and argv and all(isinstance(w, str) and "\0" not in w for w in argv)):
        return None
    if not isinstance(conf, str) or not isinstance(watched, list):
        return None
    if not all(isinstance(w, list) and len(w) == 2 and isinstance(w[0], str) for w in watched):
        return None
    return argv, conf, [(path, stamp) for path, stamp in watched]


def fork(words: Sequence[str]) -> bool:
    """Start the master remembered for `words`, if any, its files unchanged, and note the words
    for `remember`; whether one was started. Whatever goes wrong here (no state yet, a file
    half written or not this user's) only means no early master."""
    global _forked, _key, _began_ns
    try:
        _began_ns = time.time_ns()
        _key = repr([list(words), os.getcwd(), [os.environ.get(name) for name in ENVIRONMENT]])
        memory = _memory()
        found = _entry_of(memory.get(_key)) if memory is not None else None
        if found is None or os.path.basename(found[0][0]) != "ssh":
            return False
        argv, conf, watched = found
        if any(_stamp(path) != stamp for path, stamp in watched):
            return False
        forked = Forked(new_dir(), argv, conf)
    except Exception:  # noqa: BLE001 -- no early master, and the cockpit goes on as without one
        return False
    _forked = forked
    atexit.register(_end_untaken)
    try:
        forked.process = start(argv, conf, forked.dir)
    except Exception:  # noqa: BLE001 -- no ssh, a directory gone: the cockpit starts its own
        return False
    return True


YIELDING_NICE = 19


def import_yielding(module: str) -> None:
    """Import `module` in a thread that yields the CPU to the early master: the cockpit's
    imports beside its login took the core ssh was waiting for (`ssh -M ... systemctl show`
    took 246 to 304 ms alone, 261 to 408 beside `import cockpit.ui.app`, 254 to 324 beside it
    at nice 19, docs/facts.md). The nice value of a Linux thread is its own, so the main
    thread, and the app it runs, keep theirs, and a process may always lower its threads'
    priority. It weighs against the processes of the same session (the kernel's autogroups):
    the ssh this command forked, not other users' work. The import's errors are raised in the
    caller. A thread or process the imported module started would keep nice 19: neither
    `cockpit.cli` nor `cockpit.ui.app` starts one when imported."""
    import importlib
    import sys
    import threading

    failed: list[BaseException] = []

    def run() -> None:
        if sys.platform == "linux":  # elsewhere a thread's id is no process's, and nice is per process
            try:  # noqa: SIM105 -- `contextlib` is not imported before the fork (the module's docstring)
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), YIELDING_NICE)
            except OSError:  # a sandbox that refuses it: the usual priority
                pass
        try:
            importlib.import_module(module)
        except BaseException as e:  # noqa: BLE001 -- raised again in the caller
            failed.append(e)

    thread = threading.Thread(target=run, name=f"import {module}", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def take(argv: Sequence[str], conf: str) -> tuple[str, Spawned] | None:
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
    cockpit run other than as the `cockpit` command: tests, `main()`), or when one of those
    files changed while this command ran (read before the change or after, it cannot say)."""
    if _key is None:
        return
    stamps = {p: _stamp(p) for p in watched}
    if any(stamp is not None and max(stamp[2], stamp[3]) >= _began_ns for stamp in stamps.values()):
        return
    path = _file()
    try:
        entries = _memory() or {}
    except Exception:  # noqa: BLE001 -- a memory that cannot be read is written anew
        entries = {}
    entry = {"argv": list(argv), "conf": conf, "watched": [[p, stamp] for p, stamp in stamps.items()]}
    if list(entries)[-1:] == [_key] and entries[_key] == entry:
        return
    entries.pop(_key, None)
    entries[_key] = entry  # the most recent last: the oldest are forgotten first
    kept = dict(list(entries.items())[-REMEMBERED:])
    import contextlib  # after the fork, as `tempfile` (see `new_dir`)
    import tempfile

    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".launch-")  # 0600, a new file
        try:
            with open(fd, "wb") as f:
                marshal.dump(kept, f)
            os.replace(temporary, path)
        except OSError:
            os.unlink(temporary)
            raise


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
    import contextlib  # after the fork: see `new_dir`
    import shutil
    import subprocess

    socket = os.path.join(forked.dir, SOCKET)
    if os.path.exists(socket):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(  # the socket is all it needs: no config of the user's is read
                ["ssh", "-F", "/dev/null", "-S", socket, "-O", "exit", "early"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=5,
            )
    shutil.rmtree(forked.dir, ignore_errors=True)
