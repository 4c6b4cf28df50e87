"""The write modal: the diff of each unit file, the pre-flight verdict, and what will happen."""

from __future__ import annotations

import difflib
from dataclasses import replace

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Label, SelectionList, Static
from textual.widgets.selection_list import Selection

from cockpit.sglang.preflight.preflight import ERROR, Finding
from cockpit.systemd.group_write import NodeWrite
from cockpit.systemd.process_end import Holder
from cockpit.systemd.unit import Unit
from cockpit.ui.screens.confirm import YesNoModal


def diff_text(loaded: Unit, edited: Unit) -> Text:
    text = Text()
    for path, new in edited.changed().items():
        old = loaded.texts.get(path, "")
        for line in difflib.unified_diff(
            old.splitlines(), new.splitlines(), f"{path} (now)", f"{path} (new)", lineterm="", n=2
        ):
            style = (
                "green"
                if line.startswith("+") and not line.startswith("+++")
                else "red"
                if line.startswith("-") and not line.startswith("---")
                else "cyan"
                if line.startswith("@@")
                else ""
            )
            text.append(line + "\n", style)
    return text


def verdict_text(findings: list[Finding]) -> Text:
    """What the pre-flight expects, as the write modals say it."""
    verdict = Text()
    errors = [f for f in findings if f.severity == ERROR]
    if errors:
        verdict.append("The pre-flight expects the server NOT to start:\n", "red bold")
        for f in errors:
            verdict.append(f"✗ {f.message}\n", "red")
    else:
        verdict.append("✓ The pre-flight found nothing that stops the server.\n", "green")
    return verdict


def write_button(errors: bool, label: str) -> Button:
    """The modal's yes: a warning colour and `Write anyway` when the pre-flight expects a failure."""
    return Button("Write anyway (y)" if errors else label, id="yes", variant="error" if errors else "primary")


