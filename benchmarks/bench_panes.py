"""The journal and source panes under load (issues 4 and 5). Prints JSON.

journal: the pane holds a 200,000-line window (full of 8-rank tracebacks and log lines) while
10,000 lines/s arrive in 20 batches a second; `append_render_ms` is the time to fold a batch in
and call `render_line` for every visible row. It is not a frame: it leaves out the app's
handler, Textual's style pass and compositor, the side list and the write to the terminal,
and read 8 to 13 ms while real frames took 60 to 107 ms (issue 14). What a person waits for is
`frame_to_terminal_ms` of `bench_app_flood.py --terminal`. `rows_to_screen_ms`: the view's
rows of one frame, every row new, as the view hands them to the screen and through Textual's
style pass (which it skips), alternating in the same run.

source: opening the failing frame in the lab: the key to the file shown with its statement
marked, for a file already cached (target 500 ms) and for a 400 KB file not yet fetched,
highlighting included (target 2 s).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from _common import emit, lab_up, pct
from textual.geometry import Region

from cockpit.config import Config
from cockpit.systemd.entry import JournalEntry
from cockpit.targets import Target
from cockpit.traceback.fold import fold_lines
from cockpit.traceback.model import Traceback
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.source import SourcePane, SourceView

WINDOW = 200_000
RATE = 10_000
BATCHES_PER_S = 20


def synthetic(n: int, start: int = 0) -> list[JournalEntry]:
    """Decode lines and access lines, with eight interleaved rank tracebacks every 2,000 lines."""
    out = []
    t = 1796031916000000
    i = start
    while len(out) < n:
        if i % 2000 == 0:
            for line in range(6):
                for rank in range(8):
                    text = [
                        f"[2026-11-30 10:00:00 TP{rank}] Scheduler hit an exception: "
                        "Traceback (most recent call last):",
                        '  File "/opt/x/scheduler.py", line 1017, in event_loop_normal',
                        "    result = self.run_batch(batch)",
                        '  File "/opt/x/model_runner.py", line 2210, in forward',
                        "    raise RuntimeError('CUDA error: an illegal memory access was encountered')",
                        "RuntimeError: CUDA error: an illegal memory access was encountered",
                    ][line]
                    out.append(JournalEntry(text, realtime_us=t + i, pid=1000 + rank, invocation_id="inv"))
        elif i % 3:
            out.append(
                JournalEntry(
                    f"[2026-11-30 10:00:00 TP0] Decode batch, #running-req: 32, #token: {i}, "
                    "token usage: 0.13, cuda graph: True, gen throughput (token/s): 4351.94, "
                    "#queue-req: 3",
                    realtime_us=t + i,
                    pid=999,
                    invocation_id="inv",
                )
            )
        else:
            out.append(
                JournalEntry(
                    f'INFO:     127.0.0.1:{40000 + i % 20000} - "POST /v1/completions HTTP/1.1" 200 OK',
                    realtime_us=t + i,
                    pid=999,
                    invocation_id="inv",
                )
            )
        i += 1
    return out[:n]


async def journal_frames() -> dict:
    app = CockpitApp(Config(), Target("bench", "bench.service"), live=False)
    async with app.run_test(size=(160, 50)) as pilot:
        view = app.query_one(JournalView)
        t = time.perf_counter()
        filled = 0
        while filled < WINDOW:
            view.append_entries(synthetic(20_000, filled))
            filled += 20_000
        fill_s = time.perf_counter() - t
        await pilot.pause()
        batch = RATE // BATCHES_PER_S
        frames = []
        region = view.scrollable_content_region
        for k in range(BATCHES_PER_S * 5):  # five seconds of 10,000 lines/s
            entries = synthetic(batch, WINDOW + k * batch)
            t = time.perf_counter()
            view.append_entries(entries)
            for y in range(region.height):  # what a refresh draws
                view.render_line(y)
            frames.append((time.perf_counter() - t) * 1000)
            await asyncio.sleep(1 / BATCHES_PER_S)
        rows = len(view.model.rows)
        records = len(view.model.records)
        to_screen = rows_to_screen(view)
    return {
        "window_lines": WINDOW,
        "records": records,
        "rows": rows,
        "fill_200k_s": round(fill_s, 2),
        "arrival_lines_per_s": RATE,
        "append_render_ms": {
            "p50": round(pct(frames, 50), 2),
            "p95": round(pct(frames, 95), 2),
            "max": round(max(frames), 2),
            "mean": round(statistics.mean(frames), 2),
        },
        "not_a_frame": "see bench_app_flood.py --terminal, frame_to_terminal_ms",
        "rows_to_screen_ms": to_screen,
        "rows_to_screen_measures": (
            "the view's render_lines over all its rows, every row new (scrolled a screen between "
            "calls), as a flood's frame asks for them: `view` as the app draws them, `textual_style_pass` "
            "the same call through Textual's style pass, which the view skips (JournalView.render_lines); "
            "alternating, p50 and p95 of 200 each"
        ),
    }


def rows_to_screen(view: JournalView) -> dict:
    crop = Region(0, 0, *view.outer_size)
    times: dict[str, list[float]] = {"view": [], "textual_style_pass": []}
    bare = view._bare
    for k in range(400):
        way = "view" if k % 2 == 0 else "textual_style_pass"
        view.scroll_to(y=(k * crop.height) % (len(view.model.rows) - crop.height), animate=False, immediate=True)
        view._bare = bare if way == "view" else lambda: False  # type: ignore[method-assign]
        t = time.perf_counter()
        view.render_lines(crop)
        times[way].append((time.perf_counter() - t) * 1000)
    view._bare = bare  # type: ignore[method-assign]
    return {way: {"p50": round(pct(ms, 50), 3), "p95": round(pct(ms, 95), 3)} for way, ms in times.items()}


async def source_open(lab_name: str) -> dict:
    app = CockpitApp(Config(), Target(lab_name, "sglang-demo.service"), live=False)
    big = "/tmp/big_module.py"
    async with app.run_test(size=(160, 50)):
        host = app.session.pool.get(lab_name)
        src = "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/arg_groups/speculative_hook.py"
        await host.run(
            [
                "sh",
                "-c",
                f"cat /opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/server_args.py "
                f"{src} /opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/arg_groups/*.py "
                f"| head -c 409600 | sed '$d' > {big}",
            ]
        )
        size = int((await host.run(["stat", "-c", "%s", big])).text)
        view = app.query_one(SourcePane).query_one(SourceView)

        highlighted = asyncio.Event()
        set_highlighted = view.set_highlighted

        def note_highlighted(lines) -> None:
            set_highlighted(lines)
            highlighted.set()

        view.set_highlighted = note_highlighted

        shown_changed = asyncio.Event()
        show = view.show

        def note_shown(shown, text, lines) -> None:
            show(shown, text, lines)
            shown_changed.set()

        view.show = note_shown

        async def open_and_wait(path: str, line: int) -> tuple[float, float]:
            """Seconds from the request to the file shown at its line, and to its colours."""
            highlighted.clear()
            t = time.perf_counter()
            app.open_frame(_traceback_at(path, line), 0, anyway=True)  # /tmp: outside the roots
            while view.shown is None or view.shown.path != path or view.shown.line != line:
                shown_changed.clear()
                await shown_changed.wait()
            shown = time.perf_counter() - t
            if view.highlighted is None:
                await highlighted.wait()
            return shown, time.perf_counter() - t

        uncached_shown, uncached_colours = await open_and_wait(big, 2000)
        cached = [await open_and_wait(big, 1000 + k) for k in range(5)]
    cached_colours = [c for _, c in cached]
    return {
        "file_bytes": size,
        "uncached_shown_s": round(uncached_shown, 3),
        "uncached_highlighted_s": round(uncached_colours, 3),
        "cached_highlighted_s": {"p50": round(pct(cached_colours, 50), 3), "max": round(max(cached_colours), 3)},
        "targets": {"cached_s": 0.5, "uncached_400kb_s": 2.0},
        "met": uncached_colours < 2.0 and max(cached_colours) < 0.5,
    }


def _traceback_at(path: str, line: int) -> Traceback:
    """A real folded traceback whose one frame is `path:line`."""
    text = f'Traceback (most recent call last):\n  File "{path}", line {line}, in f\nAssertionError\n'
    [tb] = [r for r in fold_lines(text.encode().splitlines()).records if isinstance(r, Traceback)]
    return tb


async def main() -> None:
    result = {"benchmark": "panes", "journal": await journal_frames()}
    if "--no-lab" not in sys.argv:
        lab = lab_up("cockpit-bench")
        try:
            result["source"] = await source_open("cockpit-bench")
        finally:
            lab.down()
    emit(result)


if __name__ == "__main__":
    asyncio.run(main())
