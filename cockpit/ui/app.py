"""The cockpit app: the panes of one unit, drawn from what its session hands them.

The app reaches the core through one `Session` (cockpit.session): it owns the host
connection, the status poll, the journal feed and the deployment's facts, and does the work
(opening a frame's source, writing an edit, a load run, an incident). The app listens and
draws. Long calls run in workers with `exit_on_error=False`: a failed call shows in a notice
and the app keeps running. Tests and snapshots hand the app a `RecordedSession`.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from typing import TYPE_CHECKING, Any

from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Input

from cockpit.attempts import ORIGINAL, Attempt
from cockpit.config import Config
from cockpit.errors import CockpitError
from cockpit.fmt import duration
from cockpit.session import FrameView, JournalBatch, Listener, RecordedSession, Session
from cockpit.sglang.server.health import Readiness
from cockpit.systemd.control import END_GRACE_S
from cockpit.systemd.gpu_use import GpuUse
from cockpit.systemd.status import UnitStatus
from cockpit.targets import Target, all_targets
from cockpit.timeouts import within
from cockpit.traceback.groups import crash_loop, group
from cockpit.traceback.model import Traceback
from cockpit.traceback.render import site_title
from cockpit.ui import inert
from cockpit.ui.failures import said_failure
from cockpit.ui.pacing import (
    BEHIND_PERIOD,
    FLOOD_HOLD_S,
    FLOOD_LATE_S,
    FLOOD_PERIOD,
    FLOOD_RATE,
    FRAME_PERIOD,
    INPUT_HOLD_S,
    PacedScreen,
)
from cockpit.ui.panes.attempts import AttemptsPane
from cockpit.ui.panes.flags import FlagsPane
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.source import Shown, SourcePane, SourceView, cached_highlight
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.panes.throughput import ThroughputPane
from cockpit.ui.panes.tracebacks import TracebackList
from cockpit.ui.screens.confirm import ConfirmModal
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.screens.picker import PickerScreen
from cockpit.ui.screens.runs import RunPicker
from cockpit.ui.screens.stacks import StacksScreen
from cockpit.ui.screens.startup import StartupScreen
from cockpit.ui.screens.trust import trust_modal
from cockpit.ui.themes import DEFAULT_THEME, discover, remember, remembered

# What the first screen does not draw (the fleet, the write modals and the pre-flight under
# them, the load run's records) is imported where it is first opened: the app draws the unit's
# state before it pays for them.
if TYPE_CHECKING:
    from rich.console import RenderableType

    from cockpit.experiment.run import ExperimentRun
    from cockpit.load.passive import ThroughputPoint
    from cockpit.load.results import LevelResult
    from cockpit.load.store import SavedRun
    from cockpit.remote.mux import MuxHost
    from cockpit.sglang.deployments.deployment import Deployment
    from cockpit.sglang.preflight.preflight import Finding
    from cockpit.systemd.process_end import Holder
    from cockpit.ui.early_state import EarlyState

GPU_CHECK_S = 8.0  # how long the write modal waits for the host's GPU table
_ACTION_TEXT = {
    "restart": ("Restart", "SGLang stops serving now and loads the model again; requests in flight fail."),
    "stop": ("Stop", "SGLang stops serving until you start it again."),
    "start": ("Start", "SGLang starts and loads the model."),
}


class _Panes(Listener):
    """The session's news, drawn: each call lands on the pane it is about."""

    def __init__(self, app: CockpitApp) -> None:
        self.app = app

    def status(self, status: UnitStatus) -> None:
        self.app.status_pane.show_status(status)

    def gpus(self, use: GpuUse) -> None:
        self.app.status_pane.show_gpus(use, self.app.session.gpu_view().earlier)

    def notice(self, sentence: str) -> None:
        self.app.notify(sentence, severity="warning", timeout=30)

    def problem(self, kind: str, sentence: str) -> None:
        self.app.status_pane.show_problem(kind, sentence)

    def connection(self, state: str, detail: str | None) -> None:
        if self.app.is_running:
            self.app.status_pane.show_connection(state, detail)
            self.app.check_freshness()

    async def drawn(self) -> None:
        done = asyncio.get_running_loop().create_future()
        self.app.call_after_refresh(lambda: None if done.done() else done.set_result(None))
        await done

    def journal(self, batch: JournalBatch) -> None:
        self.app.journal_view.show_added(batch.added, batch.rows_before)

    def journal_state(self, state: str, detail: str | None) -> None:
        self.app.check_freshness()

    def journal_behind(self, lines: int) -> None:
        self.app.journal_view.show_behind(lines)

    def throughput(self, points: list[ThroughputPoint]) -> None:
        self.app.throughput_pane.passive(points)

    def deployment(self, deployment: Deployment | None, problems: list[str]) -> None:
        for problem in problems:
            self.app.notify(f"cannot read {problem}", severity="warning", timeout=8)

    def failed(self, what: str, detail: str) -> None:
        self.app.notify(f"{what} failed: {detail}", severity="error", timeout=10)

    def group(self, readiness: Readiness, nodes: list[tuple[str, UnitStatus | None]]) -> None:
        self.app.status_pane.show_group(self.app.session.group or "", readiness, nodes)

    def group_broken(self, reason: str, node: str, traceback: Traceback | None) -> None:
        self.app.offer_group_restart(reason, node, traceback)

    def experiment(self, run: ExperimentRun) -> None:
        from cockpit.ui.screens.experiment import ExperimentScreen

        screen = self.app.screen
        if isinstance(screen, ExperimentScreen):
            screen.show(run)
        elif run.task is not None and run.task.done():
            said = run.record.get("answer", {}).get("why") or "it ended"
            self.app.notify(f"the experiment {run.plan.name} ended: {said} (E shows it)", timeout=10)