class GroupWriteModal(YesNoModal):
    """A deployment's edit: one diff per node, the checks of every node and between them; y
    writes every node or none and restarts the group."""

    def __init__(self, group: str, writes: list[NodeWrite], findings: list[Finding]) -> None:
        super().__init__()
        self.group, self.writes, self.findings = group, writes, findings

    def compose(self) -> ComposeResult:
        errors = any(f.severity == ERROR for f in self.findings)
        with Vertical(classes="dialog", id="write-dialog"):
            title = f"Write deployment {self.group} ({len(self.writes)} nodes) and restart the group?"
            yield Label(title, classes="dialog-title", markup=False)
            with VerticalScroll(id="write-diff"):
                for w in self.writes:
                    yield Label(f"{w.node}: {w.edited.name} on {w.host.name}", classes="dialog-title", markup=False)
                    yield Static(diff_text(w.loaded, w.edited))
            verdict = verdict_text(self.findings)
            for f in self.findings:
                if f.severity != ERROR:
                    verdict.append(f"⚠ {f.node + ': ' if f.node else ''}{f.message}\n", "yellow")
            verdict.append(
                "\nWrites every node in turn by the single-unit contract (a backup, a temp file, an atomic "
                "rename); when one node refuses, the nodes written before it get their old text back and "
                "nothing restarts. Then every node is stopped, checked stopped, started and watched to the "
                "group's ready, one attempt in the deployment's timeline."
            )
            yield Static(verdict, classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield write_button(errors, "Write every node and restart (y)")
                yield Button("Cancel (n)", id="no")


def holders_of(findings: list[Finding]) -> list[Holder]:
    """The processes the findings are about, one per PID (a process on the GPUs and the port is
    one), in PID order."""
    by_pid: dict[int, Holder] = {}
    for f in findings:
        if f.holder is None:
            continue
        seen = by_pid.get(f.holder.pid)
        by_pid[f.holder.pid] = f.holder if seen is None else replace(seen, holds=f"{seen.holds}; {f.holder.holds}")
    return [by_pid[pid] for pid in sorted(by_pid)]


def takes_down(holder: Holder) -> str:
    """What ending the holder does to another unit, in words; empty when it is part of none."""
    if holder.other_unit is None:
        return ""
    return f"ends PID {holder.pid} ({holder.name}) of {holder.other_unit}, a running unit: that unit goes down"


def _choice(holder: Holder) -> Selection[int]:
    line = Text(f"PID {holder.pid} {holder.name} · {holder.holds} · {holder.owner}")
    if holder.identity is None:
        line.append(" · its start or cgroup could not be read here: not offered", "dim")
    default = holder.identity is not None and holder.other_unit is None
    return Selection(line, holder.pid, default, disabled=holder.identity is None)


class WriteModal(YesNoModal):
    """y writes, n cancels. Where processes outside the unit hold what it needs, each is listed
    with a choice (chosen at first: those that are part of no running unit), and k closes the
    modal with `end_chosen` set: the app asks to end them and opens it again."""

    BINDINGS = [Binding("k", "end", "End the chosen holders", id="write.end")]

    def __init__(self, host: str, unit: str, loaded: Unit, edited: Unit, findings: list[Finding], sudo: bool) -> None:
        super().__init__()
        self.host, self.unit, self.loaded, self.edited, self.findings, self.sudo = (
            host,
            unit,
            loaded,
            edited,
            findings,
            sudo,
        )
        self.holders = holders_of(findings)
        self.end_chosen: list[Holder] = []

    def compose(self) -> ComposeResult:
        errors = [f for f in self.findings if f.severity == ERROR]
        files = ", ".join(self.edited.changed())
        how = "sudo -n install to a temp file and sudo -n mv" if self.sudo else "a temp file and an atomic rename"
        with Vertical(classes="dialog", id="write-dialog"):
            yield Label(f"Write {self.unit} on {self.host} and restart it?", classes="dialog-title", markup=False)
            with VerticalScroll(id="write-diff"):
                yield Static(diff_text(self.loaded, self.edited))
            verdict = verdict_text(self.findings)
            verdict.append(
                f"\nWrites {files} by {how}, keeping a backup of what is on disk; runs systemd-analyze "
                f"verify where the host has it, daemon-reload, restarts {self.unit} and watches it until "
                "it is ready or crashes. SGLang stops serving until then.\n"
            )
            verdict.append(
                "The file is compared with the text you loaded right before it is replaced, and the write "
                "is refused if someone changed it; systemd has no lock, so this check is best-effort.",
                "dim",
            )
            yield Static(verdict, classes="dialog-body")
            held = [f for f in self.findings if f.pid is not None and f.severity != ERROR]
            if held:
                notes = Text()
                for f in held:
                    notes.append(f"⚠ {f.message}\n", "yellow")
                yield Static(notes, classes="dialog-body")
            if self.holders:
                yield Label("End which? (space chooses, k ends the chosen)", markup=False)
                yield SelectionList[int](*map(_choice, self.holders), id="holders")
                # what is chosen at first is part of no running unit: nothing to warn of yet
                yield Static("", id="holders-warning", classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield write_button(bool(errors), "Write and restart (y)")
                if self.holders:
                    yield Button("End the chosen (k)", id="end", variant="warning")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        if self.holders:
            self.query_one("#holders", SelectionList).focus()  # space chooses; Enter never writes
        else:
            super().on_mount()

    def chosen(self) -> list[Holder]:
        picked = set(self.query_one("#holders", SelectionList).selected) if self.holders else set()
        return [h for h in self.holders if h.pid in picked]

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        said = "".join(f"⚠ {takes_down(h)}.\n" for h in self.chosen() if h.other_unit)
        self.query_one("#holders-warning", Static).update(Text(said, "red"))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "end":
            self.action_end()
        else:
            super().on_button_pressed(event)

    def action_end(self) -> None:
        if not self.holders:
            return
        chosen = self.chosen()
        if not chosen:
            self.notify("nothing is chosen: space chooses a process in the list", severity="warning")
            return
        self.end_chosen = chosen
        self.dismiss(False)
