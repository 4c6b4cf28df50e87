"""The experiment screen (`E`): an experiment file read and run on the unit, and while it runs
and after, each variant's outcome, knee and goodput, the loads measured so far against the SLOs,
a chart of tok/s against load per variant, and the last things the run said. The run is a task
of the session: closing the screen leaves it running; `B` cancels it and puts the unit back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static
from textual_plotext import PlotextPlot

from cockpit.errors import CockpitError
from cockpit.experiment.answer import answer, knee_words, per_load
from cockpit.printable import printable
from cockpit.ui.screens.confirm import ConfirmModal

if TYPE_CHECKING:
    from cockpit.experiment.plan import Plan
    from cockpit.experiment.run import ExperimentRun
    from cockpit.session import Session

LOG_LINES = 6


class ExperimentScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close", id="experiment.close"),
        Binding("B", "cancel", "Cancel and put back", id="experiment.cancel"),
    ]

    def __init__(self, session: Session, path: str = "experiment.toml") -> None:
        super().__init__()
        self.session = session
        self.path = path

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="experiment-dialog"):
            yield Label("Experiment", classes="dialog-title", id="experiment-title", markup=False)
            yield Input(self.path, placeholder="the experiment's TOML file (docs/experiments.md)", id="experiment-file")
            yield Static(id="experiment-table")
            yield PlotextPlot(id="experiment-chart")
            yield Label("", classes="dialog-body", id="experiment-log", markup=False)

    def on_mount(self) -> None:
        run = self.session.experiment
        if run is not None:  # the last one's file: run again, or edited and run
            self.query_one(Input).value = run.plan.path
        self.query_one(Input).display = run is None or _done(run)
        self.show(run)
        if self.query_one(Input).display:
            self.query_one(Input).focus()

    # -- starting one ---------------------------------------------------------------------------

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        from cockpit.experiment import store
        from cockpit.experiment.plan import read_plan

        target = self.session.target
        if target is None:
            return
        try:
            plan = await asyncio.to_thread(lambda: read_plan(Path(event.value).expanduser()))
            saved = await asyncio.to_thread(store.load, store.record_path(target.host, target.unit, plan.name))
        except CockpitError as e:
            self._log([str(e)])
            return
        resume = saved is not None and saved.get("state") != store.FINISHED

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._start(plan, resume)

        self.app.push_screen(_confirm(plan, target.unit, target.host, resume), confirmed)

    def _start(self, plan: Plan, resume: bool) -> None:
        try:
            run = self.session.start_experiment(plan, resume=resume)
        except CockpitError as e:
            self._log([str(e)])
            return
        self.query_one(Input).display = False
        self.show(run)

    def action_cancel(self) -> None:
        run = self.session.experiment
        if run is None or _done(run):
            self.notify("no experiment is running", timeout=4)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.session.cancel_experiment()

        unit = run.record.get("unit", "the unit")
        body = (
            f"The variant measured now stops where it is, and {unit} gets its files back as the experiment found "
            "them, restarted on them. The record keeps what was measured."
        )
        title = f"Cancel the experiment {run.plan.name}?"
        self.app.push_screen(ConfirmModal(title, body, confirm="Cancel it"), confirmed)

    # -- what it shows --------------------------------------------------------------------------

    def show(self, run: ExperimentRun | None) -> None:
        if run is None:
            self._log(["The experiment's file, and Enter: each variant is checked, written, restarted and measured."])
            return
        record = run.record
        state = "running" if not _done(run) else ("cancelled" if record.get("cancelled") else "done")
        keys = "B cancels, puts the unit back · Esc closes, it goes on" if state == "running" else "Esc closes"
        self.query_one("#experiment-title", Label).update(
            f"Experiment {run.plan.name} on {record.get('unit', '')}: {state} · SLOs {run.plan.slo.words()} · {keys}"
        )
        self.query_one("#experiment-table", Static).update(_table(record))
        self._chart(record)
        said = record.get("answer", {})
        tail = [f"winner: {said.get('winner') or 'none'}: {said['why']}"] if "why" in said else []
        if run.task is not None and run.task.done() and not run.task.cancelled() and run.task.exception():
            tail = [f"the experiment failed: {run.task.exception()}"]
        self._log(run.lines[-LOG_LINES:] + tail)

    def _log(self, lines: list[str]) -> None:
        self.query_one("#experiment-log", Label).update("\n".join(printable(line) for line in lines))

    def _chart(self, record: dict[str, Any]) -> None:
        chart = self.query_one(PlotextPlot)
        plt = chart.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("output tok/s by load")
        for v in record.get("variants", []):
            loads = per_load(v.get("levels", []))
            if loads:
                plt.plot(
                    list(range(1, len(loads) + 1)),
                    [x["output_tokens_per_s"] for x in loads],
                    marker="braille",
                    label=printable(v["name"]),
                )
                plt.xticks(list(range(1, len(loads) + 1)), [x["load"] for x in loads])
        chart.refresh()


def _done(run: ExperimentRun) -> bool:
    return run.task is None or run.task.done()


def _confirm(plan: Plan, unit: str, host: str, resume: bool) -> ConfirmModal:
    work = plan.workload
    loads = [f"c{c}" for c in work.concurrency] + [f"{r:g}/s" for r in work.rates]
    names = ", ".join(v.name for v in plan.variants)
    each = f"for {work.duration_s:g} s" if work.duration_s is not None else f"at {work.requests} requests"
    body = (
        f"{len(plan.variants)} variants ({names}), each pre-flighted, written and restarted on {unit}; then "
        f"{', '.join(loads)} {each} a level, {work.repeats} time(s). The server restarts "
        f"{len(plan.variants) + 1} times and serves the experiment's load meanwhile. At the end the unit is "
        + ("put back as it was found." if plan.end == "restore" else f"left on {plan.end}.")
    )
    if resume:
        body += (
            "\n\nAn unfinished run of it is recorded: this goes on from there, and puts back the text it first kept."
        )
    title = f"{'Resume' if resume else 'Run'} the experiment {plan.name} on {host}?"
    return ConfirmModal(title, body, confirm="Resume" if resume else "Run")


def _table(record: dict[str, Any]) -> Table:
    grid = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("variant", "changes", "outcome", "loads (✓ met the SLOs)", "knee", "goodput"):
        grid.add_column(name, overflow="fold")
    results = record.get("answer", {}).get("variants", {})
    for v in record.get("variants", []):
        loads = per_load(v.get("levels", []))
        got = results.get(v["name"]) or (answer([v], v["name"])["variants"].get(v["name"]) if loads else None)
        knee = knee_words(got["knee"]) if got else "-"
        goodput = f"{got['goodput_rps']:.2f} req/s" if got else "-"
        measured = " ".join(f"{x['load']} {x['output_tokens_per_s']:.0f}{'✓' if x['slo_met'] else '✗'}" for x in loads)
        outcome = v["outcome"] + (f": {v['reason']}" if v.get("reason") else "")
        style = "red" if "crashed" in v["outcome"] else ("yellow" if v["outcome"] == "skipped" else "")
        grid.add_row(
            Text(printable(v["name"])),
            Text(printable(v.get("changes", ""))),
            Text(printable(outcome), style=style),
            Text(measured or "-"),
            Text(knee),
            Text(goodput),
        )
    return grid
