"""The throughput pane: a load run as it happens, GPU telemetry, and the server's own throughput.

Rows of sparklines (one per concurrency level, then TTFT, per-token ITL, each GPU's
utilisation and memory, power, and the decode throughput SGLang logs even when no run is
going), a progress bar with the sweep's time left (cockpit.load.eta), and one plotext chart of output
tok/s against concurrency, redrawn only when a level ends or a comparison opens (a plot costs
about 30 ms, too much to pay per request).
"""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Label, ProgressBar, Sparkline, Static

from cockpit.fmt import duration
from cockpit.load.eta import sweep_left_s

if TYPE_CHECKING:
    from textual_plotext import PlotextPlot

    from cockpit.load.gpu import GpuSample
    from cockpit.load.passive import ThroughputPoint
    from cockpit.load.results import LevelResult, RequestResult
    from cockpit.load.store import Comparison

WINDOW_S = 2.0  # output tok/s of a level: tokens of the requests that ended in the last 2 s


_SOURCE = {"log": "log", "metrics": "/metrics", "server_info": "/server_info"}


class SparkRow(Horizontal):
    """A label, a sparkline, and the latest value."""

    def __init__(self, name: str, unit: str, **kwargs) -> None:
        super().__init__(classes="spark-row", **kwargs)
        self.row_name, self.unit = name, unit
        self.values: collections.deque[float] = collections.deque(maxlen=240)
        self.shown = ""

    def compose(self) -> ComposeResult:
        yield Label(self.row_name, classes="spark-name")
        yield Sparkline(list(self.values), classes="spark")
        yield Label(self.shown, classes="spark-value")

    def rename(self, name: str) -> None:
        self.row_name = name
        if self.children:
            self.query_one(".spark-name", Label).update(name)

    def push(self, value: float, shown: str | None = None) -> None:
        self.extend([value], shown or f"{value:,.1f} {self.unit}")

    def extend(self, values: list[float], shown: str) -> None:
        """Several values, one redraw: a flood of decode lines arrives in batches."""
        self.values.extend(values)
        self.set_text(shown)

    def set_text(self, shown: str) -> None:
        self.shown = shown
        self._draw()

    def _draw(self) -> None:
        """Only while the row is on screen (its region is empty when the pane is hidden, or not
        composed yet): the values are kept and drawn when it shows. Drawing a hidden row for each
        decode line took half of the app's CPU in a flood."""
        if self.children and self.region.area:
            self.query_one(Sparkline).data = list(self.values)  # no zero padding: sparklines scale min to max
            self.query_one(".spark-value", Label).update(self.shown)

    def on_show(self) -> None:
        self._draw()


