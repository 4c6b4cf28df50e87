"""The status pane: the unit's state at a glance, and the connection's trouble when there is some.

It only draws what it is given (`show_status`, `show_connection`); the app's poller feeds it,
so snapshot tests can feed it recorded states.
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from cockpit.fmt import duration, size
from cockpit.systemd.status import UnitStatus

_STATE_STYLE = {
    "active": "status-active",
    "reloading": "status-active",
    "activating": "status-starting",
    "deactivating": "status-starting",
    "failed": "status-failed",
    "inactive": "status-inactive",
}


class StatusPane(Widget, can_focus=False):
    """Two lines: state, readiness and identity; PID, uptime, restarts, last exit, resources."""

    COMPONENT_CLASSES = {"status-active", "status-starting", "status-failed", "status-inactive", "status-dim",
                         "status-warn"}

    status: reactive[UnitStatus | None] = reactive(None, always_update=True)
    connection: reactive[tuple[str, str | None]] = reactive(("connecting", None))

    def __init__(self, host: str, unit: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.host = host
        self.unit = unit

    def show_status(self, status: UnitStatus) -> None:
        self.status = status

    def show_connection(self, state: str, detail: str | None) -> None:
        self.connection = (state, detail)

    def _style(self, name: str) -> str:
        return str(self.get_component_rich_style(name))

    def render(self) -> Text:
        st = self.status
        text = Text(no_wrap=True, overflow="ellipsis")
        if st is None:
            text.append("○ ", self._style("status-dim"))
            text.append(f"{self.unit} on {self.host}", "bold")
            text.append("  waiting for the first status…", self._style("status-dim"))
        else:
            style = self._style(_STATE_STYLE.get(st.active_state, "status-dim"))
            text.append("● ", style)
            text.append(f"{st.active_state} ({st.sub_state})", style + " bold")
            text.append("   ")
            text.append(st.unit, "bold")
            text.append(f" on {st.host}", self._style("status-dim"))
            text.append("   ")
            if st.ready:
                text.append("ready ✓", self._style("status-active"))
            elif st.active_state == "active":
                text.append("starting: /health not 200 yet", self._style("status-starting"))
            else:
                text.append("not serving", self._style("status-failed"))
            if st.need_daemon_reload:
                text.append("   unit file changed on disk: daemon-reload needed", self._style("status-warn"))
            text.append("\n")
            parts = [
                f"pid {st.main_pid or '-'}",
                f"up {duration(st.uptime(st.checked_at))}",
                f"restarts {st.n_restarts}",
                f"last exit {st.last_exit or '-'}",
                f"mem {size(st.memory_bytes)}",
                f"invocation {st.invocation_id[:12] if st.invocation_id else '-'}",
            ]
            text.append(" · ".join(parts), self._style("status-dim"))
        state, detail = self.connection
        if state not in ("connected", "connecting") or (state == "connecting" and detail):
            text.append("\n")
            label = {"reconnecting": "⟳ reconnecting", "error": "✗ cannot use", "disconnected": "○ disconnected"}
            text.append(f"{label.get(state, state)} {self.host}: {detail or ''}", self._style("status-failed"))
        return text
