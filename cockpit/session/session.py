"""One open unit, headless: the front door the app and every subcommand go through.

A session owns the unit's host connection (through the host pool), its one status poll, its
one journal feed, and the facts of its deployment (read once by `read_deployment`, with one
error contract). It offers what a front end does with a unit: the view of a traceback's frame,
an edit applied (pre-flight, write, restart, watch), a load run, an incident gathered, a
systemctl action. A front end listens (`Listener`) and draws what it is handed; it never
reaches a host itself.

`RecordedSession` is the same object over recorded data: no feed starts, and a test (or a
snapshot) delivers entries and statuses through the same pipeline the live feeds use.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cockpit.attempts import ORIGINAL, Attempt, AttemptLog
from cockpit.config import Config, HostConfig
from cockpit.errors import CockpitError
from cockpit.lab.paths import ssh_configs as lab_ssh_configs
from cockpit.load.passive import ThroughputPoint, ThroughputSeries
from cockpit.remote.base import CONNECT_TIMEOUT, ConnectionLost, Host, HostError, SshConfigs, TrustPrompt
from cockpit.remote.pool import HostPool
from cockpit.remote.source import (
    PACKAGE_DIRS,
    OutsideRoots,
    SourceCache,
    SourceError,
    SourceFile,
    SourceRoots,
    staleness,
)
from cockpit.session.feeds import POLL_S, StatusPoll, supervise
from cockpit.session.journal_feed import BACKLOG, JournalBatch, JournalFeed, Source
from cockpit.sglang.deployments.nodes_status import BROKEN, group_readiness
from cockpit.sglang.server.health import DOWN, STARTING, HealthScan, Readiness, assess
from cockpit.sglang.server.quiet import quiet_run
from cockpit.sglang.server.ranks import node_rank, ranks_on_node
from cockpit.sglang.server.startup import Startup, StartupMemory, StartupScan, under_way
from cockpit.systemd import gpu_use, processes
from cockpit.systemd.endings import Endings
from cockpit.systemd.entry import JournalEntry
from cockpit.systemd.gpu_use import GpuUse
from cockpit.systemd.journal import tail
from cockpit.systemd.process_facts import Viewpoint
from cockpit.systemd.readiness import LastAnswer
from cockpit.systemd.status import UnitStatus, exit_words, fetch, list_units, show, with_file_check
from cockpit.systemd.suppression import Suppression, SuppressionScan
from cockpit.targets import Target, deployment_targets
from cockpit.timeouts import within
from cockpit.traceback.fold import fold_entries, last_with_frames
from cockpit.traceback.journal_rows import JournalRows
from cockpit.traceback.model import Traceback

# What only some actions need is imported when they run: `cockpit status` opens a session too,
# and paid 60 ms for the incident, rollout and load modules it never used. The same for what
# the app's first screen does not need (the unit's deployment, the release's catalog, the
# pre-flight, the fleet): the app draws the unit's state before it imports them.
if TYPE_CHECKING:
    from cockpit.experiment.plan import Plan
    from cockpit.experiment.run import ExperimentRun
    from cockpit.incident import Incident
    from cockpit.load.gpu import NoticeCallback, SamplesCallback
    from cockpit.load.results import LevelResult, RequestResult
    from cockpit.load.store import Comparison, SavedRun
    from cockpit.remote.mux import MuxHost
    from cockpit.rollout.group import GroupNode
    from cockpit.sglang.catalog.catalogs import CatalogCache
    from cockpit.sglang.catalog.flags import Catalog
    from cockpit.sglang.deployments.deployment import Deployment
    from cockpit.sglang.deployments.fleet import FleetReader, HostRound
    from cockpit.sglang.explain.explain import Explanation
    from cockpit.sglang.preflight.architectures import ArchitectureCache
    from cockpit.sglang.preflight.dry_runs import DryRuns, Verdict
    from cockpit.sglang.preflight.preflight import Finding
    from cockpit.systemd.gpu_watch import GpuWatch
    from cockpit.systemd.group_write import NodeWrite
    from cockpit.systemd.process_end import Ending, Identity
    from cockpit.systemd.stacks import StackCapture
    from cockpit.systemd.unit import Unit

GATHER_TIMEOUT_S = 120.0
FIRST_STATUS_WAIT_S = 2.0  # how long the journal and the deployment wait for the first status
# The app's early master was forked while the app imported and composed its screen (0.2 to 0.6 s
# before the session starts), and a login takes 0.25 s: one that is not done a second later goes
# no faster than asyncssh, which says what is wrong.
EARLY_STATUS_S = 1.0
NEXT_STATUS_WAIT_S = 3 * POLL_S  # how long a restart watch waits for the poll before asking itself
METRICS_S = 5.0  # how often /metrics is read where the server has it
GPU_POLL_S = 5  # the period of the host's GPU table (nvidia-smi's own loop: gpu_watch)
UNREAD_NOTICE_S = 60.0  # lines of a host's journalctl that were no entry: said at most this often
SURVIVOR_CHECK_S = 1.5  # after a start ends: systemd's kill of the cgroup is done by then, unless still stopping
STOP_WAIT_S = 120.0  # the longest a stop is waited for before what is left of the start is named
GROUP_POLL_S = 1.0  # an opened deployment's nodes are read this often: a lost node is said within 5 s
LOST_NODE_LINES = 2000  # of the lost node's journal, read for its traceback
UNKNOWN = "unknown"  # the group's readiness while a node cannot be read
STOP_WAIT_S = 5.0  # how long `stop` waits for its cancelled tasks before it goes on without them


def stopped_reason(status: UnitStatus) -> str:
    """Why a stopped unit is down, said as a stop: systemd calls a start that died badly of its
    stop `failed`, as it calls a crash."""
    said = f"{exit_words(status.last_exit, status.stopped_by)}, not a crash"
    if status.active_state == "failed":
        said += (
            f"; systemd says failed (Result={status.result or '-'}) as the server died badly of the stop "
            "(KillMode=mixed lets it stop clean: the pre-flight's kill-mode)"
        )
    return said


def waiting_at(task: asyncio.Task[Any]) -> str:
    """Where a suspended task waits: the innermost coroutine of its chain of awaits."""
    coro: Any = task.get_coro()
    where = "at an unknown place"
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        if frame is not None:
            where = f"waiting in {frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}:{frame.f_lineno})"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
    return where


class Listener:
    """What a front end hears from its session; each method does nothing unless overridden."""

    def status(self, status: UnitStatus) -> None: ...

    def gpus(self, use: GpuUse) -> None:
        """The host's GPU table (every GPU_POLL_S), with who holds each GPU's memory."""

    def notice(self, sentence: str) -> None:
        """Something the user must read now, not an error of the cockpit's (processes of an
        ended start that outlived it)."""

    def problem(self, kind: str, sentence: str) -> None: ...

    def connection(self, state: str, detail: str | None) -> None: ...

    def journal(self, batch: JournalBatch) -> None: ...

    def journal_state(self, state: str, detail: str | None) -> None: ...

    def journal_behind(self, lines: int) -> None:
        """Lines journald holds that have not arrived yet, estimated; 0 once caught up."""

    def throughput(self, points: list[ThroughputPoint]) -> None:
        """The server's throughput from a batch's decode lines, oldest first (never empty)."""

    def deployment(self, deployment: Deployment | None, problems: list[str]) -> None: ...

    def failed(self, what: str, detail: str) -> None:
        """A background task failed (it was restarted where it is a feed)."""

    def group(self, readiness: Readiness, nodes: list[tuple[str, UnitStatus | None]]) -> None:
        """An opened deployment's readiness and each node's status (None: it could not be read)."""

    def group_broken(self, reason: str, node: str, traceback: Traceback | None) -> None:
        """The group has just turned broken: `node` went down while others run; its last
        traceback where its journal has one."""

    def experiment(self, run: ExperimentRun) -> None:
        """The app's experiment said something, or ended (its task is done)."""

    async def drawn(self) -> None:
        """Once what was heard so far is on screen: the session waits for it before work that
        takes the CPU for a while."""


