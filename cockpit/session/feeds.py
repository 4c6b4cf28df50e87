"""The live feeds of one unit, supervised: the status poll, and keeping any feed alive.

A feed that stops silently is the worst failure the cockpit can have: the screen keeps
showing the last state as if it were live. So a feed never ends on an error; `supervise`
restarts whatever coroutine it runs (with backoff, reporting each failure), and the status
poll reports every result, good or bad, with the time it was read, so the screen can say how
old its data is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import NoReturn

from cockpit.remote.base import Host, HostError
from cockpit.systemd import processes
from cockpit.systemd.readiness import GENERATE, HUNG_AFTER_S, RECHECK_S, PortCheck, Probe, owner_check, probe
from cockpit.systemd.status import UnitNotFound, UnitStatus, fetch, with_file_check
from cockpit.timeouts import within

POLL_S = 1.0
# A settled unit (ready, or stopped) is read in full this often; between reads a heartbeat each
# POLL_S shows the host answers, and systemd's own journal lines about the unit ask a read at once.
SETTLED_READ_S = 10.0
READY_RECHECK_S = RECHECK_S  # /health_generate makes SGLang generate a token and log lines: ask sparingly once ready
OWNER_RECHECK_S = 120.0  # who listens on the port is read again at least this often while a start answers
RESTART_BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)


async def supervise(make: Callable[[], Awaitable[object]], on_failure: Callable[[str], None]) -> NoReturn:
    """Run `make()` again whenever it ends or fails (cancel the task to stop); the backoff
    starts over after a run that lasted a minute."""
    failures = 0
    while True:
        started = time.monotonic()
        try:
            await make()
            detail = "the feed ended"
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of a feed means: start it again
            detail = str(e) or type(e).__name__
        if time.monotonic() - started > 60:
            failures = 0
        failures += 1
        on_failure(detail)
        await asyncio.sleep(RESTART_BACKOFF[min(failures, len(RESTART_BACKOFF)) - 1])


class StatusPoll:
    """`systemctl show` of one unit every POLL_S seconds, and beside it the health check when its
    answer may have changed (not ready yet, a new invocation, or READY_RECHECK_S since the last
    ask): `/health_generate`, and the unit's processes by title. The health check runs beside the
    poll, so a slow server never makes the status itself late. It asks nothing while it does not
    know where the server listens (`url_host_port` None), and only where the unit's own cgroup
    listens (readiness.own_probe): another server on the default port would answer for this one.

    Each good read goes to `on_status` (its `checked_at` is when it was read); a failure goes
    to `on_problem(kind, sentence)` with kind "missing" (systemd knows no such unit now) or
    "error" (the host or systemctl did not answer).

    A settled unit (ready, or inactive or failed) whose journal is followed (`followed()`) is read
    in full only every SETTLED_READ_S: `systemctl show` is most of what the idle app costs the GPU
    host (7 ms of its CPU a read, 2 of them in PID 1). Every state change of a unit comes with
    systemd's own journal line about it, which the session passes on as `nudge()`, and a nudge
    reads at once. Between reads a heartbeat through the command channel (the shell's builtin
    `true`: no process) each POLL_S shows the host still answers, and the last read goes to
    `on_confirmed` with that time: confirmed, not read again (no restart watch takes it as news)."""

    def __init__(
        self,
        host: Host,
        unit: str,
        url_host_port: tuple[str, int] | None,
        *,
        on_status: Callable[[UnitStatus], None],
        on_problem: Callable[[str, str], None],
        interval: float = POLL_S,
        followed: Callable[[], bool] = lambda: False,
        on_confirmed: Callable[[UnitStatus], None] | None = None,
    ) -> None:
        self.host, self.unit, self.url_host_port = host, unit, url_host_port
        self.on_status, self.on_problem, self.interval = on_status, on_problem, interval
        self.followed, self.on_confirmed = followed, on_confirmed or on_status
        self._nudged = asyncio.Event()
        self._ready: bool | None = None
        self._ready_for: str | None = None  # the invocation `_ready` was asked for
        self._probe: Probe | None = None  # the last health answer, for that invocation
        self._processes: processes.UnitProcesses | None = None  # its cgroup, read with it
        self._asked_at = 0.0
        self._health: asyncio.Task[None] | None = None
        self._last: UnitStatus | None = None
        self._exit: tuple[str | None, str, float | None] | None = None  # (invocation, how, when)
        self._forgets = 0  # answers asked before the last forget_health are dropped when they come
        # (invocation, its port's owner confirmed as the unit, when): kept while that start answers
        self._owner: tuple[str | None, PortCheck, float] | None = None

    def forget_health(self, invocation: str) -> None:
        """The start has just said it is ready: a health answer other than 200 from before that
        (a 503 while it loaded) says nothing of it now, and one still on its way neither. Both
        are dropped, and the next poll asks again; meanwhile it reads "health not asked yet".
        Kept, that 503 met the ready line and read `degraded` for a poll at each start."""
        self._forgets += 1
        if self._ready_for == invocation and self._ready is not True:
            self._ready, self._probe = None, None
        self.nudge()

    def nudge(self) -> None:
        """Read at once (systemd said something about the unit, or someone waits for its state)."""
        self._nudged.set()

    async def run(self) -> NoReturn:
        try:
            while True:
                await self.poll_once()
                await self._until_next_read()
        finally:
            if self._health is not None:
                self._health.cancel()

    async def _until_next_read(self) -> None:
        """One POLL_S; a settled unit's read waits up to SETTLED_READ_S, a heartbeat each POLL_S."""
        deadline = time.monotonic() + SETTLED_READ_S
        while not await self._nudge_within(self.interval):
            if not self.settled() or time.monotonic() >= deadline or not await self._heartbeat():
                return

    async def _nudge_within(self, seconds: float) -> bool:
        try:
            await within(self._nudged.wait(), seconds)  # wait_for could lose a stop that came with a nudge
        except asyncio.TimeoutError:  # 3.10 raises asyncio's own
            return False
        self._nudged.clear()
        return True

    async def _own_answer(self, invocation: str | None) -> Probe:
        """readiness.own_probe, with who listens read again only for a new start, after an answer
        other than 200, or OWNER_RECHECK_S on: the start that listens keeps its port while it runs."""
        address = self.url_host_port
        assert address is not None
        known = self._owner
        fresh = known is not None and known[0] == invocation and time.monotonic() - known[2] < OWNER_RECHECK_S
        check = known[1] if fresh and known is not None else await owner_check(self.host, self.unit, *address)
        if not check.ask:
            self._owner = None
            return Probe(GENERATE, None, check.note)
        answer = check.noted(await probe(self.host, *address, GENERATE, HUNG_AFTER_S))
        if not answer.ok or check.note:
            self._owner = None
        elif not fresh:
            self._owner = (invocation, check, time.monotonic())
        return answer

    def settled(self) -> bool:
        """Whether only a change systemd logs can move the unit: ready, or stopped, journal followed."""
        last = self._last
        if last is None or not self.followed():
            return False
        if last.active_state in ("inactive", "failed"):
            return True
        return last.active_state == "active" and self._ready is True and self._ready_for == last.invocation_id

    async def _heartbeat(self) -> bool:
        """The host answers (a builtin of the command channel's shell): the last read confirmed now."""
        try:
            answer = await self.host.query(["true"], timeout=self.interval * 3)
        except Exception:  # noqa: BLE001 - a read follows at once and reports what is wrong
            return False
        last = self._last
        if not answer.ok or last is None:
            return False
        self.on_confirmed(self._with_health(replace(last, checked_at=time.time())))
        return True

    async def poll_once(self) -> None:
        try:
            status = await with_file_check(self.host, await fetch(self.host, self.unit))
        except UnitNotFound as e:
            self._last = None
            self.on_problem("missing", str(e))
            return
        except Exception as e:  # noqa: BLE001 - the poll reports every failure and goes on
            self._last = None
            self.on_problem("error", str(e) or type(e).__name__)
            return
        status = self._with_previous_exit(status)
        self._last = status
        self.on_status(self._with_health(status))

    def _with_previous_exit(self, status: UnitStatus) -> UnitStatus:
        if status.last_exit is not None:
            self._exit = (status.invocation_id, status.last_exit, status.exec_main_exit)
            return status
        if self._exit is None or self._exit[0] == status.invocation_id:
            return status
        return replace(status, previous_exit=self._exit[1], previous_exit_at=self._exit[2])

    def _with_health(self, status: UnitStatus, *, ask: bool = True) -> UnitStatus:
        """The status with what is known of its health now; starts a check (`ask`) when that
        may have changed."""
        if status.active_state != "active":
            self._ready, self._ready_for, self._probe, self._processes = False, status.invocation_id, None, None
            return replace(status, ready=False)
        now = time.monotonic()
        stale = (
            self._ready is not True or status.invocation_id != self._ready_for or now - self._asked_at > READY_RECHECK_S
        )
        if ask and stale and self._health is None and self.url_host_port is not None:
            self._asked_at = now
            self._health = asyncio.create_task(self._ask(status))
        if status.invocation_id != self._ready_for:
            return replace(status, ready=None)
        return replace(status, ready=self._ready, health=self._probe, processes=self._processes)

    async def _ask(self, status: UnitStatus) -> None:
        address = self.url_host_port
        assert address is not None

        async def members() -> processes.UnitProcesses | None:
            if not status.control_group:
                return None
            try:
                return await processes.read(self.host, status.control_group)
            except HostError:
                return None  # the health answer still counts; the pane shows no process check

        forgets = self._forgets
        try:
            answer, members_now = await asyncio.gather(self._own_answer(status.invocation_id), members())
        finally:
            self._health = None
        if forgets != self._forgets:
            return  # asked before the start said it was ready: the next poll asks again
        invocation = status.invocation_id
        self._ready, self._ready_for, self._probe, self._processes = answer.ok, invocation, answer, members_now
        last = self._last
        if last is not None and last.invocation_id == invocation:
            self.on_status(self._with_health(last, ask=False))  # checked_at stays the poll's own
