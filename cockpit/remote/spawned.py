"""The OpenSSH master's process, started with `os.posix_spawnp` rather than `subprocess`.

The `cockpit` command forks the master before it imports anything else (cockpit/remote/
early_master.py), and every millisecond before that fork is on screen: `subprocess` brings
`contextlib`, `selectors`, `threading`, `signal`, `locale` and `re` (13 ms in a wheel install,
about half of what the command did before its fork), where `os`, `_thread` and `_signal` are
loaded with the interpreter. The master's owners ask only this of it (cockpit/remote/mux.py):
whether and how it ended, waited for from a thread while another polls, and a kill.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # the interpreter's own: `signal` wraps it in enums, 5 ms
import _thread
import os

_SLEEP_CAP_S = 0.05  # where no pidfd can say it: polled as `Popen.wait(timeout)` polls


class Spawned:
    """A child process, reaped by whichever thread asks first (one `waitpid` at a time: a second
    would find no child, as `subprocess.Popen` guards it too)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._reaping = _thread.allocate_lock()

    def poll(self) -> int | None:
        """Its exit status once ended; None while it runs, or while another thread reaps it."""
        if self.returncode is None and self._reaping.acquire(False):
            try:
                self._reap(os.WNOHANG)
            finally:
                self._reaping.release()
        return self.returncode

    def wait(self) -> int:
        """Its exit status, once it ends."""
        with self._reaping:
            if self.returncode is None:
                self._reap(0)
        assert self.returncode is not None  # `_reap(0)` sets it
        return self.returncode

    def ended_within(self, timeout: float) -> int | None:
        """Its exit status if it ends within `timeout` s, the moment it does; else None. The
        early state line waits so (cockpit/ui/early_state.py): `Popen.wait(timeout)` polls with
        sleeps that double up to 50 ms, and an answer that came 0.2 s into the wait was on
        screen 0 to 50 ms late; a pidfd is readable once the process ends."""
        if self.poll() is None and not self._ends_within(timeout):
            return self.poll()
        return self.wait()

    def kill(self) -> None:
        if self.poll() is None:
            try:  # noqa: SIM105 -- `contextlib`: 4 ms (the module's docstring)
                os.kill(self.pid, _signal.SIGKILL)
            except ProcessLookupError:  # ended and reaped since
                pass

    def _reap(self, flags: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped by no one here (SIGCHLD ignored): how it ended is lost
            self.returncode = 255  # as ssh's own failure (mux.SSH_FAILED): its answer is not read
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)

    def _ends_within(self, timeout: float) -> bool:
        import select
        import time

        try:
            pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:  # reaped by another thread meanwhile
            return True
        except (AttributeError, OSError):  # not Linux 5.3 or later
            deadline, delay = time.monotonic() + timeout, 0.0005
            while self.poll() is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                time.sleep(min(delay, left))
                delay = min(2 * delay, _SLEEP_CAP_S)
            return True
        try:
            waiting = select.poll()  # not `select.select`: it refuses a descriptor past 1023
            waiting.register(pidfd, select.POLLIN)
            return bool(waiting.poll(timeout * 1000))
        finally:
            os.close(pidfd)


def spawn(argv: list[str], stdout: str, stderr: str) -> Spawned:
    """`argv` (its program found on $PATH) with no input and its output in the files `stdout`
    and `stderr`, inheriting no other descriptor, and SIGPIPE and SIGXFSZ as a program expects
    them (Python ignores both): what `subprocess.Popen` gives a child by default. Raises
    OSError when it cannot be started (no such program)."""
    _inherit_nothing()
    with open(stdout, "wb") as out, open(stderr, "wb") as said:
        pid = os.posix_spawnp(
            argv[0],
            argv,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, said.fileno(), 2),
            ],
            setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
        )
    return Spawned(pid)


def _inherit_nothing() -> None:
    """Mark every descriptor past stderr close-on-exec: Python opens its own so, but one the
    command inherited (a pipe to a pager, a shell's extra descriptor) would otherwise stay open
    in the master, which outlives the cockpit by up to 30 s in the background, and keep the
    pipe's reader waiting. `posix_spawn` has no action that closes a range."""
    try:
        descriptors = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc (macOS): every descriptor below the limit
        descriptors = list(range(3, min(os.sysconf("SC_OPEN_MAX"), 1 << 16)))
    for fd in descriptors:
        if fd > 2:
            try:  # noqa: SIM105 -- `contextlib`: 4 ms (the module's docstring)
                os.set_inheritable(fd, False)
            except OSError:  # the listing's own descriptor, closed since
                pass
