"""The cockpit app: the panes of one unit, and the workers that feed them.

Everything long runs in workers with `exit_on_error=False`: a failed SSH call or a lost host
shows in the status pane and the app keeps running. Panes only draw what they are handed,
so tests can hand them recorded data (`live=False`).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import replace

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import ContentSwitcher, Footer, Input

from cockpit.attempts import AttemptLog
from cockpit.config import Config
from cockpit.fmt import duration
from cockpit.errors import CockpitError
from cockpit.remote.pool import HostPool
from cockpit.remote.source import PACKAGE_DIRS, OutsideRoots, SourceCache, SourceError, staleness
from cockpit.sglang.catalogs import CatalogCache, package_root_of
from cockpit.load.gpu import GpuSampler
from cockpit.load.passive import ThroughputSeries
from cockpit.load.results import LevelResult, RequestResult
from cockpit.load.runner import LoadConfig, Runner, run_record, server_args
from cockpit.load.store import load_runs, save_run
from cockpit.rollout import apply, with_files
from cockpit.sglang.explain import explain
from cockpit.sglang.flags import Catalog
from cockpit.sglang.preflight import given_flags
from cockpit.systemd import journal
from cockpit.systemd.remote_unit import load_remote_unit, service_python
from cockpit.systemd.unit import Unit
from cockpit.systemd.control import UnitControl
from cockpit.feeds import StatusPoll, supervise
from cockpit.systemd.readiness import server_info
from cockpit.systemd.status import fetch, main_exit_of
from cockpit.sglang.endpoint import serving_address
from cockpit.targets import DEFAULT_URL, Target, all_targets
from cockpit.traceback.groups import crash_loop, group
from cockpit.traceback.model import Traceback
from cockpit.ui.panes.attempts import AttemptsPane
from cockpit.ui.panes.flags import FlagsPane
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.source import Shown, SourcePane, SourceView, cached_highlight
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.panes.throughput import ThroughputPane
from cockpit.ui.panes.tracebacks import TracebackList
from cockpit.ui.screens.confirm import ConfirmModal
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.screens.runs import RunPicker
from cockpit.ui.screens.picker import PickerScreen
from cockpit.ui.screens.trust import trust_modal
from cockpit.ui.screens.write import WriteModal
from cockpit.ui.themes import DEFAULT_THEME, discover, remember, remembered

BACKLOG = 2000  # entries shown at first; older ones are paged from journald on demand

_ACTION_TEXT = {
    "restart": ("Restart", "SGLang stops serving now and loads the model again; requests in flight fail."),
    "stop": ("Stop", "SGLang stops serving until you start it again."),
    "start": ("Start", "SGLang starts and loads the model."),
}


class CockpitApp(App[None]):
    CSS_PATH = "cockpit.tcss"
    TITLE = "SGLang cockpit"
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
        Binding("question_mark", "help", "Keys", key_display="?", id="help"),
        Binding("r", "unit_action('restart')", "Restart", id="restart"),
        Binding("x", "unit_action('stop')", "Stop", id="stop"),
        Binding("t", "unit_action('start')", "Start", id="start"),
        Binding("o", "pick", "Units", id="pick"),
        Binding("e", "edit_flags", "Flags", id="flags"),
        Binding("h", "attempts", "Attempts", id="attempts"),
        Binding("m", "throughput", "Throughput", id="throughput"),
        Binding("b", "load_run", "Load run", id="load_run"),
        Binding("B", "cancel_run", "Cancel run", show=False, id="cancel_run"),
        Binding("S", "snapshot", "Snapshot", id="snapshot"),
    ]

    def __init__(self, config: Config, target: Target | None, *, read_only: bool = False, live: bool = True) -> None:
        super().__init__()
        self.config = config
        self.target = target
        self.read_only = read_only
        self.live = live
        self.pool = HostPool(config, trust_prompt=self._ask_trust, on_state=self._host_state)
        self.sources = SourceCache()
        self.roots = PACKAGE_DIRS  # until the unit is read: where a traceback's file may be opened from
        self.catalogs = CatalogCache()
        self._prompt_kind: str | None = None
        self.unit_model: Unit | None = None
        self.catalog: Catalog | None = None
        self.backlog = BACKLOG
        self.passive = ThroughputSeries()
        self._journal_feed = "connecting"
        self._poll: StatusPoll | None = None
        self.address: tuple[str, int] | None = None  # the server's, from the unit's --host/--port
        self._gpu_started = False
        themes, self.theme_problems = discover()
        for theme in themes:
            self.register_theme(theme)
        wanted = remembered() if live else None
        wanted = wanted or config.ui.theme or DEFAULT_THEME
        self.theme = wanted if wanted in self.available_themes else DEFAULT_THEME
        if wanted not in self.available_themes:
            self.theme_problems.append(f"theme {wanted!r} is not installed: using {DEFAULT_THEME}")
        self.set_keymap(config.ui.keys)

    # -- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        host, unit = (self.target.host, self.target.unit) if self.target else ("-", "no unit")
        self._status = StatusPane(host, unit, id="status")
        yield self._status
        with Horizontal(id="main"):
            with Vertical(id="journal-box"):
                self._journal = JournalView(id="journal")
                yield self._journal
                yield Input(id="prompt")
            yield TracebackList(id="tracebacks")
        with ContentSwitcher(id="detail"):
            yield SourcePane(id="source")
            yield FlagsPane(id="flags")
            yield AttemptsPane(id="attempts")
            yield ThroughputPane(id="throughput")
        yield Footer()

    @property
    def status_pane(self) -> StatusPane:
        """Held, not queried: a modal on top (or the app closing) must not make it unreachable
        to the feeds and timers."""
        return self._status

    @property
    def journal_view(self) -> JournalView:
        return self._journal

    def on_mount(self) -> None:
        self.set_interval(0.5, self._check_freshness)
        for problem in self.theme_problems:
            self.notify(problem, severity="warning", timeout=10)
        unknown = sorted(set(self.config.ui.keys) - self.binding_ids())
        if unknown:
            self.notify(f"[ui.keys] names no binding {unknown[0]!r}: see ? for the ids", severity="warning", timeout=10)
        self.query_one("#prompt").display = False
        self.query_one(TracebackList).display = False
        self.query_one("#detail").display = False
        if self.target is not None:
            self.journal_view.set_label(f"journal · {self.target.unit}")
        self.journal_view.focus()
        if not self.live:
            return
        if self.target is None:
            self.action_pick()
        else:
            self._start_feeds()

    def _start_feeds(self) -> None:
        self.workers.cancel_group(self, "feeds")
        assert self.target is not None
        self.sub_title = f"{self.target.unit} @ {self.target.host}"
        self.journal_view.set_label(f"journal · {self.target.unit}")
        self.poll_status()
        self.follow_journal()
        self.load_unit_model()

    # -- feeds ----------------------------------------------------------------------------

    @work(group="feeds", exit_on_error=False)
    async def poll_status(self) -> None:
        """The one status poll, supervised: it never stops while the app shows this unit."""
        target = self.target
        assert target is not None
        pane = self.status_pane
        pane.watching = True
        poll = self._poll = StatusPoll(
            self.pool.get(target.host),
            target.unit,
            target.url_host_port,
            on_status=pane.show_status,
            on_problem=pane.show_problem,
        )
        await supervise(poll.run, lambda detail: pane.show_problem("error", f"the status poll failed: {detail}"))

    @work(group="feeds", exit_on_error=False)
    async def follow_journal(self) -> None:
        """The one journal feed, supervised; it resumes after the last cursor it delivered."""
        target = self.target
        assert target is not None
        follower = journal.JournalFollower(
            self.pool.get(target.host), target.unit, backlog=self.backlog, on_state=self._journal_state
        )
        await supervise(
            lambda: follower.run(self.on_journal_batch), lambda detail: self._journal_state("reconnecting", detail)
        )

    def on_journal_batch(self, entries: list) -> None:
        self.journal_view.append_entries(entries)
        if self._poll is not None:  # systemd's word on how the main process ended outlives the restart
            for entry in entries:
                if entry.pid == 1 and (how := main_exit_of(entry.message)) is not None:
                    self._poll.note_exit(how, entry.realtime_us / 1e6 if entry.realtime_us else None)
        pane = self.query_one(ThroughputPane)
        for entry in entries:
            point = self.passive.add_entry(entry)
            if point is not None:
                pane.passive(point.gen_throughput, point.accept_len)

    def _journal_state(self, state: str, detail: str | None) -> None:
        self._journal_feed = state
        self._check_freshness()

    def _check_freshness(self) -> None:
        """The journal's title says when its lines stopped being live: the follower is
        reconnecting, or the host has answered nothing (status included) for two polls."""
        if not self.live or self.target is None or not self.is_running:
            return
        pane = self.status_pane
        state, _ = pane.connection
        trouble = None
        if self._journal_feed == "connecting":
            trouble = "connecting…"
        elif state in ("reconnecting", "error", "disconnected") or self._journal_feed != "following":
            trouble = "not following (connection lost)"
        elif pane.stale():
            trouble = f"not following (no answer from {self.target.host} for {pane.age():.0f} s)"
        self.journal_view.show_feed(trouble)

    def _host_state(self, host: str, state: str, detail: str | None) -> None:
        if self.target is not None and host == self.target.host and self.is_running:
            self.status_pane.show_connection(state, detail)
            self._check_freshness()

    async def _ask_trust(self, host: str, fingerprint: str) -> bool:
        return bool(await self.push_screen_wait(trust_modal(host, fingerprint)))

    # -- actions --------------------------------------------------------------------------

    def action_unit_action(self, action: str) -> None:
        if self.target is None:
            return
        if self.changes_refused():
            self.notify(f"{self.target.host} is read-only here: nothing was {action}ed", severity="error")
            return
        verb, effect = _ACTION_TEXT[action]
        target = self.target

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_unit_action(action, target)

        self.push_screen(ConfirmModal(f"{verb} {target.unit} on {target.host}?", effect, confirm=verb), confirmed)

    @work(exit_on_error=False)
    async def run_unit_action(self, action: str, target: Target) -> None:
        control = UnitControl(self.pool.get(target.host), self.config.host(target.host), read_only=self.read_only)
        try:
            await control.act(action, target.unit)
        except CockpitError as e:
            self.notify(str(e), title=f"{action} failed", severity="error", timeout=10)
            return
        self.notify(f"{action} of {target.unit} on {target.host} done", timeout=4)

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
        self.push_screen(PickerScreen(self.pool, targets, hosts, known=known), picked)

    def switch_target(self, target: Target) -> None:
        self.target = target
        self.status_pane.reset(target.host, target.unit)
        self._journal_feed = "connecting"
        self.journal_view.clear()
        self.query_one(TracebackList).show([])
        self.query_one("#detail").display = False
        self.unit_model, self.catalog, self.roots, self.address = None, None, PACKAGE_DIRS, None
        self._start_feeds()

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
        self.status_pane.show_crash_loop(
            f"crash loop: {loop.starts} starts in {duration(span)}, the same failure ({loop.newest.exception}) · {stop}"
        )

    def on_journal_view_need_older(self, event: JournalView.NeedOlder) -> None:
        if self.live and self.target is not None:
            self.page_older(event.cursor)

    @work(group="feeds", exit_on_error=False)
    async def page_older(self, cursor: str) -> None:
        assert self.target is not None
        try:
            entries = await journal.older(self.pool.get(self.target.host), self.target.unit, cursor, 2000)
        except CockpitError as e:
            self.journal_view.paging_failed()
            self.notify(f"cannot page the journal back: {e}", severity="warning")
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
        """Open a frame's file from the host: under the service's Python roots only, unless
        the user asked for this file (`O` on the refusal)."""
        pane = self.query_one(SourcePane)
        sites = traceback.sites
        frame = sites[index]
        pane.traceback, pane.frame = traceback, index
        self.show_detail("source")
        what = (
            "the error's location"
            if frame is traceback.location
            else f"frame {index + 1} of {len(traceback.frames)} · {frame.function}"
        )
        pane.set_title(f"{frame.file}:{frame.line} · {what}")
        if self.target is None or frame.line is None:
            return
        host = self.pool.get(self.target.host)
        pane.refused = False
        try:
            source = await self.sources.get(host, frame.file, roots=None if anyway else self.roots)
        except SourceError as e:
            pane.view.show(Shown(host.name, frame.file, 0, 1, 1, 1), "", None)
            pane.refused = isinstance(e, OutsideRoots)
            pane.set_message(f"{e}. Press O to open it anyway." if pane.refused else str(e))
            return
        last = index == len(sites) - 1
        try:
            root = package_root_of(frame.file)
            catalog = await self.catalogs.get(host, root) if root else None
        except CockpitError:
            catalog = None
        try:
            explained = explain(
                source.text,
                frame.file,
                frame.line,
                exception=(traceback.exception or "") if last else "",
                message=traceback.message if last else "",
                catalog=catalog,
            )
            start, end = explained.start_line, explained.end_line
            values = given_flags(self.unit_model.exec(), catalog) if self.unit_model and catalog else None
            message = explained.sentence(values) if last else f"Frame {index + 1}: `{explained.statement.strip()}`"
            pane.flags = explained.flags
        except (SyntaxError, ValueError) as e:
            start = end = frame.line
            message = f"Could not read the statement: {e}"
        started = self.status_pane.status.exec_main_start if self.status_pane.status else None
        crashed = traceback.times[0] / 1e6 if traceback.times and traceback.times[0] else None
        warning = staleness(source, min(t for t in (started, crashed) if t) if (started or crashed) else None)
        key = (source.host, source.path, source.mtime)
        pane.view.show(Shown(*key, frame.line, start, end), source.text, cached_highlight(key))
        pane.set_message(
            (f"⚠ {warning}\n" if warning else "") + f"{traceback.exception}: {traceback.message}\n" + message
            if last
            else message
        )
        pane.view.focus()
        if cached_highlight(key) is None:
            pane.highlight_in_thread(key, source.text, "monokai" if self.current_theme.dark else "friendly")

    # -- the flag editor and attempts --------------------------------------------------------

    @work(group="feeds", exit_on_error=False)
    async def load_unit_model(self) -> None:
        """The unit's files and the release's flag catalog, for the editor and the explanations."""
        target = self.target
        assert target is not None
        host = self.pool.get(target.host)
        try:
            status = await fetch(host, target.unit)
            unit = await load_remote_unit(host, status)
            python = target.python or next(iter(unit.exec()), None)
            facts = await service_python(host, python, unit) if python else None
            root = facts.purelib if facts else None
            if facts is not None:
                self.roots = facts.roots
        except CockpitError as e:
            self.unit_model, self.catalog = None, None
            self.notify(f"cannot load the unit's flags: {e}", severity="warning", timeout=8)
            return
        try:
            catalog = await self.catalogs.get(host, root) if root else None
        except CockpitError as e:  # the unit is still shown and editable, without SGLang's flag list
            catalog = None
            self.notify(
                f"SGLang's flag list could not be read ({e}): the editor checks nothing", severity="warning", timeout=8
            )
        self.unit_model, self.catalog = replace(unit, catalog=catalog), catalog
        if target.url == DEFAULT_URL:  # no url in the config: where the unit's own flags say it listens
            self.address = serving_address((i.name, i.value) for i in unit.flags())
            if self._poll is not None:
                self._poll.url_host_port = self.address

    def action_edit_flags(self, focus: list[str] | None = None) -> None:
        if self.unit_model is None:
            self.notify("the unit file is not loaded yet (or could not be read)", severity="warning")
            return
        pane = self.query_one(FlagsPane)
        if pane.loaded is None or pane.edited is None or not pane.edited.changed():
            pane.load(self.unit_model, self.catalog, focus)
        self.show_detail("flags")
        pane.query_one("#flag-list").focus()

    def on_source_pane_edit(self, event: SourcePane.Edit) -> None:
        self.action_edit_flags(event.flags)

    def action_attempts(self) -> None:
        if self.target is None:
            return
        pane = self.query_one(AttemptsPane)
        pane.show(AttemptLog(self.target.host, self.target.unit).load())
        self.show_detail("attempts")
        pane.focus()

    def on_flags_pane_write(self, event: FlagsPane.Write) -> None:
        target = self.target
        if target is None:
            return
        cfg = self.config.host(target.host)
        if self.changes_refused():
            self.notify(f"{target.host} is read-only here: nothing is written", severity="error")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_attempt(event.loaded, event.edited, "")

        self.push_screen(
            WriteModal(target.host, target.unit, event.loaded, event.edited, event.findings, cfg.sudo), confirmed
        )

    def on_attempts_pane_rollback(self, event: AttemptsPane.Rollback) -> None:
        target, current = self.target, self.unit_model
        if target is None or current is None:
            return
        if self.changes_refused():
            self.notify(f"{target.host} is read-only here: nothing is rolled back", severity="error")
            return
        edited = with_files(current, event.attempt.texts)
        if not edited.changed():
            self.notify(f"the unit already is as attempt #{event.attempt.number} wrote it", timeout=4)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_attempt(current, edited, f"rollback to attempt #{event.attempt.number}")

        self.push_screen(
            WriteModal(target.host, target.unit, current, edited, [], self.config.host(target.host).sudo), confirmed
        )

    @work(exclusive=True, group="attempt", exit_on_error=False)
    async def run_attempt(self, loaded: Unit, edited: Unit, note: str) -> None:
        target = self.target
        assert target is not None
        host = self.pool.get(target.host)
        self.notify(f"writing {target.unit} on {target.host} and restarting it…", timeout=4)
        attempt = await apply(
            host,
            self.config.host(target.host),
            target,
            loaded,
            edited,
            catalog=self.catalog,
            log=AttemptLog(target.host, target.unit),
            note=note,
            read_only=self.read_only,
        )
        severity = "information" if attempt.outcome == "ready" else "error"
        took = f" in {attempt.seconds:.1f} s" if attempt.seconds is not None else ""
        self.notify(
            f"attempt #{attempt.number}: {attempt.outcome}{took}" + (f": {attempt.detail}" if attempt.detail else ""),
            severity=severity,
            timeout=10,
        )
        self.query_one(FlagsPane).loaded = None  # the next `e` starts from the unit as now written
        await self.load_unit_model().wait()
        self.action_attempts()

    # -- throughput and load runs --------------------------------------------------------------

    def action_throughput(self) -> None:
        self.show_detail("throughput")
        self.query_one(ThroughputPane).focus()
        if not self._gpu_started and self.target is not None and self.live:
            self._gpu_started = True
            self.sample_gpus()

    @work(group="feeds", exit_on_error=False)
    async def sample_gpus(self) -> None:
        assert self.target is not None
        pane = self.query_one(ThroughputPane)
        await GpuSampler(self.pool.get(self.target.host)).run(pane.gpu_samples, lambda n: pane.gpu_notice(n.message))

    def watch_theme(self, theme: str) -> None:
        if self.live:
            remember(theme)

    def changes_refused(self) -> bool:
        """Read-only: `--read-only`, or the host's `read_only = true`."""
        return self.read_only or (self.target is not None and self.config.host(self.target.host).read_only)

    def key_sections(self) -> list[tuple[str, list]]:
        return [
            ("anywhere", list(self.BINDINGS)),
            ("journal", list(JournalView.BINDINGS)),
            ("tracebacks", list(TracebackList.BINDINGS)),
            ("source", list(SourcePane.BINDINGS) + list(SourceView.BINDINGS)),
            ("flags", list(FlagsPane.BINDINGS)),
            ("attempts", list(AttemptsPane.BINDINGS)),
            ("throughput", list(ThroughputPane.BINDINGS)),
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
            yield SystemCommand("Pre-flight", "check the unit's flags now", self.action_preflight)
            yield SystemCommand("Compare runs", "two saved load runs side by side", self.on_throughput_pane_compare)
            yield SystemCommand("Attempts", "the attempt timeline", self.action_attempts)
            yield SystemCommand(
                "Snapshot", "save the screen (SVG, PNG, text) and an incident note", self.action_snapshot
            )
        yield SystemCommand("Switch host or unit", "the unit picker", self.action_pick)
        yield SystemCommand("Keys", "every key, and its id for [ui.keys]", self.action_help)
        # Textual's own "Keys" (its key panel) and "Screenshot" (an SVG alone) would stand beside the
        # cockpit's Keys and Snapshot under the same or a nearer name: one of each is offered.
        yield from (c for c in super().get_system_commands(screen) if c.title not in ("Keys", "Screenshot"))

    def action_preflight(self) -> None:
        self.action_edit_flags()

    @work(exclusive=True, group="snapshot", exit_on_error=False)
    async def action_snapshot(self) -> None:
        from cockpit.ui.screenshot import write_incident

        try:
            folder = await write_incident(self)
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
        self.action_throughput()
        self.load_run_worker()

    def action_cancel_run(self) -> None:
        self.workers.cancel_group(self, "load")  # load_run_worker's group, and only its

    @work(exclusive=True, group="load", exit_on_error=False)
    async def load_run_worker(self) -> None:
        target = self.target
        assert target is not None
        profile = self.config.profile(target.profile)
        pane = self.query_one(ThroughputPane)
        host = self.pool.get(target.host)
        addr, port = self.address or target.url_host_port
        pane.begin(
            profile.concurrency,
            profile.requests,
            f"profile {profile.name}: concurrency {','.join(map(str, profile.concurrency))}, "
            f"{profile.requests} requests, {profile.input_len} in / {profile.output_len} out",
        )
        levels: list[LevelResult] = []
        try:
            async with host.forward_port(addr, port) as local:
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

                def on_level(level: LevelResult) -> None:
                    levels.append(level)
                    pane.level_done(level)

                def on_request(concurrency: int, result: RequestResult) -> None:
                    pane.request_done(concurrency, result)

                await Runner(config, on_request=on_request, on_level=on_level).run()
        except asyncio.CancelledError:
            pane.end(f"cancelled after {len(levels)} level(s); no request is left running")
            raise
        except (CockpitError, OSError) as e:
            pane.end(f"load run failed: {e}")
            return
        info = await server_info(host, addr, port) or {}
        record = run_record(
            config,
            levels,
            started_at=started,
            host=target.host,
            unit=target.unit,
            sglang_version=info.get("version"),
            server_args=server_args(info),
            flags=given_flags(self.unit_model.exec(), self.catalog) if self.unit_model and self.catalog else None,
        )
        record["config"]["url"] = target.url
        path = save_run(target.host, target.unit, record)
        pane.end(f"done: {len(levels)} levels; saved {path.name} (c compares runs)")

    def on_throughput_pane_compare(self) -> None:
        if self.target is None:
            return
        runs = load_runs(self.target.host, self.target.unit)
        if len(runs) < 2:
            self.notify("two saved load runs are needed to compare (b starts one)", severity="warning")
            return

        def picked(pair: tuple[dict, dict] | None) -> None:
            if pair is not None:
                self.query_one(ThroughputPane).show_comparison(*pair)

        self.push_screen(RunPicker([r for _, r in runs]), picked)

    # -- the prompt line ---------------------------------------------------------------------

    @on(JournalView.Prompt)
    def show_prompt(self, event: JournalView.Prompt) -> None:
        prompt = self.query_one("#prompt", Input)
        self._prompt_kind = event.kind
        prompt.placeholder = {
            "search": "search the journal (regular expression); Enter to find, n/N next/previous",
            "filter": "filter: err | warn | rank:TP3 | pid:1234 | tb | a regular expression (empty: all)",
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
        await self.pool.close()