class CockpitApp(App[None]):
    CSS_PATH = "cockpit.tcss"
    TITLE = "SGLang cockpit"
    _flooded_at = -math.inf  # when the journal last came late enough to slow the frames (monotonic)
    _input_at = -math.inf  # when a person last pressed a key, clicked or scrolled (monotonic)
    # The footer shows what a new operator reaches for first and fits 160 columns beside any pane's
    # own keys; `?` and the palette list every key, the hidden ones too.
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
        Binding("question_mark", "help", "Keys", key_display="?", id="help"),
        Binding("r", "unit_action('restart')", "Restart", id="restart"),
        Binding("x", "unit_action('stop')", "Stop", show=False, id="stop"),
        Binding("t", "unit_action('start')", "Start", show=False, id="start"),
        Binding("o", "pick", "Units", show=False, id="pick"),
        Binding("V", "fleet", "Fleet", id="fleet"),
        Binding("e", "edit_flags", "Flags", id="flags"),
        Binding("h", "attempts", "Attempts", id="attempts"),
        Binding("m", "throughput", "Throughput", show=False, id="throughput"),
        Binding("b", "load_run", "Load run", id="load_run"),
        Binding("B", "cancel_run", "Cancel run", show=False, id="cancel_run"),
        Binding("E", "experiment", "Experiment", show=False, id="experiment"),
        Binding("S", "snapshot", "Snapshot", id="snapshot"),
        Binding("s", "stacks", "Stacks", show=False, id="stacks"),
        Binding("p", "startup", "Start-up", show=False, id="startup"),
    ]
    on_worker_state_changed = said_failure  # a worker that ended in error is said, whichever it was

    def __init__(
        self,
        config: Config,
        target: Target | None = None,
        *,
        read_only: bool = False,
        live: bool = True,
        session: Session | None = None,
        reader: MuxHost | None = None,
        group: str | None = None,
        early: EarlyState | None = None,
    ) -> None:
        """`session`: the session to draw; by default a live one of `target` (`live=False`: a
        recorded one, which follows nothing), whose first status comes through `reader` (an
        OpenSSH master started before Textual was imported) where one is given; `early` draws
        that status on the terminal until the first frame does."""
        inert.install()
        super().__init__()
        self.config = config
        if session is None:
            session = (
                Session(config, target, read_only=read_only, trust_prompt=self._ask_trust, reader=reader, group=group)
                if live
                else RecordedSession(config, target, read_only=read_only, group=group)
            )
        self.session = session
        self._early = early
        session.listener = _Panes(self)
        self._prompt_kind: str | None = None
        self._gpu_started = False
        themes, self.theme_problems = discover()
        for theme in themes:
            self.register_theme(theme)
        wanted = remembered() if session.live else None
        wanted = wanted or config.ui.theme or DEFAULT_THEME
        self.theme = wanted if wanted in self.available_themes else DEFAULT_THEME
        if wanted not in self.available_themes:
            self.theme_problems.append(f"theme {wanted!r} is not installed: using {DEFAULT_THEME}")
        self.set_keymap(config.ui.keys)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notice is plain text: most carry a host's words (an error, a name), and as
        markup `[@click=...]` in them would be an action and `[link=...]` a link."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # -- layout ---------------------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        return PacedScreen(id="_default", period=self._frame_period)

    def _display(self, screen: Screen, renderable: RenderableType | None) -> None:
        """Textual's, after the early state line is told that the terminal is Textual's from
        this frame on (cockpit/ui/early_state.py): a line being written is written first. A
        private method of Textual, pinned by constraints.txt: tests/ui/test_app_shell.py fails
        when the first frame no longer comes through it."""
        if self._early is not None and renderable is not None and not self._batch_count:
            self._early.hand_over()
            self._early = None
        super()._display(screen, renderable)

    def _frame_period(self) -> float:
        """Frames FLOOD_PERIOD apart while the journal arrives faster than FLOOD_RATE, and
        BEHIND_PERIOD apart while it arrives late: under a flood the cores go to reading it
        rather than to frames of lines that scroll by unread. At 25,000 lines/s on a 2-core
        machine that also ran the host, 60 frames a second left the app 4 s behind, 10 kept it
        up (benchmarks/bench_app_flood.py --knee, docs/facts.md). Else, and for INPUT_HOLD_S
        after a key, a click or a wheel, FRAME_PERIOD apart: what a person did is drawn at once."""
        now = time.monotonic()
        journal = self.session.journal
        late = journal.late_s() > FLOOD_LATE_S
        if late or journal.rate() > FLOOD_RATE:
            self._flooded_at = now
        if now - self._input_at < INPUT_HOLD_S:
            return FRAME_PERIOD
        if late:
            return BEHIND_PERIOD
        return FLOOD_PERIOD if now - self._flooded_at < FLOOD_HOLD_S else FRAME_PERIOD

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseDown, events.MouseScrollDown, events.MouseScrollUp)):
            self._input_at = time.monotonic()
        await super().on_event(event)

    @property
    def target(self) -> Target | None:
        return self.session.target

    def compose(self) -> ComposeResult:
        host, unit = (self.target.host, self.target.unit) if self.target else ("-", "no unit")
        self._status = StatusPane(host, unit, id="status")
        yield self._status
        with Horizontal(id="main"):
            with Vertical(id="journal-box"):
                self._journal = JournalView(id="journal")
                self._journal.attach(self.session.rows)
                yield self._journal
                yield Input(id="prompt")
            yield TracebackList(id="tracebacks")
        with ContentSwitcher(id="detail"):
            yield SourcePane(id="source")
            yield FlagsPane(
                self.session.preflight,
                self.session.dry_run if self.session.live else None,
                self.session.complete_path if self.session.live else None,
                id="flags",
            )
            yield AttemptsPane(id="attempts")
            self._throughput = ThroughputPane(id="throughput")
            yield self._throughput
        yield Footer()

    @property
    def status_pane(self) -> StatusPane:
        """Held, not queried: a modal on top (or the app closing) must not make it unreachable
        to the feeds and timers."""
        return self._status

    @property
    def journal_view(self) -> JournalView:
        return self._journal

    @property
    def throughput_pane(self) -> ThroughputPane:
        """Held, as the status pane is: a decode line a second reaches it, never a query."""
        return self._throughput

    def on_mount(self) -> None:
        self.set_interval(0.5, self.check_freshness)
        for problem in self.theme_problems:
            self.notify(problem, severity="warning", timeout=10)
        unknown = sorted(set(self.config.ui.keys) - self.binding_ids())
        if unknown:
            self.notify(f"[ui.keys] names no binding {unknown[0]!r}: see ? for the ids", severity="warning", timeout=10)
        self.query_one("#prompt").display = False
        self.query_one(TracebackList).display = False
        self.query_one("#detail").display = False
        self.journal_view.focus()
        if self.target is None:
            if self.session.live:
                self.action_pick()
            return
        self._start()

    def _start(self) -> None:
        target = self.target
        assert target is not None
        group = self.session.group
        self.sub_title = f"deployment {group}" if group else f"{target.unit} @ {target.host}"
        nodes = len(self.session.nodes)
        self.journal_view.set_label(f"journal · {group}: {nodes} nodes merged" if group else f"journal · {target.unit}")
        self.status_pane.watching = self.session.live
        if self.session.reader is not None:
            # the early master's answer, when it is in already, is drawn with the first frame
            self.session.start()
        else:
            self.call_after_refresh(self.session.start)  # the panes are on screen before the connection is made

    def check_freshness(self) -> None:
        """The journal's title says when its lines stopped being live: the follower is
        reconnecting, or the host has answered nothing (status included) for two polls. A
        recorded session is as old as it was recorded: it is never called stale."""
        if not self.session.live or self.target is None or not self.is_running:
            return
        pane = self.status_pane
        state, _ = pane.connection
        feed = self.session.journal.state
        trouble = None
        if feed == "connecting":
            trouble = "connecting…"
        elif state in ("reconnecting", "error", "disconnected") or feed != "following":
            trouble = "not following (connection lost)"
        elif pane.stale():
            trouble = f"not following (no answer from {self.target.host} for {pane.age():.0f} s)"
        self.journal_view.show_feed(trouble)

    async def _ask_trust(self, host: str, fingerprint: str) -> bool:
        """The session asks from its own tasks, which are no Textual workers: the answer comes
        back through the modal's callback."""
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def answered(yes: bool | None) -> None:
            if not answer.done():
                answer.set_result(bool(yes))

        self.push_screen(trust_modal(host, fingerprint), answered)
        return await answer

    # -- actions --------------------------------------------------------------------------

    def action_unit_action(self, action: str) -> None:
        target = self.target
        if target is None:
            return
        if action != "stop" and self.session.group is not None:
            self.offer_group_restart()
            return
        if self.changes_refused():
            self.notify(f"{target.host} is read-only here: nothing was {action}ed", severity="error")
            return
        verb, effect = _ACTION_TEXT[action]

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_unit_action(action, target)

        title = f"{verb} {target.unit} on {target.host}?"
        if self.session.group is not None:
            title = f"{verb} deployment {self.session.group}: every node?"
        self.push_screen(ConfirmModal(title, effect, confirm=verb), confirmed)

    def offer_group_restart(self, reason: str = "", node: str = "", traceback: Traceback | None = None) -> None:
        """The opened deployment restarted as one (every node stopped, checked stopped, started,
        watched to the group's ready), asked first; with `reason`, because `node` went down while
        the others run, its traceback shown."""
        group = self.session.group
        nodes = ", ".join(node for node, _ in self.session.nodes)
        body = f"Every node ({nodes}) is stopped, checked stopped, started and watched to the group's ready."
        title = f"Restart deployment {group}?"
        if reason:
            title = f"Deployment {group} is broken"
            told = "\n".join(traceback.lines[-12:]) if traceback is not None else f"{node}'s journal shows no traceback"
            body = f"{reason}.\n\n{node}'s last traceback:\n{told}\n\nRestart the group? {body}"

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_group_restart()

        self.push_screen(ConfirmModal(title, body, confirm="Restart the group"), confirmed)

    @work(exclusive=True, group="group-restart", exit_on_error=False)
    async def run_group_restart(self) -> None:
        self.notify(f"restarting deployment {self.session.group}: every node", timeout=6)
        try:
            attempt = await self.session.restart_group()
        except CockpitError as e:
            self.notify(str(e), title="group restart failed", severity="error", timeout=10)
            return
        said = f"group restart: {attempt.outcome}: {attempt.detail}"
        self.notify(said, severity="information" if attempt.outcome == "ready" else "error", timeout=15)

    @work(exit_on_error=False)
    async def run_unit_action(self, action: str, target: Target) -> None:
        if target != self.target:
            return  # the user switched units while the modal was up
        if action == "restart":
            self.notify(f"restarting {target.unit} on {target.host}, watched to ready…", timeout=4)
        try:
            attempt = await self.session.act(action)
        except CockpitError as e:
            self.notify(str(e), title=f"{action} failed", severity="error", timeout=10)
            return
        if attempt is None:
            self.notify(f"{action} of {target.unit} on {target.host} done", timeout=4)
            return
        self.said_attempt(attempt)

    def action_pick(self) -> None:
        targets = all_targets(self.config)
        if self.target is not None and self.target not in targets:
            targets.insert(0, self.target)
        hosts = sorted({t.host for t in targets} | set(self.config.hosts))

        def picked(target: Target | None) -> None:
            if target is not None and target != self.target:
                self.switch_target(target)

        status = self.status_pane.status
        known = {(self.target.host, self.target.unit): status} if self.target and status else {}
        self.push_screen(PickerScreen(self.session, targets, hosts, known=known), picked)

    def action_fleet(self) -> None:
        from cockpit.ui.screens.fleet import FleetScreen

        def picked(chosen: Target | str | None) -> None:
            if isinstance(chosen, str):  # a deployment: opened as one, on its node 0
                if chosen != self.session.group:
                    self.switch_target(Target.of(self.config.units[self.config.deployments[chosen].nodes[0]]), chosen)
            elif chosen is not None and (chosen != self.target or self.session.group is not None):
                self.switch_target(chosen)

        self.push_screen(FleetScreen(self.session), picked)

    @work(exclusive=True, group="switch", exit_on_error=False)
    async def switch_target(self, target: Target, group: str | None = None) -> None:
        self.status_pane.reset(target.host, target.unit)
        self.query_one(TracebackList).show([])
        self.query_one("#detail").display = False
        await self.session.switch(target, group)
        self.journal_view.attach(self.session.rows)
        self._start()

    # -- tracebacks and source ---------------------------------------------------------------

    def on_journal_view_tracebacks_changed(self, event: JournalView.TracebacksChanged) -> None:
        groups = group(self.journal_view.model.tracebacks())
        self.query_one(TracebackList).show(groups)
        loop = crash_loop(groups)
        if loop is None:
            self.status_pane.show_crash_loop(None)
            return
        span = (loop.last_us - loop.first_us) / 1e6 if loop.first_us and loop.last_us else 0.0
        stop = "x stops the unit while you fix it" if not self.changes_refused() else "read-only here"
        same = f"the same failure ({loop.newest.exception})"
        last = (loop.last_us or 0) / 1e6
        at = f", the last at {time.strftime('%H:%M:%S', time.localtime(last))}" if last else ""
        said = f"crash loop: {loop.starts} starts in {duration(span)}{at}, {same} · {stop}"
        self.status_pane.show_crash_loop(said, last)

    def on_journal_view_need_older(self, event: JournalView.NeedOlder) -> None:
        if self.target is not None:
            self.page_older(event.cursor)

    @work(group="feeds", exit_on_error=False)
    async def page_older(self, cursor: str) -> None:
        try:
            entries = await self.session.older(cursor)
        except CockpitError as e:
            self.journal_view.paging_failed()
            self.notify(f"cannot page the journal back: {e}", severity="warning")
            return
        if entries is None:
            self.journal_view.paging_failed()
            return
        self.journal_view.prepend_entries(entries)

    def on_traceback_list_jump(self, event: TracebackList.Jump) -> None:
        self.journal_view.toggle_record(event.record_index, True)
        self.journal_view.jump_to_record(event.record_index)

    def on_journal_view_open_frame(self, event: JournalView.OpenFrame) -> None:
        self.open_frame(event.traceback, event.frame)

    def on_source_pane_open(self, event: SourcePane.Open) -> None:
        self.open_frame(event.traceback, event.frame, anyway=event.anyway)

    def show_detail(self, name: str) -> None:
        switcher = self.query_one("#detail", ContentSwitcher)
        switcher.display = True
        switcher.current = name

    @on(SourcePane.Closed)
    @on(FlagsPane.Closed)
    @on(AttemptsPane.Closed)
    @on(ThroughputPane.Closed)
    def close_detail(self) -> None:
        self.query_one("#detail").display = False
        self.journal_view.focus()

    @work(exclusive=True, group="source", exit_on_error=False)
    async def open_frame(self, traceback: Traceback, index: int, anyway: bool = False) -> None:
        """The session reads the frame's file (under the service's Python roots only, unless
        the user asked for this file: `O` on the refusal); the pane draws it."""
        pane = self.query_one(SourcePane)
        pane.traceback, pane.frame = traceback, index
        self.show_detail("source")
        site = traceback.sites[index]
        pane.set_title(site_title(traceback, index))
        if self.target is None or site.line is None:
            return
        pane.refused = False
        view: FrameView = await self.session.frame(traceback, index, anyway=anyway)
        source = view.source
        if source is None:
            pane.view.show(Shown(self.target.host, view.path, 0, 1, 1, 1), "", None)
            pane.refused = view.refused
            pane.set_message(view.message)
            return
        pane.flags = view.flags
        key = (source.host, source.path, source.mtime)
        pane.view.show(Shown(*key, site.line, view.start, view.end), source.text, cached_highlight(key))
        pane.set_message(view.message)
        pane.view.focus()
        if cached_highlight(key) is None:
            pane.highlight_in_thread(key, source.text, "monokai" if self.current_theme.dark else "friendly")

    # -- the flag editor and attempts --------------------------------------------------------

    def action_edit_flags(self, focus: list[str] | None = None) -> None:
        unit = self.session.unit
        if unit is None:
            self.notify("the unit file is not loaded yet (or could not be read)", severity="warning")
            return
        pane = self.query_one(FlagsPane)
        if pane.loaded is None or pane.edited is None or not pane.edited.changed():
            pane.load(unit, self.session.deployment.catalog if self.session.deployment else None, focus)
        self.show_detail("flags")
        pane.query_one("#flag-list").focus()

    def on_source_pane_edit(self, event: SourcePane.Edit) -> None:
        self.action_edit_flags(event.flags)

    def action_attempts(self) -> None:
        if self.target is None:
            return
        pane = self.query_one(AttemptsPane)
        pane.show(self.session.timeline_entries())
        self.show_detail("attempts")
        pane.focus()

    async def on_flags_pane_variant(self, event: FlagsPane.Variant) -> None:
        """The edit as a variant of the unit's experiment plan, which `E` then offers to run."""
        try:
            path, name, count = await self.session.add_variant(event.loaded, event.edited)
        except CockpitError as e:
            self.notify(str(e), severity="error", timeout=8)
            return
        except OSError as e:
            self.notify(f"the experiment plan could not be written: {e}", severity="error", timeout=8)
            return
        self.notify(f"added variant {name} to {path} ({count} variants); E runs the experiment", timeout=8)

    def on_flags_pane_write(self, event: FlagsPane.Write) -> None:
        target = self.target
        if target is None:
            return
        if self.changes_refused():
            self.notify(f"{target.host} is read-only here: nothing is written", severity="error")
            return
        if self.session.group is not None:
            self.open_group_write(event.loaded, event.edited)
            return
        self.open_write(target, event.loaded, event.edited, event.findings)

    @work(exclusive=True, group="write", exit_on_error=False)
    async def open_group_write(self, loaded: Any, edited: Any) -> None:
        """The edit of node 0's flags carried to every node, each node's diff and the checks of
        every node and between them, before anything is written."""
        from cockpit.ui.screens.write import GroupWriteModal

        group = self.session.group
        try:
            writes, findings = await self.session.group_writes(loaded, edited)
        except CockpitError as e:
            self.notify(str(e), title=f"deployment {group}: nothing written", severity="error", timeout=12)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_group_write(writes)

        self.push_screen(GroupWriteModal(group or "", writes, findings), confirmed)

    @work(exclusive=True, group="group-restart", exit_on_error=False)
    async def run_group_write(self, writes: list[Any]) -> None:
        self.notify(f"writing deployment {self.session.group}: every node, then the group restart", timeout=6)
        try:
            attempt = await self.session.apply_group(writes)
        except CockpitError as e:
            self.notify(str(e), title="the deployment's write failed", severity="error", timeout=15)
            return
        said = f"group write and restart: {attempt.outcome}: {attempt.detail}"
        self.notify(said, severity="information" if attempt.outcome == "ready" else "error", timeout=15)

    @work(exclusive=True, group="write", exit_on_error=False)
    async def open_write(
        self, target: Target, loaded: Any, edited: Any, findings: list[Finding], note: str = ""
    ) -> None:
        """The write modal, with what other processes hold on the unit's GPUs read first (a
        host that does not say within GPU_CHECK_S gets the modal without it)."""
        from cockpit.sglang.preflight.preflight import WARNING, Finding, settled
        from cockpit.ui.screens.write import WriteModal

        try:
            held = await within(self.session.host_findings(edited), GPU_CHECK_S)
        except (CockpitError, TimeoutError) as e:
            held = [Finding(WARNING, "gpu-held-by-other", [], f"the GPUs of {target.host} could not be read: {e}")]
        if target != self.target:
            return
        modal = WriteModal(
            target.host, target.unit, loaded, edited, settled(findings + held), self.config.host(target.host).sudo
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_attempt(loaded, edited, note)
            elif modal.end_chosen:
                self.confirm_end(target, modal.end_chosen, loaded, edited, findings)

        self.push_screen(modal, confirmed)

    def confirm_end(
        self, target: Target, chosen: list[Holder], loaded: Any, edited: Any, findings: list[Finding]
    ) -> None:
        from cockpit.ui.screens.write import takes_down

        listed = "\n".join(f"PID {h.pid} ({h.name}): {h.holds}; owner: {h.owner}" for h in chosen)
        warnings = "".join(f"\n⚠ {takes_down(h)}." for h in chosen if h.other_unit)
        body = (
            f"{listed}\n{warnings}\n\nSends SIGTERM to each, then SIGKILL to any still there {END_GRACE_S:.0f} s "
            f"later, on {target.host}. Right before each signal the host reads the process's start time and "
            "cgroup again: a PID that is another process's now is not signalled. Then the write modal opens again."
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.end_then_write(target, chosen, loaded, edited, findings)
            else:
                self.open_write(target, loaded, edited, findings)

        title = f"End {len(chosen)} process(es) on {target.host}?"
        self.push_screen(ConfirmModal(title, body, confirm="End"), confirmed)

    @work(exclusive=True, group="write", exit_on_error=False)
    async def end_then_write(
        self, target: Target, chosen: list[Holder], loaded: Any, edited: Any, findings: list[Finding]
    ) -> None:
        try:
            ending = await self.session.end_processes([h.identity for h in chosen if h.identity is not None])
        except CockpitError as e:
            self.notify(str(e), title="ending the processes failed", severity="error", timeout=10)
            return
        if ending.changed:
            pids = " ".join(map(str, ending.changed))
            said = f"not signalled: PID {pids} is no longer the process listed (another start time or cgroup)"
            self.notify(said, severity="error", timeout=10)
        if ending.survived:
            said = f"still there after SIGKILL: {' '.join(map(str, ending.survived))}"
            self.notify(said, severity="error", timeout=10)
        if ending.ended:
            self.notify(f"ended {' '.join(map(str, ending.ended))} on {target.host}", timeout=4)
        self.open_write(target, loaded, edited, findings)

    def on_attempts_pane_rollback(self, event: AttemptsPane.Rollback) -> None:
        target, current = self.target, self.session.unit
        if target is None or current is None:
            return
        if self.changes_refused():
            self.notify(f"{target.host} is read-only here: nothing is rolled back", severity="error")
            return
        if not event.attempt.texts:
            said = f"attempt #{event.attempt.number} wrote nothing (a restart): nothing to roll back to"
            self.notify(said, timeout=4)
            return
        edited = self.session.rollback_of(event.attempt)
        which = "the original" if event.attempt.outcome == ORIGINAL else f"attempt #{event.attempt.number}"
        if edited is None:
            self.notify(f"the unit already is as {which} {'was' if which == 'the original' else 'wrote it'}", timeout=4)
            return
        self.open_rollback(target, current, edited, f"rollback to {which}")

    @work(exclusive=True, group="rollback", exit_on_error=False)
    async def open_rollback(self, target: Target, current: Any, edited: Any, note: str) -> None:
        """The write modal of a rollback, with the pre-flight a write runs (SGLang's dry run
        included): the set it goes back to may be one that crashed."""
        self.notify(f"checking the {note} before anything is written…", timeout=4)
        findings = await self.session.write_findings(edited)
        if target != self.target:
            return
        self.open_write(target, current, edited, findings, note=note)

    @work(exclusive=True, group="attempt", exit_on_error=False)
    async def run_attempt(self, loaded: Any, edited: Any, note: str) -> None:
        target = self.target
        assert target is not None
        self.notify(f"writing {target.unit} on {target.host} and restarting it…", timeout=4)
        attempt = await self.session.apply(loaded, edited, note)
        self.said_attempt(attempt)
        self.query_one(FlagsPane).loaded = None  # the next `e` starts from the unit as now written

    def said_attempt(self, attempt: Attempt) -> None:
        """An attempt's outcome in a notice, and the timeline opened on it."""
        took = f" in {attempt.seconds:.1f} s" if attempt.seconds is not None else ""
        self.notify(
            f"attempt #{attempt.number}{' (' + attempt.note + ')' if attempt.note else ''}: {attempt.outcome}{took}"
            + (f": {attempt.detail}" if attempt.detail else ""),
            severity="information" if attempt.outcome == "ready" else "error",
            timeout=10,
        )
        self.action_attempts()

    # -- throughput and load runs --------------------------------------------------------------

    def action_throughput(self) -> None:
        self.show_detail("throughput")
        self.query_one(ThroughputPane).focus()
        if not self._gpu_started and self.target is not None:
            self._gpu_started = True
            self.sample_gpus()

    @work(group="feeds", exit_on_error=False)
    async def sample_gpus(self) -> None:
        pane = self.query_one(ThroughputPane)
        await self.session.sample_gpus(pane.gpu_samples, lambda n: pane.gpu_notice(n.message))

    def watch_theme(self, theme: str) -> None:
        if self.session.live:
            remember(theme)

    def changes_refused(self) -> bool:
        """Read-only: `--read-only`, or the host's `read_only = true`."""
        return self.session.changes_refused()

    def key_sections(self) -> list[tuple[str, list]]:
        return [
            ("anywhere", list(self.BINDINGS)),
            ("journal", list(JournalView.BINDINGS)),
            ("tracebacks", list(TracebackList.BINDINGS)),
            ("source", list(SourcePane.BINDINGS) + list(SourceView.BINDINGS)),
            ("flags", list(FlagsPane.BINDINGS)),
            ("attempts", list(AttemptsPane.BINDINGS)),
            ("throughput", list(ThroughputPane.BINDINGS)),
            ("stacks", list(StacksScreen.BINDINGS)),
            ("start-up", list(StartupScreen.BINDINGS)),
        ]

    def binding_ids(self) -> set[str]:
        return {b.id for _, bindings in self.key_sections() for b in bindings if isinstance(b, Binding) and b.id}

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.key_sections(), dict(self.config.ui.keys)))

    def get_system_commands(self, screen):
        """The command palette: the cockpit's actions first, then Textual's (theme, quit...)."""
        changing = not self.changes_refused()
        if self.target is not None:
            unit = f"{self.target.unit} on {self.target.host}"
            if changing:
                yield SystemCommand(
                    "Restart", f"restart {unit} (asks first)", lambda: self.action_unit_action("restart")
                )
                yield SystemCommand("Stop", f"stop {unit} (asks first)", lambda: self.action_unit_action("stop"))
                yield SystemCommand("Start", f"start {unit} (asks first)", lambda: self.action_unit_action("start"))
                yield SystemCommand("Write flags", "open the flag editor; w writes", self.action_edit_flags)
                yield SystemCommand("Load run", "start the unit's load profile", self.action_load_run)
                yield SystemCommand(
                    "Experiment",
                    "variants of the unit, each measured against SLOs (a TOML file)",
                    self.action_experiment,
                )
            yield SystemCommand("Pre-flight", "check the unit's flags now", self.action_preflight)
            yield SystemCommand("Compare runs", "two saved load runs side by side", self.on_throughput_pane_compare)
            yield SystemCommand("Attempts", "the attempt timeline", self.action_attempts)
            yield SystemCommand("Start-up", "the start-up timeline: each phase, rank by rank", self.action_startup)
            yield SystemCommand(
                "Stacks", "every process's Python stack now (py-spy): where a hang waits", self.action_stacks
            )
            yield SystemCommand(
                "Snapshot", "save the screen (SVG, PNG, text) and an incident note", self.action_snapshot
            )
        yield SystemCommand("Switch host or unit", "the unit picker", self.action_pick)
        yield SystemCommand("Fleet", "every host and deployment, worst first", self.action_fleet)
        yield SystemCommand("Keys", "every key, and its id for [ui.keys]", self.action_help)
        # Textual's own "Keys" (its key panel) and "Screenshot" (an SVG alone) would stand beside the
        # cockpit's Keys and Snapshot under the same or a nearer name: one of each is offered.
        yield from (c for c in super().get_system_commands(screen) if c.title not in ("Keys", "Screenshot"))

    def action_preflight(self) -> None:
        self.action_edit_flags()

    def action_startup(self) -> None:
        """The start-up timeline of the running start, phase by phase and rank by rank."""
        target = self.target
        found = self.session.timeline()
        if target is None or found is None:
            self.notify("no start of the unit is in the journal window yet", timeout=5)
            return
        self.push_screen(StartupScreen(target.unit, found.timeline, found.last))

    @work(exclusive=True, group="stacks", exit_on_error=False)
    async def action_stacks(self) -> None:
        """Where every process of the unit is (py-spy on the host), one folded row per rank; kept
        by the session for the incident note. As root on a read-only host only once asked."""
        from cockpit.systemd.stacks import RootPtraceRefused

        target = self.target
        if target is None:
            return
        self.notify(f"dumping the stacks of {target.unit}'s processes (py-spy)…", timeout=3)
        try:
            try:
                capture = await self.session.stacks()
            except RootPtraceRefused as e:
                asked = ConfirmModal(f"py-spy as root on {target.host}?", f"{e}.\n\nRun it anyway?", confirm="Run")
                if not await self.push_screen_wait(asked):
                    return
                capture = await self.session.stacks(root_ptrace=True)
        except CockpitError as e:
            self.notify(f"stacks: {e}", severity="error", timeout=15)
            return

        def opened(frame: tuple[Traceback, int] | None) -> None:
            if frame is not None:
                self.open_frame(*frame)

        self.push_screen(StacksScreen(capture, target.unit), opened)

    @work(exclusive=True, group="snapshot", exit_on_error=False)
    async def action_snapshot(self) -> None:
        from cockpit.ui.screenshot import write_incident

        try:
            folder = await write_incident(self, self.session)
        except (OSError, CockpitError) as e:
            self.notify(f"snapshot failed: {e}", severity="error", timeout=10)
            return
        self.notify(f"saved the screen (SVG, PNG, text) and incident.md in {folder}", timeout=10)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("unit_action", "load_run"):
            return self.target is not None and not self.changes_refused()
        if action == "cancel_run":
            return self._load_running()
        return True

    def _load_running(self) -> bool:
        return any(w.name == "load_run_worker" and w.is_running for w in self.workers)

    def on_throughput_pane_start(self) -> None:
        self.action_load_run()

    def on_throughput_pane_cancel(self) -> None:
        self.action_cancel_run()

    def action_load_run(self) -> None:
        if self.target is None:
            return
        if self.changes_refused():
            self.notify(f"{self.target.host} is read-only here: no load is sent", severity="error")
            return
        if self._load_running():
            self.notify("a load run is going: B cancels it", severity="warning")
            return
        target = self.target
        profile = self.config.profile(target.profile)
        body = (
            f"Profile {profile.name}: concurrency {', '.join(map(str, profile.concurrency))}, {profile.requests} "
            f"requests a level after {profile.warmup} warm-up, {profile.input_len} tokens in, {profile.output_len} out "
            "(ignore_eos: every request runs to its length).\n\nThe load competes with whatever else the server "
            "is answering on the host; B cancels it at any time, with no request left running."
        )

        def confirmed(yes: bool | None) -> None:
            if yes and self.target == target and not self._load_running():
                self.action_throughput()
                self.load_run_worker()

        title = f"Send a load run to {target.unit} on {target.host}?"
        self.push_screen(ConfirmModal(title, body, confirm="Run", danger=False), confirmed)

    def action_cancel_run(self) -> None:
        self.workers.cancel_group(self, "load")  # load_run_worker's group, and only its

    def action_experiment(self) -> None:
        """The experiment screen: its run goes on when the screen is closed (a session task)."""
        if self.target is None:
            return
        if self.session.experiment is None and self.changes_refused():
            self.notify(f"{self.target.host} is read-only here: no experiment is run", severity="error")
            return
        from cockpit.ui.screens.experiment import ExperimentScreen

        built = self.session.built_plan()
        self.push_screen(ExperimentScreen(self.session, str(built) if built is not None else "experiment.toml"))

    @work(exclusive=True, group="load", exit_on_error=False)
    async def load_run_worker(self) -> None:
        pane = self.query_one(ThroughputPane)
        done: list[LevelResult] = []

        def level_done(level: LevelResult) -> None:
            done.append(level)
            pane.level_done(level)

        try:
            levels, path = await self.session.load_run(pane.begin, level_done, pane.request_done)
        except asyncio.CancelledError:
            pane.end(f"cancelled after {len(done)} level(s); no request is left running")
            raise
        except (CockpitError, OSError) as e:
            pane.end(f"load run failed: {e}")
            return
        pane.end(f"done: {len(levels)} levels; saved {path.name} (c compares runs)")

    def on_throughput_pane_compare(self) -> None:
        if self.target is None:
            return
        runs = self.session.saved_runs()
        if len(runs) < 2:
            self.notify("two saved load runs are needed to compare (b starts one)", severity="warning")
            return

        def picked(pair: tuple[SavedRun, SavedRun] | None) -> None:
            if pair is not None:
                a, b = pair
                self.query_one(ThroughputPane).show_comparison(self.session.compare_runs(a.record, b.record))

        self.push_screen(RunPicker(runs), picked)

    # -- the prompt line ---------------------------------------------------------------------

    @on(JournalView.Prompt)
    def show_prompt(self, event: JournalView.Prompt) -> None:
        prompt = self.query_one("#prompt", Input)
        self._prompt_kind = event.kind
        prompt.placeholder = {
            "search": "search the journal (regular expression); Enter to find, n/N next/previous",
            "filter": "filter: err | warn | rank:TP3 | pid:1234 | node:1 | tb | a regular expression (empty: all)",
            "source-search": "search this file (regular expression)",
            "goto": "go to line number",
        }[event.kind]
        prompt.value = ""
        prompt.display = True
        prompt.focus()

    @on(Input.Submitted, "#prompt")
    def prompt_submitted(self, event: Input.Submitted) -> None:
        kind, text = self._prompt_kind, event.value.strip()
        event.input.display = False
        error = None
        if kind in ("search", "filter"):
            view = self.journal_view
            error = view.set_search(text) if kind == "search" else view.set_filter(text)
            view.focus()
        else:
            source = self.query_one(SourcePane).view
            if kind == "goto":
                if text.isdigit():
                    source.goto(int(text))
                else:
                    error = f"{text!r} is not a line number"
            elif text:
                try:
                    source.search = re.compile(text)
                    if not source.find(source.search):
                        error = f"{text!r} is not in this file"
                except re.error as e:
                    error = f"not a regular expression: {e}"
            source.focus()
        if error:
            self.notify(error, severity="warning")

    def on_key(self, event) -> None:
        prompt = self.query_one("#prompt", Input)
        if event.key == "escape" and prompt.display and prompt.has_focus:
            prompt.display = False
            self.journal_view.focus()
            event.stop()

    async def on_unmount(self) -> None:
        await self.session.close()
