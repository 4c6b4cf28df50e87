"""The status pane: the unit's state at a glance, how fresh that is, and the connection's trouble.

It only draws what it is given (`show_status`, `show_problem`, `show_connection`); the status
poll feeds it, so snapshot tests can feed it recorded states. What it shows is never older
than it says: a status that has not been renewed for two poll intervals is drawn as the
last known state with its age, readiness is then "unknown", never "ready ✓", and the third
line says why (`connection lost 12 s ago, reconnecting`).
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable

from rich.containers import Lines
from rich.text import Text
from textual.geometry import Region
from textual.reactive import reactive
from textual.widget import Widget

from cockpit.fmt import duration, size
from cockpit.session.feeds import POLL_S
from cockpit.sglang.deployments.nodes_status import BROKEN
from cockpit.sglang.server.health import DEGRADED, DOWN, HUNG, READY, STARTING, Readiness
from cockpit.systemd.gpu_use import GpuUse, by_pid, held_on
from cockpit.systemd.process_facts import Viewpoint
from cockpit.systemd.status import UnitStatus
from cockpit.traceback.groups import CRASH_LOOP_RECENT_S

STALE_AFTER_S = 2 * POLL_S
GROUP_REASON_LINES = 3  # a broken group's reason whole at 120 columns: which node, since when, what to do
_STATE_STYLE = {
    "active": "status-active",
    "reloading": "status-active",
    "activating": "status-starting",
    "deactivating": "status-starting",
    "failed": "status-failed",
    "inactive": "status-inactive",
}
_READINESS_STYLE = {
    STARTING: "status-starting",
    DEGRADED: "status-warn",
    HUNG: "status-failed",
    DOWN: "status-failed",
    BROKEN: "status-failed",
}
_MARK = {STARTING: "…", DEGRADED: "⚠", HUNG: "✗", DOWN: "✗", BROKEN: "✗"}
_VERBS = {"reconnecting": "reconnecting", "error": "cannot connect to", "disconnected": "disconnected from"}
_AFTER_LOSS = {"reconnecting": "reconnecting", "error": "cannot reconnect", "disconnected": "disconnected"}
_TROUBLE = tuple(_VERBS)


class StatusPane(Widget, can_focus=False):
    """State, readiness and identity; PID, uptime, restarts, last exit, resources; trouble."""

    COMPONENT_CLASSES = {
        "status-active",
        "status-starting",
        "status-failed",
        "status-inactive",
        "status-dim",
        "status-warn",
    }

    # Each change is drawn by `_fit`: the rows whose text changed, and a layout (about 14 ms of a
    # frame) only when the number of rows does.
    status: reactive[UnitStatus | None] = reactive(None, always_update=True, repaint=False)
    connection: reactive[tuple[str, str | None]] = reactive(("connecting", None), repaint=False)
    problem: reactive[tuple[str, str] | None] = reactive(None, repaint=False)
    # The crash loop's banner and its last crash (the host's clock, s): drawn while it is true.
    crash_loop: reactive[tuple[str, float] | None] = reactive(None, repaint=False)
    gpus: reactive[GpuUse | None] = reactive(None, repaint=False)
    # An opened deployment: its name, readiness, and each node's status (None: not read).
    group: reactive[tuple[str, Readiness, list[tuple[str, UnitStatus | None]]] | None] = reactive(None, repaint=False)

    def __init__(self, host: str, unit: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.host = host
        self.unit = unit
        self.clock: Callable[[], float] = time.monotonic  # a test may stop time
        # A live poll renews the status every POLL_S; only then can it go stale. A recorded status
        # (a snapshot, a test) is as old as it was recorded, whatever the clock says.
        self.watching = False
        self.received: float | None = None  # self.clock() when `status` arrived
        self._was_stale = False
        self.earlier: frozenset[str] = frozenset()  # the unit's earlier starts (GPU left-overs)
        self.ready_start: float | None = None  # when the last start seen ready began (the host's clock)
        self._fitted: tuple[int, int] | None = None  # (width, lines) of the text at the last layout
        self._rows = Lines()  # the text's rows as `_fit` last drew them

    def on_mount(self) -> None:
        self.set_interval(0.5, self._tick)

    def reset(self, host: str, unit: str) -> None:
        self.host, self.unit, self.status, self.problem, self.received = host, unit, None, None, None
        self.gpus = None
        self.crash_loop, self.ready_start = None, None
        self.group = None
        self.set_class(False, "-group")

    def show_status(self, status: UnitStatus) -> None:
        self.received = self.clock()
        self.problem = None
        if status.readiness == READY:
            self.ready_start = status.exec_main_start or status.active_enter or self.ready_start
        self.status = status

    def show_problem(self, kind: str, sentence: str) -> None:
        """kind "missing": systemd knows no such unit now (its old state is dropped); "error":
        the last poll failed (the old state stays, and turns stale)."""
        if kind == "missing":
            self.status, self.received = None, None
        self.problem = (kind, sentence)

    def show_crash_loop(self, text: str | None, last_crash: float = 0.0) -> None:
        """`crash loop: 11 starts in 2m10s, the same failure ...`, or None; `last_crash`: when
        its newest traceback was logged."""
        self.crash_loop = (text, last_crash) if text else None

    def _loop_banner(self, st: UnitStatus | None, serving: bool) -> str | None:
        """The crash loop's banner while it is true: the unit not serving, its last crash within
        CRASH_LOOP_RECENT_S (re-checked at every draw, not only when a traceback comes), and no
        start since it that got ready (a fixed unit that later hangs or stops is no crash loop)."""
        if self.crash_loop is None or serving:
            return None
        text, last_crash = self.crash_loop
        if time.time() - last_crash >= CRASH_LOOP_RECENT_S:
            return None
        if st is not None and self.ready_start is not None and self.ready_start > last_crash:
            return None
        return text

    def show_gpus(self, use: GpuUse, earlier: frozenset[str] = frozenset()) -> None:
        """The host's GPU table; `earlier`: the invocation IDs of the unit's earlier starts."""
        self.earlier = earlier
        self.gpus = use

    def show_group(self, name: str, readiness: Readiness, nodes: list[tuple[str, UnitStatus | None]]) -> None:
        self.set_class(True, "-group")  # room for a line a node
        self.group = (name, readiness, nodes)

    def _group_lines(self, text: Text) -> None:
        """`deployment k26: broken ✗ …`, then a line a node: rank, unit, host, state, readiness."""
        assert self.group is not None
        name, readiness, nodes = self.group
        word, style = self._readiness(readiness.state)
        text.append("\n")
        text.append(f"deployment {name}: ", "bold")
        text.append(word, style)
        reason_style = style if readiness.state != READY else self._style("status-dim")
        head = len(f"deployment {name}: {word}  ")
        width = max(self.content_size.width, 40)
        if head + len(readiness.reason) <= width:
            text.append(f"  {readiness.reason}", reason_style)
        else:  # the line is no-wrap: a long reason gets lines of its own rather than an ellipsis
            for line in textwrap.wrap(readiness.reason, width - 4, max_lines=GROUP_REASON_LINES, placeholder=" …"):
                text.append(f"\n    {line}", reason_style)
        for rank, (node, st) in enumerate(nodes):
            text.append(f"\n  n{rank} {node:<16}", self._style("status-dim"))
            if st is None:
                text.append("not read", self._style("status-failed"))
                continue
            state_style = self._style(_STATE_STYLE.get(st.active_state, "status-dim"))
            text.append(f"{st.unit} on {st.host}  ")
            text.append(f"{st.active_state} ({st.sub_state})", state_style)
            if st.readiness is not None:
                text.append("  ")
                text.append(*self._readiness(st.readiness))
            text.append(f"  pid {st.main_pid or '-'}", self._style("status-dim"))

    def show_connection(self, state: str, detail: str | None) -> None:
        self.connection = (state, detail)

    def age(self) -> float | None:
        return None if self.received is None else self.clock() - self.received

    def stale(self) -> bool:
        age = self.age()
        return self.watching and age is not None and age > STALE_AFTER_S

    def trouble(self) -> str | None:
        """What is wrong with the data shown, in a few words, or None while it is live."""
        state, detail = self.connection
        age = self.age()
        if self.problem is not None and self.problem[0] == "missing":
            return self.problem[1]
        why = f": {detail}" if detail else ""
        if state in _TROUBLE:
            verb = _VERBS[state]
            if age is None:
                return f"{verb} {self.host}{why}"
            if self.stale():
                return f"connection lost {age:.0f} s ago, {_AFTER_LOSS[state]}{why}"
            return f"{verb} {self.host}{why}"
        if self.stale():
            return f"no answer from {self.host} for {age:.0f} s" + (f": {self.problem[1]}" if self.problem else "")
        return self.problem[1] if self.problem is not None else None

    def _fit(self) -> None:
        """Draw a change: a layout when the number of rows changes, else the rows whose text
        changed. Two statuses come a second (the poll's and readiness's), the GPU table every
        few: each repainted every row, 1.6 ms, 3 to 4 times a second beside a flood's frames,
        where most changed nothing or the uptime's row alone."""
        if not self.is_mounted:
            return
        # A group's reason wraps to the width: the height is known only for a width laid out.
        width = self.content_size.width
        rows = self.render().split("\n")  # the text is no-wrap: a row of the pane each
        fitted = (width, len(rows)) if width else None
        if fitted is None or fitted != self._fitted:
            self._fitted = fitted
            self.refresh(layout=True)
        elif changed := [
            Region(0, y, width, 1) for y, (was, now) in enumerate(zip(self._rows, rows, strict=True)) if was != now
        ]:
            self.refresh(*changed)
        self._rows = rows

    watch_status = watch_connection = watch_problem = watch_crash_loop = watch_gpus = watch_group = _fit

    def _tick(self) -> None:
        stale = self.stale()
        if stale != self._was_stale:
            self._fit()
        if stale or stale != self._was_stale:
            self.refresh()
        self._was_stale = stale

    def _gpu_line(self, text: Text, use: GpuUse, view: Viewpoint) -> None:
        """`gpu 0:85% 1:85% …`, then each process outside the unit's current start (⚠): on a
        host where orphans hold the memory, that is the line to read before a restart."""
        outside = [p for p in use.processes if p.outside(view)]
        marked = {p.gpu for p in outside}
        text.append("gpu", self._style("status-dim"))
        for g in use.gpus:
            share = f" {g.index}:{100 * g.used_mib / g.total_mib:.0f}%" if g.total_mib else f" {g.index}:?"
            text.append(share, self._style("status-warn" if g.index in marked else "status-dim"))
        for pid, rows in by_pid(outside).items():
            held = held_on(rows, lambda mib: size((mib or 0) << 20))
            text.append(f"   ⚠ PID {pid} {held} ({rows[0].owner(view)})", self._style("status-warn"))
        if outside and use.read_at is not None:  # what the warning says was true then
            read = time.strftime("%H:%M:%S", time.localtime(use.read_at))
            text.append(f"  as read {read}", self._style("status-dim"))

    def _style(self, name: str) -> str:
        return str(self.get_component_rich_style(name))

    def render(self) -> Text:
        st = self.status
        stale = self.stale()
        text = Text(no_wrap=True, overflow="ellipsis")
        trouble = self.trouble()
        if st is None:
            missing = self.problem is not None and self.problem[0] == "missing"
            text.append("✗ " if missing else "○ ", self._style("status-failed" if missing else "status-dim"))
            text.append(f"{self.unit} on {self.host}", "bold")
            if missing:
                text.append("  unit not found", self._style("status-failed"))
                trouble = trouble if trouble and not trouble.startswith("unit ") else None
            else:
                text.append("  waiting for the first status…", self._style("status-dim"))
        else:
            style = self._style("status-dim" if stale else _STATE_STYLE.get(st.active_state, "status-dim"))
            text.append("○ " if stale else "● ", style)
            text.append(f"{st.active_state} ({st.sub_state})", style + " bold")
            if stale:
                text.append(f" as of {self.age():.0f} s ago", self._style("status-failed"))
            text.append("   ")
            text.append(st.unit, "bold")
            text.append(f" on {st.host}", self._style("status-dim"))
            text.append("   ")
            if stale:
                text.append("readiness unknown", self._style("status-dim"))
            elif st.readiness is not None:
                text.append(*self._readiness(st.readiness))
            elif st.ready:
                text.append("ready ✓", self._style("status-active"))
            elif st.active_state == "active":
                label = "checking /health…" if st.ready is None else "starting: /health not 200 yet"
                text.append(label, self._style("status-starting"))
            else:
                text.append("not serving", self._style("status-failed"))
            if st.fragment_deleted:
                text.append(
                    f"   unit file{' ' + st.fragment_path if st.fragment_path else ''} deleted: it still "
                    "runs, a restart will fail",
                    self._style("status-failed"),
                )
            elif st.need_daemon_reload:
                text.append("   unit file changed on disk: daemon-reload needed", self._style("status-warn"))
            text.append("\n")
            parts = [
                f"pid {st.main_pid or '-'}",
                f"up {duration(st.uptime(st.checked_at))}",
                f"restarts {st.n_restarts}",
                f"last exit {st.exit_said}",
                *([f"mem {size(st.memory_bytes)}"] if st.memory_bytes is not None else []),
                f"invocation {st.invocation_id[:12] if st.invocation_id else '-'}",
            ]
            text.append(" · ".join(parts), self._style("status-dim"))
            if self.gpus is not None and self.gpus.gpus:
                text.append("\n")
                self._gpu_line(text, self.gpus, Viewpoint(self.unit, st.running_invocation, self.earlier))
        if self.group is not None:
            self._group_lines(text)
        serving = st is not None and (st.readiness == READY if st.readiness is not None else bool(st.ready))
        if trouble:
            text.append("\n")
            text.append(f"✗ {trouble}", self._style("status-failed"))
        elif st is not None and not stale and st.readiness not in (None, READY) and st.readiness_reason:
            text.append("\n")
            line = f"{_MARK[st.readiness]} {st.readiness}: {st.readiness_reason}"
            text.append(line, self._readiness(st.readiness)[1])
        if (loop := self._loop_banner(st, serving)) is not None:
            text.append("\n")
            text.append(f"⟳ {loop}", self._style("status-failed"))
        return text

    def _readiness(self, state: str) -> tuple[str, str]:
        """The first line's word for the assessed readiness, and its style (the reason is the
        pane's last line)."""
        if state == READY:
            return "ready ✓", self._style("status-active")
        return f"{state} {_MARK.get(state, '?')}", self._style(_READINESS_STYLE.get(state, "status-dim"))