@dataclass
class FrameView:
    """A traceback's frame as the source pane shows it."""

    path: str
    source: SourceFile | None = None
    start: int = 0
    end: int = 0
    message: str = ""
    flags: list[str] = field(default_factory=list)
    refused: bool = False  # outside the service's roots: `O` opens it anyway


class Session:
    live = True

    def __init__(
        self,
        config: Config,
        target: Target | None,
        *,
        read_only: bool = False,
        trust_prompt: TrustPrompt | None = None,
        ssh_configs: SshConfigs | None = None,
        backlog: int = BACKLOG,
        reader: MuxHost | None = None,
        group: str | None = None,
    ) -> None:
        """`group`: a [deployments] entry, opened on its node 0 (`target` is then that node's),
        with every node's readiness and the group's watched beside it."""
        self.config = config
        self.reader = reader  # an OpenSSH master the caller started early, for the first reads
        self.group = group
        self.nodes: list[tuple[str, Target]] = deployment_targets(config, group) if group else []
        self.target = self.nodes[0][1] if self.nodes else target
        self.group_readiness: Readiness | None = None
        self._group_changing = 0  # group restarts and stops under way: their own stops are not a node lost
        self._group_step: tuple[str, float] | None = None  # what the cockpit does to the group now, since when
        self._group_changes = 0  # how many began or ended: a read that spans one says nothing of a lost node
        self._node_health: dict[tuple[str, str], LastAnswer] = {}  # each node's last /health: asked when due
        self.read_only = read_only
        self.backlog = backlog
        self.listener = Listener()
        configs = ssh_configs or (lambda: [str(p) for p in lab_ssh_configs()])  # the labs up at each connect
        self.pool = HostPool(
            config, trust_prompt=trust_prompt, on_state=self._host_state, ssh_configs=configs, read_only=read_only
        )
        self.sources = SourceCache()
        self.deployment: Deployment | None = None
        self.status: UnitStatus | None = None
        self.gpus: GpuUse | None = None
        self.invocations: set[str] = set()  # the unit's starts seen (journal, polls): whose left-overs
        self._running: str | None = None  # the invocation of the start that is up now
        self._start_seen_at = 0.0  # when the poll first saw it (the jump box's clock)
        self._gpus_again = asyncio.Event()  # read the GPU table now: a new start was seen
        self.endings = Endings()  # which starts a stop ended (the cockpit's own, or anyone's)
        self._losses = SuppressionScan(self.target.unit if self.target is not None else "")  # journald's reports
        self._unread, self._unread_said = 0, -UNREAD_NOTICE_S  # journalctl's lines that were no entry
        self.health = HealthScan()  # each start's health signals in its journal and processes
        self.startups = StartupScan()  # each start's phases, rank by rank
        self._passive: asyncio.Task[Any] | None = None  # the poll of the server's own figures
        self._remembered: set[str] = set()  # the starts kept in StartupMemory (reached ready)
        self.last_stacks: StackCapture | None = None  # the last py-spy dump taken (for the incident note)
        self.passive = ThroughputSeries()
        self.journal = self._new_journal()
        self.poll: StatusPoll | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._status_waiters: list[asyncio.Future[UnitStatus]] = []
        self._fleet: FleetReader | None = None
        self._feeding = False  # started: a restart's watch hears the session's own feeds
        self.experiment: ExperimentRun | None = None  # the app's experiment, running or done

    # The caches of what a unit's release holds, made when first used (after the first status).

    @cached_property
    def catalogs(self) -> CatalogCache:
        """Each release's flag catalog, read from its source once."""
        from cockpit.sglang.catalog.catalogs import CatalogCache

        return CatalogCache()

    @cached_property
    def architectures(self) -> ArchitectureCache:
        """Each release's model classes, for the model checks."""
        from cockpit.sglang.preflight.architectures import ArchitectureCache

        return ArchitectureCache()

    @cached_property
    def dry_runs(self) -> DryRuns:
        """The editor's verdicts from SGLang itself, by release and flags."""
        from cockpit.sglang.preflight.dry_runs import DryRuns

        return DryRuns()

    # -- the feeds --------------------------------------------------------------------------

    @property
    def host(self) -> Host:
        assert self.target is not None
        return self.pool.get(self.target.host)

    @property
    def _feed(self) -> Session | None:
        """What a restart's watch hears: the session's own journal and poll once started; else
        (a headless command's session) the watch follows the unit itself."""
        return self if self.live and self._feeding else None

    @property
    def host_config(self) -> HostConfig:
        assert self.target is not None
        return self.config.host(self.target.host)

    @property
    def rows(self) -> JournalRows:
        return self.journal.rows

    def _new_journal(self) -> JournalFeed:
        target = self.target
        others: list[Source] = [(self._host_getter(t.host), t.unit) for _, t in self.nodes[1:]] if self.live else []
        feed = JournalFeed(
            self._host_getter(target.host) if target is not None and self.live else None,
            self.target.unit if self.target else "",
            others=others,
            backlog=self.backlog,
            on_state=lambda state, detail: self.listener.journal_state(state, detail),
            on_subscriber_failed=lambda detail: self.listener.failed("a journal subscriber", detail),
            on_behind=lambda lines: self.listener.journal_behind(lines),
            on_skipped=self._skipped,
        )
        feed.subscribe(self._on_batch)
        feed.subscribe(lambda batch: self.listener.journal(batch))
        return feed

    def _skipped(self, lines: int) -> None:
        """What the host's journalctl printed that is no journal entry the cockpit can read (a
        hostile host's, or cut): passed over by the follower, and said here with its count, at
        most once every UNREAD_NOTICE_S (a host printing them in a flood is said once, not per
        batch)."""
        self._unread += lines
        now = time.monotonic()
        if now - self._unread_said < UNREAD_NOTICE_S:
            return
        said, self._unread, self._unread_said = self._unread, 0, now
        unit = self.target.unit if self.target is not None else "the unit"
        told = "1 entry" if said == 1 else f"{said} entries"
        self.listener.notice(
            f"{unit}'s journal: skipped {told} the cockpit cannot read (cut, broken, or nested too deep)"
        )

    def _host_getter(self, name: str) -> Callable[[], Host]:
        return lambda: self.pool.get(name)

    def _on_batch(self, batch: JournalBatch) -> None:
        """The core's own subscribers: how starts ended, the health signals, the start-up
        timeline and the throughput series. They are about the unit opened: of a deployment's
        merged journal, node 0's lines."""
        if self.journal.others:
            batch = replace(batch, entries=[e for e in batch.entries if not e.node])
        quiet = quiet_run(batch.entries)  # a flood's batch: one start's lines, none the scans read
        if quiet is not None:
            self.invocations.add(quiet)
        else:
            self.invocations.update({e.invocation_id for e in batch.entries if e.invocation_id and e.pid != 1})
        if self.poll is not None and quiet is None and any(e.pid == 1 for e in batch.entries):
            self.poll.nudge()  # systemd's own word about the unit: its state has moved
        self.endings.feed(batch.entries)
        for lost in self._losses.feed(batch.entries):
            self.listener.notice(lost.sentence())
        running = self._running
        unready = running is not None and self.health.of(running).ready_at is None
        going = running is not None and self.health.of(running).ending_at is not None
        self.health.feed(batch.entries, quiet)
        if unready and running is not None and self.poll is not None and self.health.of(running).ready_at:
            self.poll.forget_health(running)
        if running is not None and not going and self.health.of(running).ending_at is not None:
            self._ending(running)
        self.startups.feed(batch.entries, quiet)
        self._remember_ready_starts()
        points = self.passive.add_entries(batch.entries)
        if points:  # once per batch: a flood of decode lines is drawn at the batches' rate
            self.listener.throughput(points)

    def start(self) -> None:
        """Start the feeds of the target: the status poll, the journal, the deployment read."""
        if self.target is None:
            return
        self._feeding = True
        self._spawn(self._start(), "starting the feeds")

    async def _start(self) -> None:
        # Without an early master, a front end draws its first screen before this runs: the
        # poll's first `host` imports asyncssh (0.37 s, in the pool: in a thread it took twice as
        # long, sharing the GIL with the drawing). With one, this runs as the first screen is
        # composed and the master reads the first status (drawn with that screen when ssh has
        # answered by then), and asyncssh is imported once that is drawn, in a thread: imported
        # on the loop, it held the screen that was to show that status for the whole import.
        target = self.target
        assert target is not None
        shown = self.reader is not None and await self._early_status(target.unit)
        if self.reader is not None:
            self._spawn(self.reader.close(), "closing the early ssh")
            self.reader = None
            await self.listener.drawn()
            await asyncio.to_thread(importlib.import_module, "cockpit.remote.ssh")
        first: asyncio.Future[UnitStatus] = asyncio.get_running_loop().create_future()
        self._status_waiters.append(first)
        self._spawn(self._poll_status(), "the status poll")
        # The unit's state first: the journal's backlog and the unit files would share the new
        # connection and the CPU with it. A host that does not answer delays them at most this.
        if not shown:
            with contextlib.suppress(asyncio.TimeoutError):
                await within(first, FIRST_STATUS_WAIT_S)
        self._spawn(self.journal.run(), "the journal feed")
        self._spawn(self.reload(), "reading the unit")
        self._spawn(self._poll_gpus(), "the GPU table")
        if len(self.nodes) > 1:
            failed = lambda detail: self.listener.failed("the group's status", detail)  # noqa: E731
            self._spawn(supervise(self._watch_group, failed), "the group's status")

    def _spawn(self, work: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(work, name=what)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                self.listener.failed(what, str(t.exception()) or type(t.exception()).__name__)

        task.add_done_callback(done)
        return task

    async def stop(self) -> None:
        """Cancel every task. One still running STOP_WAIT_S later is reported (where it waits)
        and left behind: closing the connections after this ends its remote commands, and a
        quit never hangs on it."""
        if self.experiment is not None:
            self.experiment.restore_on_cancel = False  # cut off: its record is there to resume from
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        _, stuck = await asyncio.wait(tasks, timeout=STOP_WAIT_S)
        for task in stuck:
            self.listener.failed(
                task.get_name(), f"still running {STOP_WAIT_S:g} s after it was stopped, {waiting_at(task)}"
            )

    async def switch(self, target: Target, group: str | None = None) -> None:
        """Open another unit; with `group`, that deployment (whose node 0 `target` then is)."""
        await self.stop()
        self.group = group
        self.nodes = deployment_targets(self.config, group) if group else []
        self.group_readiness = None
        self.target = self.nodes[0][1] if self.nodes else target
        self.deployment, self.status, self.poll, self.gpus, self._passive = None, None, None, None, None
        self.invocations, self._running = set(), None
        self._losses = SuppressionScan(self.target.unit)
        self.health = HealthScan()
        self.startups, self._remembered = StartupScan(), set()
        self.passive = ThroughputSeries()
        self.journal = self._new_journal()
        self.start()

    async def reading_host(self, wait: float = CONNECT_TIMEOUT) -> Host:
        """The host for a one-shot read: the early OpenSSH master once it has logged in, else
        (none was started, or it could not log in) the asyncssh connection, whose errors are
        the sentences the cockpit words for an unknown key, a refused login, and the rest. A
        host that has not answered the master within `wait` is not asked again: ConnectionLost."""
        reader, self.reader = self.reader, None
        if reader is not None:
            try:
                await reader.ready(wait)
                self.reader = reader
                return reader
            except ConnectionLost:
                await reader.close()
                raise
            except HostError:
                await reader.close()
        return self.host

    async def _early_status(self, unit: str) -> bool:
        """The first status through the early master, read while asyncssh is still to be
        imported and connected; any failure is left to the poll, which reads at once."""
        with contextlib.suppress(Exception):  # the poll that follows reports whatever is wrong
            host = await self.reading_host(EARLY_STATUS_S)
            if host is self.reader:
                self._status(await with_file_check(host, await fetch(host, unit)))
                return True
        return False

    async def _poll_status(self) -> None:
        target = self.target
        assert target is not None
        poll = self.poll = StatusPoll(
            self.host,
            target.unit,
            self.address or target.given_address,
            on_status=self._status,
            on_problem=self._problem,
            followed=lambda: self.journal.state == "following",
            on_confirmed=self._confirmed,
        )
        await supervise(poll.run, lambda detail: self._problem("error", f"the status poll failed: {detail}"))

    async def _survivors_of(self, ended: str) -> None:
        """After a start ended: its processes that still hold GPU memory, and any process still
        in the unit's cgroup while nothing of it runs, said at once. Out of the cgroup, systemd's
        stop never reaches them; inside it, KillMode= let them be. Not while the unit is still
        deactivating: SGLang's stop under the default KillMode takes 6 s, its processes ending
        all the while (each restart named them survivors)."""
        await asyncio.sleep(SURVIVOR_CHECK_S)
        stopping_since = time.monotonic()
        while self.status is not None and self.status.active_state == "deactivating":
            if time.monotonic() - stopping_since > STOP_WAIT_S:
                break  # a stop that hangs: what is left then is worth naming
            await asyncio.sleep(1)
        assert self.target is not None
        unit = self.target.unit
        use = await gpu_use.read_or_say(self.host)
        left = {p.pid: p for p in use.processes if p.invocation == ended}
        kill_mode = "its KillMode= lets them live (KillMode=control-group ends them)"
        if left:
            self._show_gpus(use)
            named = ", ".join(f"PID {p.pid} ({p.cgroup})" for p in left.values())
            inside = [p for p in left.values() if p.unit == unit]
            why = (
                f"still in {unit}'s cgroup: {kill_mode}"
                if inside
                else "out of the unit's cgroup, where stopping the unit never reaches them"
            )
            self.listener.notice(
                f"{len(left)} process(es) of {unit}'s ended start {ended[:12]} still hold GPU memory: {named}; {why}. "
                "End them (the write modal offers it) before the next start."
            )
        if self.status is not None and self.status.running_invocation is None:  # nothing of the unit should run
            try:
                members = (await processes.read(self.host, None, unit)).titles
            except HostError:
                return  # no cgroup left at all: the stop took everything
            stayed = {pid: title for pid, title in members.items() if pid not in left}
            if stayed:
                named = ", ".join(f"PID {pid} ({title})" for pid, title in stayed.items())
                self.listener.notice(
                    f"{len(stayed)} process(es) still in {unit}'s cgroup after its start {ended[:12]} ended: {named}; "
                    f"{kill_mode}. The next start shares the cgroup with them."
                )

    async def read_nodes(self) -> list[tuple[str, UnitStatus | str]]:
        """Every node's status with its readiness (cockpit.sglang.deployments.status_read's read_group), or
        why it could not be read. Read once a second: node 0's /health, which generates a token,
        is asked again only when its last answer is due (at most every 15 s once it answered)."""
        from cockpit.sglang.deployments.status_read import read_group

        targets = [target for _, target in self.nodes]
        answers = await read_group(self.pool.get, targets, self.catalogs, gpus=False, asked=self._node_health)
        read = [str(a) if isinstance(a, CockpitError) else a[0] for a in answers]
        return [(node, status) for (node, _), status in zip(self.nodes, read, strict=True)]

    async def _watch_group(self) -> None:
        """The group's readiness once a second (cockpit.sglang.deployments.nodes_status); the round it turns
        broken, the node that went down is named with its last traceback (sglang #3099: the
        others keep answering until their watchdogs end them, minutes later)."""
        while True:
            changes = self._group_changes
            read = await self.read_nodes()
            unread = [(node, said) for node, said in read if isinstance(said, str)]
            statuses = [(node, said) for node, said in read if isinstance(said, UnitStatus)]
            group = (
                Readiness(UNKNOWN, f"{unread[0][0]} cannot be read: {unread[0][1]}")
                if unread
                else group_readiness(statuses)
            )
            was, self.group_readiness = self.group_readiness, group
            shown = self._said_with_step(group)
            self.listener.group(shown, [(node, said if isinstance(said, UnitStatus) else None) for node, said in read])
            ours = self._group_changing or changes != self._group_changes
            if group.state == BROKEN and (was is None or was.state != BROKEN) and not ours:
                node, status = next((n, s) for n, s in statuses if s.readiness == DOWN)
                self._spawn(self._report_broken(group, node, status), "reading the lost node's journal")
            await asyncio.sleep(GROUP_POLL_S)

    async def _report_broken(self, group: Readiness, node: str, status: UnitStatus) -> None:
        """The lost node's last traceback of its last start, read from its journal."""
        target = dict(self.nodes)[node]
        traceback = None
        with contextlib.suppress(CockpitError):
            entries = await tail(self.pool.get(target.host), target.unit, LOST_NODE_LINES)
            start = status.invocation_id
            traceback = last_with_frames(fold_entries(e for e in entries if not start or e.invocation_id == start))
        self.listener.group_broken(group.reason, node, traceback)

    def _group_nodes(self) -> list[GroupNode]:
        from cockpit.rollout.group import GroupNode

        assert self.group is not None
        return [GroupNode(node, t, self.pool.get(t.host), self.config.host(t.host)) for node, t in self.nodes]

    async def restart_group(self, note: str = "", flags: tuple[dict, dict] = ({}, {})) -> Attempt:
        """Every node stopped, checked stopped, started and watched to the group's ready, as one
        attempt of the deployment (cockpit.rollout.group)."""
        from cockpit.rollout.group import attempt_log, restart_group

        nodes = self._group_nodes()
        assert self.group is not None
        async with self._changing_group():
            log = attempt_log(self.group, [t for _, t in self.nodes])
            return await restart_group(nodes, log, self.catalogs, note=note, flags=flags, step=self._group_step_began)

    async def group_writes(self, loaded: Unit, edited: Unit) -> tuple[list[NodeWrite], list[Finding]]:
        """Node 0's edit carried to every node's unit as read now (each keeps its --node-rank),
        and what the checks say of the edited command lines, before anything is written."""
        from cockpit.rollout.group import carried, checked, node_writes

        writes = await node_writes(self._group_nodes(), self.catalogs, carried(loaded, edited))
        return [w for w, _ in writes], checked(writes)

    async def group_writes_to(self, texts: dict[str, dict[str, str]]) -> list[NodeWrite]:
        """Every node's unit as read now, edited to the texts `texts[node]` gives it (the way
        back an experiment keeps); a node with none given is left as it is."""
        from cockpit.rollout.group import node_writes
        from cockpit.rollout.single import with_files

        writes = await node_writes(self._group_nodes(), self.catalogs, lambda unit: unit)
        return [replace(w, edited=with_files(w.loaded, texts.get(w.node, {}))) for w, _ in writes]

    async def apply_group(self, writes: list[NodeWrite]) -> Attempt:
        """Every node written or none (cockpit.systemd.group_write), then the group restarted as
        one attempt with node 0's flag changes; node 0's unit read again for the next edit."""
        from cockpit.rollout.single import flags_of
        from cockpit.systemd.group_write import write_group

        await write_group(writes)
        head = writes[0]
        flags = (flags_of(head.loaded, None), flags_of(head.edited, None))
        attempt = await self.restart_group(f"written to {', '.join(w.node for w in writes)}", flags)
        await self.reload()
        return attempt

    @contextlib.asynccontextmanager
    async def _changing_group(self) -> AsyncIterator[None]:
        """While the cockpit itself stops or restarts the nodes, one node down and another still
        running is its own doing, not a node lost: the group's lines still show it, and no
        offer to restart is made. A group still broken once it is done is offered then."""
        self._group_changing += 1
        self._group_changes += 1
        try:
            yield
        finally:
            self._group_changing -= 1
            self._group_changes += 1
            self.group_readiness = None
            self._group_step = None

    def _group_step_began(self, what: str) -> None:
        self._group_step = (what, time.monotonic())

    def _said_with_step(self, group: Readiness) -> Readiness:
        """The group's line while the cockpit restarts or stops it: the step and how long it has
        taken first (a node's stop can take its whole TimeoutStopSec, and the line said only
        what the nodes read meanwhile, a restart that looked like nothing happening)."""
        if self._group_step is None:
            return group
        what, since = self._group_step
        said = f"the cockpit is {what} ({time.monotonic() - since:.0f} s)"
        return Readiness(group.state, f"{said} · {group.reason}" if group.reason else said)

    async def _poll_gpus(self) -> None:
        """The host's GPU table: a block of nvidia-smi's own loop every GPU_POLL_S (gpu_watch: no
        process spawned per read), and a one-shot read at once when a new start is seen; nothing
        more where the host has no nvidia-smi. A stream that fails is said in the table and
        started again a period later."""
        from cockpit.systemd.gpu_watch import GpuWatch

        watch = GpuWatch(self.host, self._show_gpus, GPU_POLL_S)
        self._spawn(self._gpus_on_new_start(watch), "the GPU table of a new start")
        while True:
            try:
                await watch.run()
                return  # no nvidia-smi on the host: said once
            except (HostError, OSError) as e:
                self._show_gpus(GpuUse(missing=f"the GPU table of {self.host.name}: {e}"))
            await asyncio.sleep(GPU_POLL_S)

    async def _gpus_on_new_start(self, watch: GpuWatch) -> None:
        """A new start's table at once, not at the stream's next block: the warnings of the start
        before stand until a read after it says otherwise."""
        while True:
            await self._gpus_again.wait()
            self._gpus_again.clear()
            watch.refresh()
            use = await gpu_use.read_or_say(self.host)
            if not use.no_tool:
                self._show_gpus(use)

    def _show_gpus(self, use: GpuUse) -> None:
        off = self.deployment.off_gpus if self.deployment is not None else None
        if off is not None:  # no process on the GPUs is in its way: no warning about them
            use = GpuUse(missing=off)
        elif use.read_at is not None and use.read_at < self._start_seen_at:
            # A table read before the start that runs now was seen says nothing of what outlived
            # the start before: its processes then are not warned of until a read after says so.
            view = self.gpu_view()
            use = replace(use, processes=[p for p in use.processes if not p.earlier_start(view)])
        self.gpus = use
        self.listener.gpus(use)

    def _ending(self, invocation: str) -> None:
        """The running start has just said it is ending itself: said at once, not at the next
        poll (SGLang kills its tree 5 s later), and its processes counted now, which name the
        child that died where its watchdog did not (cockpit.sglang.server.health)."""
        status = self.status
        if status is None or status.invocation_id != invocation:
            return
        self._assessed(status)
        if self.live and status.control_group:
            self._spawn(self._count_ending(status), "counting the processes of an ending start")

    async def _count_ending(self, status: UnitStatus) -> None:
        with contextlib.suppress(HostError):  # the journal's words stand without it
            members = await processes.read(self.host, status.control_group)
            self.health.saw(status.invocation_id, members, self._schedulers())
            if self.status is not None and self.status.invocation_id == status.invocation_id:
                self._assessed(self.status)

    def _assessed(self, status: UnitStatus) -> None:
        """The last status said again with what the journal and the processes say now."""
        self.status = self._assess(status)
        self.listener.status(self.status)

    def _assess(self, status: UnitStatus) -> UnitStatus:
        """`status` with its readiness from every source (cockpit.sglang.server.health) and how its
        start and the one before ended (the journal's)."""
        status = self.endings.of(status)
        if status.processes is not None:
            self.health.saw(status.invocation_id, status.processes)
        signals = self.health.of(status.invocation_id)
        unit = self.unit
        told = assess(
            status,
            signals,
            status.health,
            status.processes,
            schedulers=self._schedulers(),
            worker_node=unit is not None and node_rank(unit.flag_values()) > 0,
        )
        reason = told.reason
        if told.state == DOWN and status.stopped_by is not None and status.active_state in ("failed", "inactive"):
            reason = stopped_reason(status)
        self.startups.unit_started(status.invocation_id, status.exec_main_start)
        timeline = self.startups.starts.get(status.invocation_id or "")
        if told.state == STARTING and timeline is not None:
            now = under_way(timeline)
            if now is not None:  # where a long start is: "in load weight for 412 s (TP3 slowest so far)"
                reason = f"{now}; {reason}"
        return replace(status, readiness=told.state, readiness_reason=reason, ready_since=signals.ready_at)

    def _status(self, status: UnitStatus) -> None:
        if status.invocation_id:
            self.invocations.add(status.invocation_id)
        status = self._assess(status)
        up = status.running_invocation
        if self._running is not None and up != self._running and self.live:
            self._spawn(self._survivors_of(self._running), "checking what outlived the start")
        if up != self._running:
            self._start_seen_at = time.time()
            self._running = up
            if self.gpus is not None and self.gpus.read_at is not None:
                self._show_gpus(self.gpus)  # its warnings of the start before no longer stand
            self._gpus_again.set()
        self.status = status
        waiters, self._status_waiters = self._status_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(status)
        self.listener.status(status)

    def _confirmed(self, status: UnitStatus) -> None:
        """The last read, confirmed at `checked_at` by the poll's heartbeat (nothing was read again)."""
        if self.status is not None and self.status.invocation_id == status.invocation_id:
            self._assessed(status)

    def _problem(self, kind: str, sentence: str) -> None:
        self.listener.problem(kind, sentence)

    def _host_state(self, host: str, state: str, detail: str | None) -> None:
        if self.target is not None and host == self.target.host:
            self.listener.connection(state, detail)

    # -- a restart watch hears the same feeds (cockpit.systemd.deploy.UnitFeed) ----------------

    def subscribe(self, on_entries: Callable[[list[JournalEntry]], None]) -> Callable[[], None]:
        return self.journal.subscribe(lambda batch: on_entries(batch.entries))

    async def next_status(self) -> UnitStatus:
        """The poll's next status; read directly when the poll has none for a while (the host
        answers a watch's own question even while the poll reports trouble)."""
        assert self.target is not None
        waiter: asyncio.Future[UnitStatus] = asyncio.get_running_loop().create_future()
        self._status_waiters.append(waiter)
        if self.poll is not None:
            self.poll.nudge()
        try:
            return await within(waiter, NEXT_STATUS_WAIT_S)
        except asyncio.TimeoutError:
            return await fetch(self.host, self.target.unit)

    # -- the deployment ---------------------------------------------------------------------

    async def reload(self) -> Deployment | None:
        """Read the deployment's facts again (after a write, or at start)."""
        from cockpit.sglang.deployments.deployment import read_deployment

        target = self.target
        if target is None:
            return None
        try:
            found = await read_deployment(self.host, target, catalogs=self.catalogs)
        except CockpitError as e:
            self.deployment = None
            if self.poll is not None and self.poll.url_host_port is None:
                self.poll.url_host_port = target.url_host_port  # the unit cannot say: SGLang's default
            self.listener.deployment(None, [f"the unit: {e}"])
            return None
        self.deployment = found
        if found.catalog is not None and "checks" not in found.catalog.memo:
            self._spawn(self._read_release_checks(found.catalog), "reading the release's checks")
        if self.poll is not None:
            self.poll.url_host_port = found.address
        if self.live and self.group is None and found.unit is not None:
            self._keep_original(target, found.unit, found.catalog)
        if self._feeding:  # a front end's, not a headless command's: it draws the figures
            if self._passive is not None:
                self._passive.cancel()
            self._passive = self._spawn(self._poll_passive(found), "the server's own figures")
        self.listener.deployment(found, found.problems)
        return found

    async def _read_release_checks(self, catalog: Catalog) -> None:
        """The release's own checks are read once per catalog (0.6-0.8 s for 0.5.23): in a thread,
        not on the first keystroke of the flag editor, and once what was heard is on screen, so the
        start-up's first screens do not share the CPU with it."""
        from cockpit.sglang.preflight.release_checks import release_checks

        await self.listener.drawn()
        await asyncio.to_thread(release_checks, catalog)

    async def _poll_passive(self, found: Deployment) -> None:
        """/metrics, where the unit runs with --enable-metrics, into the throughput series
        (cockpit.load.passive); its decode lines otherwise. Every METRICS_S: each poll is an
        access line in the unit's journal unless it passes `--uvicorn-access-log-exclude-prefixes
        /metrics`, as a Prometheus scrape is."""
        from cockpit.load.passive import MetricsPoller

        flags = found.unit.flag_values() if found.unit is not None else {}
        if "--enable-metrics" not in flags:
            return
        address, port = found.address
        poller = MetricsPoller(self.host, port, address=address, interval_s=METRICS_S)

        def point(p: ThroughputPoint) -> None:
            if self.passive.add_polled(p):
                self.listener.throughput([p])

        await poller.run(point, lambda sentence: None)  # the server not answering is the status pane's to say

    def _remember_ready_starts(self) -> None:
        """A start that reached ready is what the next one is compared with, across sessions."""
        if self.target is None or not self.live:
            return
        for invocation, timeline in self.startups.starts.items():
            if timeline.ready_at is not None and invocation not in self._remembered:
                self._remembered.add(invocation)
                with contextlib.suppress(OSError):  # a read-only home: the comparison is lost, nothing else
                    StartupMemory(self.target.host, self.target.unit).keep(timeline)

    def timeline(self) -> Startup | None:
        """The start-up of the running start (else the latest seen), and the start before it
        that reached ready (this session's journal, else the one kept on the jump box)."""
        assert self.target is not None
        startups = self.startups.paired(StartupMemory(self.target.host, self.target.unit))
        running = self.status.running_invocation if self.status is not None else None
        return next((s for s in startups if s.timeline.invocation == running), startups[0] if startups else None)

    def _schedulers(self) -> int | None:
        """How many scheduler ranks the unit's flags put on this node (None: not read yet)."""
        unit = self.unit
        return ranks_on_node(unit.flag_values()) if unit is not None else None

    @property
    def suppressions(self) -> list[Suppression]:
        """journald's reports of lines it dropped from the unit, as the journal brought them."""
        return self._losses.found

    @property
    def unit(self) -> Unit | None:
        return self.deployment.unit if self.deployment is not None else None

    @property
    def address(self) -> tuple[str, int] | None:
        return self.deployment.address if self.deployment is not None else None

    def changes_refused(self) -> bool:
        """Read-only: `--read-only`, or the host's `read_only = true` (on a deployment, any node's:
        a change to the group changes every node)."""
        targets = [t for _, t in self.nodes] or ([self.target] if self.target is not None else [])
        return self.read_only or any(self.config.host(t.host).read_only for t in targets)

    # -- what a front end does with the unit --------------------------------------------------

    async def older(self, cursor: str) -> list[JournalEntry] | None:
        """Entries before `cursor` (empty: journald has nothing older; None: nothing can say)."""
        return await self.journal.older(cursor)

    async def act(self, action: str) -> Attempt | None:
        """A systemctl action on the unit; on an opened deployment, on the group: `stop` stops
        every node, `start` and `restart` are the group restart (cockpit.rollout.group), as one
        node started or restarted alone would wait on peers that never come. A restart is an
        attempt, returned: watched to the next start's end and recorded (`restart`)."""
        assert self.target is not None
        from cockpit.systemd.control import UnitControl

        if self.group is None:
            if action == "restart":
                return await self.restart()
            if action == "stop":
                self.endings.asked(self._running, "the cockpit's stop")
            await UnitControl(self.host, self.host_config).act(action, self.target.unit)
            return None
        if action == "stop":
            from cockpit.rollout.group import stop_group

            nodes = self._group_nodes()
            async with self._changing_group():
                self._group_step_began("stopping every node")
                await stop_group(nodes)
            return None
        return await self.restart_group()

    async def restart(self) -> Attempt:
        """The unit restarted as it is, through the session's own feeds, and watched to the next
        start's ready or crash: one attempt in the timeline (cockpit.rollout.restart). The start it
        stops is said as stopped by the cockpit's restart, however it died of the stop."""
        from cockpit.rollout.single import restart
        from cockpit.systemd.deploy import RESTART

        target = self.target
        assert target is not None
        self.endings.asked(self._running, RESTART)
        return await restart(
            self.host,
            self.host_config,
            target,
            self.unit,
            catalog=self.deployment.catalog if self.deployment else None,
            log=AttemptLog(target.host, target.unit),
            feed=self._feed,
            address=self.address,
        )

    async def frame(self, traceback: Traceback, index: int, *, anyway: bool = False) -> FrameView:
        """The frame's file as the host has it now, its statement, and what it checks. Only a
        file under the service's Python roots is read, unless the user asked (`anyway`)."""
        from cockpit.sglang.catalog.catalogs import package_root_of
        from cockpit.sglang.preflight.preflight import given_flags

        sites = traceback.sites
        site = sites[index]
        view = FrameView(site.file)
        if self.target is None or site.line is None:
            return view
        host = self.host
        roots = self.deployment.roots if self.deployment is not None else PACKAGE_DIRS
        try:
            source = await self.sources.get(host, site.file, roots=None if anyway else roots)
        except SourceError as e:
            view.refused = isinstance(e, OutsideRoots)
            view.message = f"{e}. Press O to open it anyway." if view.refused else str(e)
            return view
        last = index == len(sites) - 1
        try:
            root = package_root_of(site.file)
            catalog = await self.catalogs.get(host, root) if root else None
        except CockpitError:
            catalog = None
        view.source, view.start, view.end = source, site.line, site.line
        try:
            from cockpit.sglang.explain.explain import explain

            unit = self.unit
            values = given_flags(unit.exec(), catalog) if unit is not None and catalog is not None else None
            if last and traceback.frames and traceback.frames[-1] is site:  # the failing frame: across the stack
                explained = await self.explain_failure(host, traceback, source.text, catalog, roots, values)
            else:
                explained = explain(
                    source.text,
                    site.file,
                    site.line,
                    exception=(traceback.exception or "") if last else "",
                    message=traceback.message if last else "",
                    catalog=catalog,
                )
            view.start, view.end = explained.start_line, explained.end_line
            environment = unit.environment() if unit is not None else None
            if last:
                message = explained.sentence(values, environment)
                places = explained.places()
                if len(places) > 1:  # the failing check alone says nothing the sentence did not
                    message += "\nWhere each comes from:\n" + "\n".join(f"  {p}" for p in places)
            else:
                message = f"Frame {index + 1}: `{explained.statement.strip()}`"
            # What `e` opens the flag editor on: the flags, then the variables (`env:NAME` rows).
            view.flags = [*explained.flags, *(f"env:{v}" for v in explained.environment)] if last else explained.flags
        except (SyntaxError, ValueError) as e:
            message = f"Could not read the statement: {e}"
        started = self.status.exec_main_start if self.status else None
        crashed = traceback.times[0] / 1e6 if traceback.times and traceback.times[0] else None
        moments = [t for t in (started, crashed) if t]
        warning = staleness(source, min(moments) if moments else None)
        said = f"{traceback.exception}: {traceback.message}" if traceback.message else traceback.exception
        view.message = (f"⚠ {warning}\n" if warning else "") + f"{said}\n" + message if last else message
        return view

    async def explain_failure(
        self,
        host: Host,
        traceback: Traceback,
        source: str,
        catalog: Catalog | None,
        roots: SourceRoots,
        given: Mapping[str, str | None] | None,
    ) -> Explanation:
        """explain.explain_for_unit reading on the host: the callers' files and the release's modules
        under `roots`, and the config.json of `given`'s --model-path."""
        from cockpit.sglang.catalog.catalogs import package_root_of
        from cockpit.sglang.explain.explain import explain_for_unit
        from cockpit.sglang.explain.model_reads import module_files
        from cockpit.sglang.preflight.model_files import read_model_files

        frame = traceback.failing_frame
        root = package_root_of(frame.file) if frame is not None else None

        async def module(name: str) -> str | None:
            for path in module_files(name) if root else []:
                with contextlib.suppress(SourceError):
                    return (await self.sources.get(host, f"{root}/{path}", roots=roots)).text
            return None

        async def config(model_path: str) -> Mapping[str, Any] | None:
            found = await read_model_files(host, model_path, sizes=False)
            return found.text if found.config is not None else None

        callers = self.caller_sources(host, traceback, roots)
        return await explain_for_unit(source, traceback, catalog, callers, given, module, config)

    async def caller_sources(self, host: Host, traceback: Traceback, roots: SourceRoots) -> dict[str, str]:
        """The files of the frames above the failing one that lie under `roots` (the release's own),
        read at once; a frame outside them ends explain's walk up the stack there."""
        from cockpit.sglang.catalog.catalogs import package_root_of

        async def one(path: str) -> tuple[str, str | None]:
            try:
                return path, (await self.sources.get(host, path, roots=roots)).text
            except SourceError:
                return path, None

        paths = list(dict.fromkeys(f.file for f in traceback.frames[:-1] if package_root_of(f.file)))
        read = await asyncio.gather(*(one(p) for p in paths))
        return {path: text for path, text in read if text is not None}

    def preflight(self, unit: Unit, catalog: Catalog | None) -> list[Finding]:
        """The static pre-flight of an edit, as the write will run it."""
        from cockpit.rollout.single import preflight

        return preflight(unit, catalog)

    async def dry_run(self, edited: Unit) -> Verdict | None:
        """SGLang's own resolution of an edit's flags, in the unit's Python on the host (kept by
        release and flags); None where there is nothing to run it with (a recorded session, a
        unit whose release or Python is unknown)."""
        found = self.deployment
        if not self.live or found is None or found.catalog is None or found.interpreter is None:
            return None
        from cockpit.sglang.preflight.preflight import flags_only

        return await self.dry_runs.verdict(
            self.host, found.interpreter, flags_only(edited.exec()), found.catalog, edited.environment()
        )

    async def complete_path(self, edited: Unit, typed: str) -> list[str]:
        """Tab in a path flag's value: the host's names that complete it, a relative one from
        the edited unit's WorkingDirectory (nothing for a recorded session)."""
        if not self.live:
            return []
        from cockpit.sglang.preflight.path_completion import complete_path

        return await complete_path(self.host, typed, edited.setting("WorkingDirectory") or "/")

    async def host_findings(self, edited: Unit) -> list[Finding]:
        """What processes outside the unit hold that the edited unit will need, its GPUs and
        its ports, and whether its model fits them, its draft its target, and the release its
        architecture (the write modal's host check; nothing for a recorded session)."""
        catalog = self.deployment.catalog if self.deployment is not None else None
        if not self.live or self.target is None or catalog is None:
            return []
        from cockpit.sglang.preflight.model_preflight import check_before_start

        root = self.deployment.package_root if self.deployment is not None else None
        return await check_before_start(
            self.host,
            edited.exec(),
            catalog,
            self.gpu_view(),
            edited.environment(),
            root=root,
            architectures=self.architectures,
            cwd=edited.setting("WorkingDirectory") or "/",
        )

    def gpu_view(self) -> Viewpoint:
        """The unit's side of the GPU table: its current start, and the starts seen before."""
        assert self.target is not None
        running = self._running
        if running is None and not self._feeding and self.deployment is not None:
            running = self.deployment.status.running_invocation  # a headless session polls nothing
        return Viewpoint(self.target.unit, running, frozenset(self.invocations - {running}))

    async def end_processes(self, identities: list[Identity]) -> Ending:
        """End processes as they were listed (SIGTERM, then SIGKILL; one whose PID is another
        process's now is not signalled)."""
        from cockpit.systemd.control import UnitControl

        control = UnitControl(self.host, self.host_config, read_only=self.changes_refused())
        return await control.end_processes(identities)

    def attempts(self) -> list[Attempt]:
        """The unit's attempts, oldest first; for a deployment opened, the deployment's own (its
        group restarts, each one attempt). Not the original (`timeline_entries`)."""
        return [a for a in self.timeline_entries() if a.outcome != ORIGINAL]

    def timeline_entries(self) -> list[Attempt]:
        """What the attempt timeline lists: the attempts, and first #0, the unit as the cockpit
        first found it (a single unit's way back)."""
        if self.group is not None:
            from cockpit.rollout.group import attempt_log

            return attempt_log(self.group, [t for _, t in self.nodes]).load()
        assert self.target is not None
        return AttemptLog(self.target.host, self.target.unit).load()

    def _keep_original(self, target: Target, unit: Unit, catalog: Catalog | None) -> None:
        """Attempt #0, the unit as the cockpit first found it, kept on the jump box the first time
        it opens the unit (cockpit.attempts); a state directory that cannot be written is said."""
        from cockpit.rollout.single import flags_of

        texts = {f.path: unit.texts[f.path] for f in unit.files if f.path in unit.texts}
        try:
            AttemptLog(target.host, target.unit).keep_original(texts, flags_of(unit, catalog))
        except OSError as e:
            self.listener.notice(f"the unit as first found could not be kept on this machine: {e}")

    async def write_findings(self, edited: Unit) -> list[Finding]:
        """The pre-flight a write runs, SGLang's own dry run included where the host can run it:
        a rollback is checked as any other write (the set it goes back to may be one that crashed)."""
        from cockpit.sglang.preflight.dry_runs import replace_static

        found = self.deployment
        static = self.preflight(edited, found.catalog if found is not None else None)
        try:
            verdict = await self.dry_run(edited)
        except CockpitError:
            verdict = None
        return replace_static(static, verdict)

    def rollback_of(self, attempt: Attempt) -> Unit | None:
        """The unit as `attempt` found it, as an edit of the unit now (None: nothing to change)."""
        current = self.unit
        if current is None:
            return None
        from cockpit.rollout.single import with_files

        edited = with_files(current, attempt.texts)
        return edited if edited.changed() else None

    async def apply(self, loaded: Unit, edited: Unit, note: str = "") -> Attempt:
        """Write, restart and watch through the session's own feeds; the deployment is read
        again afterwards, so the next edit starts from the unit as now written."""
        from cockpit.rollout.single import apply

        target = self.target
        assert target is not None
        attempt = await apply(
            self.host,
            self.host_config,
            target,
            loaded,
            edited,
            catalog=self.deployment.catalog if self.deployment else None,
            log=AttemptLog(target.host, target.unit),
            note=note,
            feed=self._feed,
            address=self.address,
        )
        await self.reload()
        return attempt

    async def load_run(
        self,
        on_begin: Callable[[tuple[int, ...], int, str], None],
        on_level: Callable[[LevelResult], None],
        on_request: Callable[[int, RequestResult], None],
    ) -> tuple[list[LevelResult], Path]:
        """The target's load profile through a forward to the server; the record is saved."""
        from cockpit.load.runner import LoadConfig, Runner, forwarded, run_record, server_args  # aiohttp: only now
        from cockpit.sglang.preflight.preflight import given_flags
        from cockpit.systemd.readiness import server_info

        target = self.target
        assert target is not None
        profile = self.config.profile(target.profile)
        host = self.host
        # The unit's own --host/--port decide where its server is: before the unit was read, SGLang's
        # default 30000 was loaded instead, which on a host of several servers is another's.
        where = self.address or target.given_address
        if where is None and await self.reload() is not None:
            where = self.address
        if where is None:
            raise CockpitError(f"cannot tell where {target.unit} listens on {target.host}: the unit could not be read")
        addr, port = where
        on_begin(
            tuple(profile.concurrency),
            profile.requests,
            f"profile {profile.name}: concurrency {','.join(map(str, profile.concurrency))}, "
            f"{profile.requests} requests, {profile.input_len} in / {profile.output_len} out",
        )
        levels: list[LevelResult] = []

        def level_done(level: LevelResult) -> None:
            levels.append(level)
            on_level(level)

        async with forwarded(host, addr, port) as local:
            config = LoadConfig(
                url=f"http://127.0.0.1:{local}",
                concurrency=profile.concurrency,
                requests=profile.requests,
                warmup=profile.warmup,
                input_len=profile.input_len,
                output_len=profile.output_len,
                endpoint=profile.endpoint,
            )
            started = time.time()
            await Runner(config, on_request=on_request, on_level=level_done).run()
        info = await server_info(host, addr, port) or {}
        unit, catalog = self.unit, self.deployment.catalog if self.deployment else None
        record = run_record(
            config,
            levels,
            started_at=started,
            host=target.host,
            unit=target.unit,
            sglang_version=info.get("version"),
            server_args=server_args(info),
            flags=given_flags(unit.exec(), catalog) if unit is not None and catalog is not None else None,
        )
        record["config"]["url"] = target.url
        from cockpit.load.store import save_run

        path = await asyncio.to_thread(save_run, target.host, target.unit, record)
        return levels, path

    async def add_variant(self, loaded: Unit, edited: Unit) -> tuple[Path, str, int]:
        """The editor's change as a variant of the unit's plan (cockpit.experiment.builder):
        the file, the variant's name, and how many the plan holds now. Written off the loop, as a
        run's record is (an fsync)."""
        from cockpit.experiment.builder import add_variant

        assert self.target is not None
        return await asyncio.to_thread(add_variant, self.target.host, self.target.unit, loaded, edited)

    def built_plan(self) -> Path | None:
        """The unit's plan built in the app, where there is one."""
        from cockpit.experiment.builder import plan_path

        if self.target is None:
            return None
        path = plan_path(self.target.host, self.target.unit)
        return path if path.exists() else None

    async def run_experiment(self, plan: Plan, say: Callable[[str], None], *, resume: bool = False) -> dict[str, Any]:
        """An experiment on the target (cockpit.experiment.run): each variant checked, written,
        restarted, measured, and the unit put back; its record."""
        from cockpit.experiment.run import ExperimentRun

        return await ExperimentRun(self, plan, say=say, resume=resume).run()

    def start_experiment(self, plan: Plan, *, resume: bool = False) -> ExperimentRun:
        """The app's experiment: a task of the session, heard through `listener.experiment`; one
        at a time. The app closing cuts it off where it is (the record says so, for a resume)."""
        from cockpit.experiment.run import ExperimentRun

        if self.experiment is not None and self.experiment.task is not None and not self.experiment.task.done():
            raise CockpitError(f"the experiment {self.experiment.plan.name} is running: B cancels it")
        run = ExperimentRun(self, plan, say=lambda _: self.listener.experiment(run), resume=resume)
        run.task = self._spawn(run.run(), f"the experiment {plan.name}")
        run.task.add_done_callback(lambda _: self.listener.experiment(run))
        self.experiment = run
        return run

    def cancel_experiment(self) -> bool:
        """Cancel the running experiment; it puts the unit back. False when none runs."""
        run = self.experiment
        if run is None or run.task is None or run.task.done():
            return False
        run.restore_on_cancel = True
        run.task.cancel()
        return True

    def saved_runs(self) -> list[SavedRun]:
        from cockpit.load.store import SavedRun, label, load_runs

        if self.target is None:
            return []
        return [SavedRun(label(r), r) for _, r in load_runs(self.target.host, self.target.unit)]

    async def list_units(self, host: str) -> list[str]:
        """The SGLang units systemd knows on `host` (the picker's list)."""
        return await list_units(self.pool.get(host))

    async def show_units(self, host: str, units: list[str]) -> list[UnitStatus]:
        return await show(self.pool.get(host), units)

    async def fleet_round(self) -> list[HostRound]:
        """Every configured host (and the open unit's) once, over the pool's one connection
        each: the fleet view's round (cockpit.sglang.deployments.fleet)."""
        from cockpit.sglang.deployments.fleet import FleetReader, hosts_of

        if self._fleet is None:
            self._fleet = FleetReader(self.pool.get)
        return await self._fleet.round(hosts_of(self.config, [self.target] if self.target else []))

    def compare_runs(self, a: dict[str, Any], b: dict[str, Any]) -> Comparison:
        from cockpit.load.store import comparison

        return comparison(a, b)

    async def sample_gpus(self, on_samples: SamplesCallback, on_notice: NoticeCallback) -> None:
        from cockpit.load.gpu import GpuSampler

        await GpuSampler(self.host).run(on_samples, on_notice)

    def host_named(self, name: str) -> Host:
        """Another host through the same pool (a command about a host and no unit)."""
        return self.pool.get(name)

    async def stacks(self, root_ptrace: bool = False) -> StackCapture:
        """Every process of the unit's running start, where it is now (py-spy dump): kept for the
        incident note. A CockpitError when the unit runs nothing, a HostError when py-spy cannot,
        RootPtraceRefused when it would run as root on a read-only host and `root_ptrace` (the
        user's yes) was not given."""
        from cockpit.systemd import stacks

        assert self.target is not None
        status = self.status or await fetch(self.host, self.target.unit)
        if status.running_invocation is None or not status.control_group:
            raise CockpitError(f"{self.target.unit} is {status.active_state}: no process to dump")
        found = await stacks.read(self.host, status.control_group, sudo=self.host_config.sudo, root_ptrace=root_ptrace)
        self.last_stacks = stacks.StackCapture(time.time(), found)
        return self.last_stacks

    async def gather_incident(self, since: str | None = None, load_run: dict[str, Any] | None = None) -> Incident:
        """The note's facts, read over the session's connection; a CockpitError when the
        status or the journal cannot be read."""
        from cockpit.incident import gather

        assert self.target is not None
        period = None
        if since is None and (shown := self._incident_on_screen()) is not None:
            at, period = shown
            since = f"@{int(at)}"
        incident = await gather(
            self.host,
            self.target,
            since=since,
            load_run=load_run,
            sources=self.sources,
            catalogs=self.catalogs,
            period=period,
        )
        incident.stacks = self.last_stacks
        return incident

    def _incident_on_screen(self) -> tuple[float, str] | None:
        """Where the incident the screen shows begins, and how the note words it: its oldest
        traceback in the journal window, or the first attempt of the latest run of failed ones
        (from the attempt after the last ready one before a failure), whichever is earlier; the
        note reads from there, or from the unit's previous start where that is earlier. The
        default period alone dropped a crash attempt and an eight-rank crash the screen showed."""
        assert self.target is not None
        said: list[tuple[float, str]] = []
        shown = [tb.times[0] for _, tb in self.rows.tracebacks() if tb.times and tb.times[0]]
        if shown:
            said.append((min(shown) / 1e6, "its oldest traceback in the journal window"))
        attempts = self.attempts()
        failed = [k for k, a in enumerate(attempts) if a.outcome not in ("ready", "pending")]
        if failed:
            readies = [k for k in range(failed[-1]) if attempts[k].outcome == "ready"]
            first = attempts[readies[-1] + 1 if readies else 0]
            said.append((first.started_at, f"attempt #{first.number}"))
        if not said:
            return None
        at, what = min(said)
        return at - 1, f"the incident on screen: since {time.strftime('%H:%M:%S', time.localtime(at))} ({what})"

    async def incident(self, since: str | None = None) -> Incident:
        """The incident note's facts, read over the session's own connection; what the session
        holds in memory when the host cannot be read."""
        target = self.target
        if target is None or not self.live:
            return self.incident_in_memory()
        try:
            return await within(self.gather_incident(since), GATHER_TIMEOUT_S)
        except (CockpitError, asyncio.TimeoutError) as e:
            incident = self.incident_in_memory()
            reason = str(e) or f"no answer within {GATHER_TIMEOUT_S:.0f} s"
            incident.problems.append(
                f"{target.host} could not be read ({reason}): the tracebacks are those the cockpit held in memory"
            )
            return incident

    def incident_in_memory(self) -> Incident:
        """The note from what the session holds: its status, unit and journal window."""
        from cockpit.incident import Incident, attempts_in, unit_events

        target = self.target
        host, unit = (target.host, target.unit) if target else ("-", "no unit")
        rows = self.rows
        records = rows.folder.records
        times = [
            t for r in records for t in ([r.entry.realtime_us] if not isinstance(r, Traceback) else r.times[:1]) if t
        ]
        incident = Incident(
            host=host,
            unit=unit,
            period="the journal the cockpit held in memory",
            period_start=times[0] / 1e6 if times else None,
            period_end=times[-1] / 1e6 if times else None,
            status=self.status,
            tracebacks=[tb for _, tb in reversed(rows.tracebacks())],
            command=self.unit.exec() if self.unit is not None else None,
        )
        incident.events = unit_events(r.entry for r in records if not isinstance(r, Traceback))
        if self.gpus is not None and self.gpus.gpus and target is not None:
            incident.gpus = gpu_use.summary_lines(self.gpus, self.gpu_view())
        incident.suppressions = list(self.suppressions)
        incident.stacks = self.last_stacks
        incident.startups = self.startups.paired()
        catalog = self.deployment.catalog if self.deployment else None
        if catalog is not None and catalog.version:
            incident.version, incident.version_from = catalog.version, "the installed package"
        if target is not None:
            incident.attempts = attempts_in(AttemptLog(host, unit).load(), incident.period_start)
        return incident

    async def close(self) -> None:
        self.pool.closing()
        await self.stop()
        if self.reader is not None:
            await self.reader.close()
        await self.pool.close()


class RecordedSession(Session):
    """A session over recorded data: nothing is followed or read from a host. A test delivers
    entries (`deliver`) and statuses (`show_status`) through the pipeline the live feeds use."""

    live = False

    def __init__(
        self, config: Config, target: Target | None, *, read_only: bool = False, group: str | None = None
    ) -> None:
        super().__init__(config, target, read_only=read_only, ssh_configs=lambda: [], group=group)
        self.fleet: list[HostRound] = []  # what each fleet round answers

    async def fleet_round(self) -> list[HostRound]:
        return self.fleet

    def start(self) -> None:
        return None

    def deliver(self, entries: list[JournalEntry]) -> None:
        self.journal.deliver(entries)

    def show_status(self, status: UnitStatus) -> None:
        self._status(status)

    def use_deployment(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.listener.deployment(deployment, deployment.problems)

    def use_unit(self, unit: Unit, catalog: Catalog | None = None) -> None:
        """A recorded deployment of `unit` (and the release's `catalog`)."""
        from cockpit.sglang.deployments.deployment import Deployment

        assert self.target is not None
        status = self.status or UnitStatus(unit=self.target.unit, host=self.target.host)
        self.use_deployment(Deployment(self.target, status, unit=unit, catalog=catalog))

    async def older(self, cursor: str) -> list[JournalEntry] | None:
        return None

    async def sample_gpus(self, on_samples: SamplesCallback, on_notice: NoticeCallback) -> None:
        return None

    async def reload(self) -> Deployment | None:
        return self.deployment
