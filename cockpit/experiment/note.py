"""The experiment's note: Markdown for a ticket or a chat, and beside it an SVG of each
variant's tok/s and p95 latencies against load (drawn here: an SVG is text, and a plotting
library would be a dependency of a jump box for one picture)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from cockpit.experiment.answer import knee_words
from cockpit.localfs import write_atomic
from cockpit.statedir import safe_name

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")
_W, _H, _PAD = 420, 260, 48


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def markdown(record: dict[str, Any], svg_name: str | None) -> str:
    said = record.get("answer", {})
    plan = record.get("plan", {})
    slo = plan.get("slo", {})
    lines = [
        f"# Experiment {record['experiment']} on {record['host']} {record['unit']}",
        "",
        f"SGLang {record.get('release') or '(release unknown)'}; SLOs: "
        + ", ".join(f"{k} {v:g}" for k, v in slo.items() if v is not None),
        "",
        f"**Winner: {said.get('winner') or 'none'}.** {said.get('why', '')}",
        "",
    ]
    if svg_name:
        lines += [f"![tok/s and p95 latency against load]({svg_name})", ""]
    lines += ["| variant | changes | outcome | knee | goodput |", "|---|---|---|---|---|"]
    results = said.get("variants", {})
    for v in record["variants"]:
        got = results.get(v["name"])
        knee = knee_words(got["knee"]) if got else "-"
        goodput = f"{got['goodput_rps']:.2f} req/s at {got['goodput_at']}" if got else "-"
        outcome = v["outcome"] + (f": {v['reason']}" if v.get("reason") else "")
        lines.append(f"| {_cell(v['name'])} | {_cell(v['changes'])} | {_cell(outcome)} | {knee} | {goodput} |")
    for name, got in results.items():
        lines += ["", f"## {_cell(name)}", "", "| load | tok/s | goodput req/s | TTFT p95 ms | ITL p95 ms | E2E p95 ms "
                  "| SLOs |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for x in got["loads"]:
            spread = f" ±{x['tokens_spread'] / 2:.0%}" if x["tokens_spread"] is not None else ""
            met = "met" if x["slo_met"] else "missed: " + "; ".join(x["missed"])
            lines.append(
                f"| {x['load']} | {x['output_tokens_per_s']:.1f}{spread} | {x['goodput_rps']:.2f} | "
                f"{_ms(x['ttft_p95_ms'])} | {_ms(x['itl_p95_ms'])} | {_ms(x['e2e_p95_ms'])} | {_cell(met)} |"
            )
        for s in got["speedup"]:
            lines.append(f"- {s['load']}: {s['speedup']:.2f}x {said.get('base')} ({s['said']})")
    for v in record["variants"]:
        tb = v.get("traceback")
        if tb:
            lines += ["", f"## {_cell(v['name'])}: {v['outcome']}", "", "```", *tb.get("lines", [])[-30:], "```"]
    end = record.get("end", {})
    lines += ["", f"At the end the unit was left on {end.get('left_on')}"
              + ("." if end.get("unit_as_asked") else ": NOT as asked; read the unit.")]  # fmt: skip
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text from a host in a Markdown table cell: no `|`, no line breaks, no control characters."""
    return "".join(c if c.isprintable() else " " for c in text).replace("|", "\\|")


def svg(record: dict[str, Any]) -> str | None:
    """Two panels: output tok/s, and p95 ITL, against the loads measured (evenly spaced)."""
    results = record.get("answer", {}).get("variants", {})
    loads: list[str] = []
    for got in results.values():
        for x in got["loads"]:
            if x["load"] not in loads:
                loads.append(x["load"])
    if not loads:
        return None
    panels = [("output tok/s", "output_tokens_per_s"), ("ITL p95 (ms)", "itl_p95_ms")]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W * 2}" height="{_H + 30}" font-family="sans-serif" '
             'font-size="11"><rect width="100%" height="100%" fill="white"/>']  # fmt: skip
    for k, (title, key) in enumerate(panels):
        x0 = k * _W
        values = [x[key] for got in results.values() for x in got["loads"] if x[key] is not None]
        top = max(values, default=1.0) * 1.1 or 1.0

        def at(i: int, v: float, x0: int = x0, top: float = top) -> tuple[float, float]:
            span = max(1, len(loads) - 1)
            return x0 + _PAD + i * (_W - 2 * _PAD) / span, _H - _PAD + 20 - v / top * (_H - 2 * _PAD)

        parts.append(f'<text x="{x0 + _W / 2}" y="16" text-anchor="middle">{title}</text>')
        parts.append(
            f'<line x1="{x0 + _PAD}" y1="{_H - _PAD + 20}" x2="{x0 + _W - _PAD}" y2="{_H - _PAD + 20}" stroke="black"/>'
        )
        parts.append(f'<line x1="{x0 + _PAD}" y1="{_PAD - 20}" x2="{x0 + _PAD}" y2="{_H - _PAD + 20}" stroke="black"/>')
        parts.append(f'<text x="{x0 + _PAD - 4}" y="{_PAD - 16}" text-anchor="end">{top:.0f}</text>')
        for i, name in enumerate(loads):
            x, _ = at(i, 0)
            parts.append(f'<text x="{x}" y="{_H - _PAD + 34}" text-anchor="middle">{html.escape(name)}</text>')
        for n, (variant, got) in enumerate(results.items()):
            colour = _COLOURS[n % len(_COLOURS)]
            points = [at(loads.index(x["load"]), x[key]) for x in got["loads"] if x[key] is not None]
            if points:
                path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
                parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
            if k == 0:
                parts.append(f'<text x="{_PAD + 8}" y="{_PAD + n * 14}" fill="{colour}">{html.escape(variant)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_note(record: dict[str, Any], directory: Path) -> Path:
    """`<experiment>.md` and `<experiment>.svg` in `directory`; the Markdown's path."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = safe_name(record["experiment"])
    picture = svg(record)
    if picture is not None:
        write_atomic(directory / f"{stem}.svg", picture.encode())
    path = directory / f"{stem}.md"
    write_atomic(path, markdown(record, f"{stem}.svg" if picture is not None else None).encode())
    return path