class ThroughputPane(Vertical, can_focus=True):
    BINDINGS = [
        Binding("b", "start", "Load run", id="throughput.start"),
        Binding("B", "cancel", "Cancel run", id="throughput.cancel"),
        Binding("c", "compare", "Compare runs", id="throughput.compare"),
        Binding("escape", "close", "Close", id="throughput.close"),
    ]

    class Start(Message):
        pass

    class Cancel(Message):
        pass

    class Compare(Message):
        pass

    class Closed(Message):
        pass

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.levels_done: list[LevelResult] = []
        self.level_rows: dict[int, SparkRow] = {}
        self._ended: dict[int, collections.deque[tuple[float, int]]] = {}
        self._plan: tuple[int, ...] = ()
        self._requests = 0
        self._level_started = 0.0
        self._done_in_level = 0
        self._level_now = 0  # the running level's concurrency
        self._request_times: list[float] = []  # its finished requests' seconds, for the time left
        self._compare: Comparison | None = None
        self._chart: PlotextPlot | None = None  # mounted when the pane first shows (`on_show`)
        self.clock = time.monotonic  # recorded runs replay with their own clock

    def compose(self) -> ComposeResult:
        yield Label("no load run yet: b starts the unit's load profile", id="run-head", markup=False)
        yield ProgressBar(id="run-progress", show_eta=False)  # the sweep's own estimate is in the head
        with Horizontal(id="throughput-body"):
            with VerticalScroll(id="spark-rows"):
                yield Vertical(id="level-rows")
                yield SparkRow("TTFT", "ms", id="row-ttft")
                yield SparkRow("ITL/token", "ms", id="row-itl")
                self._passive_row = SparkRow("server (log)", "tok/s", id="row-passive")
                yield self._passive_row
                # its other figures on a line of their own, wrapped: in the row's value they were cut
                # (`… accept`) at any width the pane leaves it
                yield Label("", id="passive-words", classes="spark-note", markup=False)
                yield Vertical(id="gpu-rows")
            yield Vertical(id="chart")
        yield Static("", id="compare-table")

    def on_mount(self) -> None:
        self.query_one("#run-progress").display = False
        self.query_one("#compare-table").display = False

    def on_show(self) -> None:
        """The chart's plot, mounted the first time the pane shows: textual_plotext and plotext
        (an eighth of the app's imports) and a first plot are no part of the app's first screen,
        where the pane is hidden."""
        if self._chart is None:
            from textual_plotext import PlotextPlot

            self._chart = PlotextPlot()
            self.query_one("#chart", Vertical).mount(self._chart)
            self._draw_chart()

    # -- a run ------------------------------------------------------------------------------

    def begin(self, plan: tuple[int, ...], requests: int, what: str) -> None:
        self.levels_done = []
        self._plan, self._requests = plan, requests
        holder = self.query_one("#level-rows", Vertical)
        holder.remove_children()
        self.level_rows = {c: SparkRow(f"c={c}", "tok/s") for c in plan}
        holder.mount_all(self.level_rows.values())
        self._ended = {c: collections.deque() for c in plan}
        self.query_one("#run-head", Label).update(f"load run: {what}")
        bar = self.query_one("#run-progress", ProgressBar)
        bar.display = True
        bar.update(total=requests * len(plan), progress=0)
        self._start_level(plan[0])

    def _start_level(self, concurrency: int) -> None:
        self._level_started = self.clock()
        self._done_in_level = 0
        self._level_now, self._request_times = concurrency, []
        self._say_level()

    def _say_level(self) -> None:
        """`level 2/6 · concurrency 2 · 64 requests · about 25s left` (cockpit.load.eta)."""
        concurrency = self._level_now
        index = self._plan.index(concurrency) + 1
        times = self._request_times
        left = sweep_left_s(
            self._plan, concurrency, self._requests, self._done_in_level, sum(times) / len(times) if times else None
        )
        self.query_one("#run-head", Label).update(
            f"level {index}/{len(self._plan)} · concurrency {concurrency} · {self._requests} requests"
            + (f" · about {duration(left)} left" if left is not None else "")
        )

    def request_done(self, concurrency: int, result: RequestResult) -> None:
        self.query_one("#run-progress", ProgressBar).advance(1)
        self._done_in_level += 1
        if result.ok and result.e2e_s is not None and concurrency == self._level_now:
            self._request_times.append(result.e2e_s)
        self._say_level()
        if not result.ok:
            return
        now = self.clock()
        ended = self._ended.setdefault(concurrency, collections.deque())
        ended.append((now, result.output_tokens))
        while ended and ended[0][0] < now - WINDOW_S:
            ended.popleft()
        span = min(WINDOW_S, max(now - self._level_started, 1e-3))
        row = self.level_rows.get(concurrency)
        if row is not None:
            row.push(sum(n for _, n in ended) / span)
        if result.ttft_s is not None:
            self.query_one("#row-ttft", SparkRow).push(result.ttft_s * 1000)
        itl = result.per_token_itl_s()
        if itl:
            self.query_one("#row-itl", SparkRow).push(sum(itl) / len(itl) * 1000)

    def level_done(self, level: LevelResult) -> None:
        self.levels_done.append(level)
        row = self.level_rows.get(level.concurrency)
        if row is not None:
            row.set_text(
                f"{level.output_tokens_per_s:,.0f} tok/s · {level.output_tokens_per_s_per_stream or 0:,.1f}/stream"
                + (f" · {level.errors} err" if level.errors else "")
            )
        rest = [c for c in self._plan if c not in {lv.concurrency for lv in self.levels_done}]
        if rest:
            self._start_level(rest[0])
        self._draw_chart()

    def end(self, message: str) -> None:
        self.query_one("#run-head", Label).update(message)
        self.query_one("#run-progress").display = False

    # -- telemetry ----------------------------------------------------------------------------

    def gpu_samples(self, samples: list[GpuSample]) -> None:
        holder = self.query_one("#gpu-rows", Vertical)
        for s in samples:
            util_id, mem_id = f"gpu{s.index}-util", f"gpu{s.index}-mem"
            if not holder.query(f"#{util_id}"):
                holder.mount(
                    SparkRow(f"GPU{s.index} util", "%", id=util_id), SparkRow(f"GPU{s.index} mem", "GiB", id=mem_id)
                )
                continue
            if s.util_pct is not None:
                holder.query_one(f"#{util_id}", SparkRow).push(
                    s.util_pct, f"{s.util_pct:.0f} %" + (f" · {s.power_w:.0f} W" if s.power_w else "")
                )
            if s.mem_used_mib is not None:
                total = f" / {s.mem_total_mib / 1024:.0f}" if s.mem_total_mib else ""
                holder.query_one(f"#{mem_id}", SparkRow).push(
                    s.mem_used_mib / 1024, f"{s.mem_used_mib / 1024:.1f}{total} GiB"
                )

    def gpu_notice(self, message: str) -> None:
        holder = self.query_one("#gpu-rows", Vertical)
        holder.remove_children()
        holder.mount(Label(message, classes="spark-note", markup=False))

    def passive(self, points: list[ThroughputPoint]) -> None:
        """The server's own figures (a batch of decode lines, or a poll); the last is shown, with
        the source it came from on the row's name."""
        if not points:
            return
        last = points[-1]
        name = f"server ({_SOURCE[last.source]})"
        if name != self._passive_row.row_name:
            self._passive_row.rename(name)
        rate, _, rest = last.words().partition(" · ")
        self._passive_row.extend([p.gen_throughput for p in points], rate)
        self._show_words(rest)

    def _show_words(self, words: str) -> None:
        """The figures under the server's row, repainted, and laid out only when they take
        another number of lines: a Label's update lays out the whole screen, and a flood's every
        batch brought one (331 layouts in 10 s at 10k lines/s, the most of any widget)."""
        label = self.query_one("#passive-words", Label)
        if str(label.content) == words:
            return
        label.update(words, layout=False)
        label.clear_cached_dimensions()
        size = label.content_size
        if size.width and label.get_content_height(label.container_size, self.app.size, size.width) != size.height:
            label.refresh(layout=True)

    # -- the chart and the comparison -----------------------------------------------------------

    def _draw_chart(self) -> None:
        chart = self._chart
        if chart is None:
            return  # drawn when mounted, from what the pane holds by then
        plt = chart.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("output tok/s by concurrency")
        plt.xlabel("concurrency")
        if self._compare is not None:
            shown = self._compare
            for run, name in ((shown.a, "A"), (shown.b, "B")):
                levels = run.record.get("levels", [])
                plt.plot(
                    [lv["concurrency"] for lv in levels],
                    [lv["output_tokens_per_s"] for lv in levels],
                    marker="braille",
                    label=f"{name}: {run.label}",
                )
        elif self.levels_done:
            plt.plot(
                [lv.concurrency for lv in self.levels_done],
                [lv.output_tokens_per_s for lv in self.levels_done],
                marker="braille",
            )
        chart.refresh()

    def show_comparison(self, shown: Comparison) -> None:
        self._compare = shown
        rows = shown.rows
        text = Text()
        text.append(f"A: {shown.a.label}    B: {shown.b.label}\n", "bold")
        text.append(
            f"{'conc':>5} {'A tok/s':>10} {'B tok/s':>10} {'×':>6} {'A /stream':>10} {'B /stream':>10} "
            f"{'×':>6} {'A TTFT':>8} {'B TTFT':>8}\n",
            "dim",
        )
        for r in rows:
            text.append(
                f"{r['concurrency']:>5} {r['a_tok_s']:>10.1f} {r['b_tok_s']:>10.1f} "
                f"{(r['speedup'] or 0):>6.2f} {(r['a_per_stream'] or 0):>10.1f} {(r['b_per_stream'] or 0):>10.1f} "
                f"{(r['per_stream_speedup'] or 0):>6.2f} {(r['a_ttft_p50_ms'] or 0):>8.1f} "
                f"{(r['b_ttft_p50_ms'] or 0):>8.1f}\n"
            )
        table = self.query_one("#compare-table", Static)
        table.update(text)
        table.display = True
        self._draw_chart()

    def action_start(self) -> None:
        self.post_message(self.Start())

    def action_cancel(self) -> None:
        self.post_message(self.Cancel())

    def action_compare(self) -> None:
        self.post_message(self.Compare())

    def action_close(self) -> None:
        self.post_message(self.Closed())
