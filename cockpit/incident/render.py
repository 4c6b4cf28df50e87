"""The incident note as Markdown, from an `Incident` alone.

Every traceback is written whole, line for line as the journal has it (the folder's
`Traceback.lines`: log prefix, carets and all), in a fenced block whose fence is longer than any
run of backticks inside, so no content can close it early. Nothing is truncated. The note is
read with `cat` and in editors, and most of it is the host's text: every control character in it
is written as its escape (cockpit.printable), here, once, for the whole note.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Sequence
from typing import Any

from cockpit.attempts import UNSET
from cockpit.fmt import count
from cockpit.incident.model import Incident
from cockpit.printable import printable
from cockpit.sglang.server.startup import facts, headline, table
from cockpit.traceback import Traceback
from cockpit.traceback.groups import group
from cockpit.traceback.stack_dump import headline as stack_headline
from cockpit.traceback.stack_dump import thread_text


def fence_for(text: str, char: str = "`") -> str:
    """A fence longer than every run of `char` in `text` (at least three)."""
    longest = max((len(m) for m in re.findall(re.escape(char) + "+", text)), default=0)
    return char * max(3, longest + 1)


def fenced(text: str, info: str = "") -> str:
    """`text` in a fenced code block that nothing inside can close. `text` is kept as is."""
    fence = fence_for(text)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{fence}{info}\n{body}{fence}\n"


def code(text: str) -> str:
    """Inline code that holds any backticks: a longer delimiter, padded when needed."""
    text = text.replace("\n", " ")
    if not text:
        return "` `"
    ticks = "`" * (max((len(m) for m in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def cell(text: str) -> str:
    """Text for a table cell: one line, pipes escaped."""
    return text.replace("\r", " ").replace("\n", " ").replace("|", "\\|")


def _when(epoch: float | None, with_zone: bool = True) -> str:
    if epoch is None:
        return "-"
    fmt = "%Y-%m-%d %H:%M:%S %Z" if with_zone else "%Y-%m-%d %H:%M:%S"
    return time.strftime(fmt, time.localtime(epoch))


def _clock(epoch: float | None) -> str:
    if epoch is None:
        return "--:--:--"
    local = time.localtime(epoch)
    return time.strftime("%H:%M:%S", local) + f".{int(epoch * 1000) % 1000:03d} " + time.strftime("%Z", local)


def command_lines(argv: Sequence[str]) -> str:
    """The argv as a shell command, one flag (with its values) per line; the program and
    what precedes its first `--flag` (`python -m module`) stay on the first line."""
    groups: list[list[str]] = [[]]
    flags_began = False
    for word in argv:
        flags_began = flags_began or word.startswith("--")
        if (
            flags_began
            and word.startswith("-")
            and len(word) > 1
            and not re.fullmatch(r"-\d[\d.eE+-]*", word)
            and groups[-1]
        ):
            groups.append([])
        groups[-1].append(shlex.quote(word))
    return " \\\n    ".join(" ".join(g) for g in groups if g)


def traceback_text(tb: Traceback) -> str:
    """The traceback's lines, joined as the journal's messages are: nothing added or removed."""
    return "\n".join(tb.lines)


def _stat(level: dict[str, Any], name: str, key: str) -> Any:
    stats = level.get(name)
    return stats.get(key) if isinstance(stats, dict) else None


def _number(value: Any, fmt: str = ".1f") -> str:
    return "-" if not isinstance(value, (int, float)) else format(value, fmt)


# -- rendering ----------------------------------------------------------------------------------


def render(incident: Incident) -> str:
    """The note as Markdown, from plain data."""
    out: list[str] = []
    w = out.append
    w(f"# Incident: {incident.unit} on {incident.host}\n")
    w(
        f"Written {_when(incident.written_at)} by SGLang cockpit. Period: {incident.period}"
        + (f", {_when(incident.period_start)} to {_when(incident.period_end)}" if incident.period_start else "")
        + (f" ({incident.entries} journal entries)." if incident.entries else ".")
    )
    w("")
    w(_summary(incident))
    w("")
    _render_server(incident, w)
    _render_gpus(incident, w)
    _render_startups(incident, w)
    _render_losses(incident, w)
    _render_timeline(incident, w)
    _render_images(incident, w)
    _render_attempts(incident, w)
    _render_tracebacks(incident, w)
    _render_stacks(incident, w)
    _render_source(incident, w)
    _render_load_run(incident, w)
    if incident.problems:
        w("## What this note could not include\n")
        for problem in incident.problems:
            w(f"- {problem}")
        w("")
    return printable("\n".join(out).rstrip("\n") + "\n", lines=True)


def _summary(incident: Incident) -> str:
    tbs = incident.tracebacks
    if not tbs:
        what = "No traceback in the period."
    else:
        kinds: dict[str, list[str]] = {}
        for tb in tbs:
            kinds.setdefault(tb.exception or "an unfinished traceback", []).append(_who(tb))
        parts = [f"{name} ×{len(who)} ({', '.join(sorted(set(who), key=_rank_key))})" for name, who in kinds.items()]
        what = f"{count(len(tbs), 'traceback')} in the period: {'; '.join(parts)}."
    st = incident.status
    if st is not None:
        state = f"Now {st.active_state} ({st.sub_state})"
        if st.ready is not None:
            state += ", ready" if st.ready else ", not serving"
        state += f", {count(st.n_restarts, 'restart')}"
        if st.exit_said != "-":
            state += f", last exit {st.exit_said}"
        what += f" {state}."
    if incident.attempts:
        last = incident.attempts[-1]
        what += f" {count(len(incident.attempts), 'attempt')} recorded; the last, #{last.number}, {last.outcome}."
    return what


def _who(tb: Traceback) -> str:
    return tb.rank or (f"pid {tb.pid}" if tb.pid else "?")


def _rank_key(who: str) -> tuple[int, str]:
    m = re.fullmatch(r"[A-Z]+(\d+)", who)
    return (int(m.group(1)), who) if m else (1 << 30, who)


def _render_server(incident: Incident, w) -> None:
    w("## Server\n")
    w(f"- Host: {code(incident.host)}")
    w(f"- Unit: {code(incident.unit)}")
    version = incident.version or "unknown"
    if incident.version_from:
        version += f" (from {incident.version_from})"
    if incident.standin:
        version += f" · {incident.standin}"
    w(f"- SGLang: {version}")
    st = incident.status
    if st is not None:
        w(
            f"- State: {st.active_state} ({st.sub_state}), result {st.result or '-'}, pid {st.main_pid or '-'}, "
            f"restarts {st.n_restarts}, last exit {st.exit_said}"
        )
        w(f"- Invocation: {code(st.invocation_id or '-')}, started {_when(st.exec_main_start)}")
        if st.fragment_path:
            files = ", ".join(code(p) for p in (st.fragment_path, *st.drop_in_paths))
            w(f"- Unit files: {files}" + (" (changed on disk: daemon-reload needed)" if st.need_daemon_reload else ""))
    w("")
    if incident.command:
        w("The unit's current command line (`ExecStart=`, as systemd runs it):\n")
        w(fenced(command_lines(incident.command), "sh"))


def _render_gpus(incident: Incident, w) -> None:
    if not incident.gpus:
        return
    w("## GPUs\n")
    w("Memory in use when the note was written, and who holds it (⚠: not the unit's running start).\n")
    for line in incident.gpus:
        w(f"- {cell(line)}")
    w("")


def _render_startups(incident: Incident, w) -> None:
    if not incident.startups:
        return
    w("## Start-up\n")
    w(
        "Each start in the period, latest first: every phase from the unit's start, rank by rank, in seconds "
        "(journald's stamps).\n"
    )
    for startup in incident.startups:
        timeline = startup.timeline
        w(f"### {cell(headline(incident.unit, timeline))}\n")
        rows = table(timeline, startup.last)
        if len(rows) > 1:
            w("| " + " | ".join(cell(c) for c in rows[0]) + " |")
            w("|" + "---|" * len(rows[0]))
            for row in rows[1:]:
                w("| " + " | ".join(cell(c) for c in row) + " |")
            w("")
        for fact in facts(timeline):
            w(f"- {cell(fact)}")
        w("")
    w("")


def _render_stacks(incident: Incident, w) -> None:
    capture = incident.stacks
    if capture is None:
        return
    w(f"## Stacks (py-spy dump at {_when(capture.at)})\n")
    w("Where each process of the unit was when they were dumped; every thread, innermost frame last.\n")
    for stack in capture.processes:
        w(f"### {cell(stack_headline(stack))}\n")
        if stack.error:
            w(f"py-spy could not read it: {cell(stack.error)}\n")
            continue
        w(fenced("\n".join(line for thread in stack.threads for line in (*thread_text(stack, thread), "")), "text"))
    w("")


def _render_losses(incident: Incident, w) -> None:
    if not incident.suppressions:
        return
    w("## journald's losses\n")
    for lost in incident.suppressions:
        w(f"- {lost.sentence()}")
    w("")


def _possibly_incomplete(incident: Incident, tb: Traceback) -> bool:
    start = tb.times[0] / 1e6 if tb.times and tb.times[0] else None
    return start is not None and any(lost.covers(start) for lost in incident.suppressions)


def timeline(incident: Incident, gap_s: float = 5.0) -> list[tuple[float, str]]:
    """The period's events in order: the unit's, the tracebacks (a burst of the same exception
    is one event) and the attempts."""
    events = list(incident.events)
    burst: list[Traceback] = []

    def flush() -> None:
        if not burst:
            return
        who = sorted({_who(tb) for tb in burst}, key=_rank_key)
        name = burst[0].exception or "unfinished traceback"
        count = f"{len(burst)} tracebacks" if len(burst) > 1 else "traceback"
        events.append(((burst[0].times[0] or 0) / 1e6, f"{count}: {name} ({', '.join(who)})"))
        burst.clear()

    for tb in incident.tracebacks:
        if not tb.times or not tb.times[0]:
            continue
        if burst and (tb.exception != burst[0].exception or tb.times[0] - (burst[-1].times[0] or 0) > gap_s * 1e6):
            flush()
        burst.append(tb)
    flush()
    for a in incident.attempts:
        events.append(
            (
                a.started_at,
                f"attempt #{a.number} {'writes' if a.texts else 'restarts'} the unit"
                + (f" ({', '.join(n for n, _, _ in a.diff())})" if a.diff() else ""),
            )
        )
        if a.seconds is not None:
            events.append((a.started_at + a.seconds, f"attempt #{a.number}: {a.outcome}"))
    return sorted(events, key=lambda e: e[0])


def _render_timeline(incident: Incident, w) -> None:
    events = timeline(incident)
    if not events:
        return
    w("## Timeline\n")
    w(f"| time ({time.strftime('%Z', time.localtime(events[0][0]))}) | event |")
    w("|---|---|")
    for when, text in events:
        local = time.localtime(when)
        w(f"| {time.strftime('%Y-%m-%d %H:%M:%S', local)}.{int(when * 1000) % 1000:03d} | {cell(text)} |")
    w("")


def _render_images(incident: Incident, w) -> None:
    if not incident.images:
        return
    w("## Screens\n")
    for image in incident.images:
        extras = [f"[SVG]({image.svg})" if image.svg else None, f"[text]({image.text})" if image.text else None]
        links = ", ".join(e for e in extras if e)
        if image.path:
            w(f"![{image.label}]({image.path})\n")
            w(
                f"{image.label}: [PNG]({image.path})"
                + (f", {links}" if links else "")
                + (f" (PNG by {image.converter})" if image.converter else "")
                + "\n"
            )
        else:
            w(f"{image.label}: {links} (no PNG)\n")


def _render_attempts(incident: Incident, w) -> None:
    w("## Attempts\n")
    if not incident.attempts:
        w("No write-and-restart was recorded on this jump box in the period.\n")
        return
    w("| # | started | flags changed | pre-flight | outcome | time | note |")
    w("|---|---|---|---|---|---|---|")
    for a in incident.attempts:
        names = ", ".join(name for name, _, _ in a.diff())
        changed = names or ("(no flag; unit text only)" if a.texts else "-")
        errors = sum(1 for f in a.findings if f.get("severity") == "error")
        warnings = sum(1 for f in a.findings if f.get("severity") == "warning")
        infos = len(a.findings) - errors - warnings
        pre = (
            ", ".join(
                p
                for p in (
                    count(errors, "error") if errors else "",
                    count(warnings, "warning") if warnings else "",
                    f"{infos} info" if infos else "",
                )
                if p
            )
            or "-"
        )
        took = "-" if a.seconds is None else f"{a.seconds:.1f} s" + (" to ready" if a.outcome == "ready" else "")
        w(
            f"| {a.number} | {_when(a.started_at, False)} | {cell(changed)} | {pre} | {cell(a.outcome)} | {took} | "
            f"{cell(a.note or '')} |"
        )
    w("")
    for a in incident.attempts:
        w(f"### Attempt {a.number}: {a.outcome}\n")
        w(
            f"Started {_when(a.started_at)}"
            + (f"; {a.note}" if a.note else "")
            + "."
            + (f" {a.outcome.capitalize()} after {a.seconds:.1f} s." if a.seconds is not None else "")
        )
        if a.detail:
            w("")
            w(fenced(a.detail, "text").rstrip("\n"))
        w("")
        diff = a.diff()
        if diff:
            w("| flag | before | after |")
            w("|---|---|---|")
            for name, before, after in diff:
                w(f"| {cell(code(name))} | {cell(_flag_value(before))} | {cell(_flag_value(after))} |")
            w("")
        elif a.texts:
            w(f"No flag changed; the unit files written: {', '.join(code(p) for p in a.texts)}.\n")
        if a.findings:
            w("Pre-flight findings:\n")
            for f in a.findings:
                flags = ", ".join(code(x) for x in f.get("flags") or [])
                line = (
                    f"- **{f.get('severity', '?')}** {f.get('rule', '')}"
                    + (f" ({flags})" if flags else "")
                    + f": {f.get('message', '')}"
                )
                if f.get("would_raise"):
                    line += f" Would raise {code(str(f['would_raise']))}."
                if f.get("fix"):
                    line += f" Fix: {f['fix']}"
                w(line)
            w("")
        tb = a.traceback
        if isinstance(tb, dict) and tb.get("exception"):
            w(
                f"Crashed with {code(str(tb['exception']) + ': ' + str(tb.get('message', '')))}"
                + (f" on {tb['rank']}" if tb.get("rank") else "")
                + " (in full under Tracebacks).\n"
            )


def _flag_value(value: str | None) -> str:
    if value is None:
        return "(switch on)"
    if value == UNSET:
        return "(unset)"
    return code(value)


def _render_tracebacks(incident: Incident, w) -> None:
    tbs = incident.tracebacks
    kinds = sorted(
        group(((k, tb) for k, tb in reversed(list(enumerate(tbs)))), by_rank=True), key=lambda g: g.first_us or 0
    )
    shown = f"{len(tbs)}" if len(kinds) == len(tbs) else f"{len(tbs)}, {count(len(kinds), 'kind')}"
    w(f"## Tracebacks ({shown})\n")
    if not tbs:
        w("None in the period.\n")
        return
    w(
        "Each in full, line for line as the journal has it; one printed again unchanged (a restart loop) is "
        "given once, with when and where it came back.\n"
    )
    for k, g in enumerate(kinds, 1):
        tb = g.newest
        when = _clock(tb.times[0] / 1e6) if tb.times and tb.times[0] else "--:--:--"
        head = " · ".join(
            x
            for x in (tb.rank, tb.exception or "unfinished", when, f"pid {tb.pid}" if tb.pid is not None else None)
            if x
        )
        lossy = " ⚠ possibly incomplete: journald dropped lines then" if _possibly_incomplete(incident, tb) else ""
        w(f"### {k}. {head}" + (f" (×{g.count})" if g.count > 1 else "") + lossy + "\n")
        facts = []
        frame = tb.failing_frame
        if frame is not None:
            facts.append(
                f"Failing frame: {code(frame.file)}, line {frame.line}"
                + (f", in {code(frame.function)}" if frame.function else "")
            )
        if tb.chained:
            facts.append(f"{count(len(tb.chained), 'earlier exception')} in its chain")
        if tb.truncated:
            facts.append("its start was cut off before the journal received it")
        if tb.exception is None or not tb.complete:
            facts.append("it did not finish printing")
        if facts:
            w("; ".join(facts) + ".\n")
        w(fenced(traceback_text(tb), "text"))
        others = [t for t in reversed(g.members) if t is not tb]  # oldest first
        if others:
            where = ", ".join(
                f"{_clock(t.times[0] / 1e6) if t.times and t.times[0] else '--:--:--'}"
                + (f" (pid {t.pid})" if t.pid is not None else "")
                for t in others
            )
            w(f"And {len(others)} more like it, at {where}.\n")


def _render_source(incident: Incident, w) -> None:
    src = incident.source
    if src is None:
        return
    w("## The failing statement\n")
    where = f"{code(src.path)} on {src.host}, line {src.line}" + (f", in {code(src.function)}" if src.function else "")
    w(
        f"The last traceback's failing frame: {where}. "
        f"`>` marks the line the traceback names, `*` the rest of the statement.\n"
    )
    if src.warning:
        w(f"⚠ {src.warning}\n")
    width = len(str(src.first_line + len(src.lines) - 1))
    rows = []
    for k, text in enumerate(src.lines):
        number = src.first_line + k
        mark = ">" if number == src.line else ("*" if src.start_line <= number <= src.end_line else " ")
        rows.append(f"{mark} {number:>{width}}  {text}")
    w(fenced("\n".join(rows), "text"))
    if src.sentence:
        w(src.sentence + (f" (Values: {src.values_from}.)" if src.values_from else "") + "\n")


def _render_load_run(incident: Incident, w) -> None:
    run = incident.load_run
    if not run:
        return
    levels = [lv for lv in run.get("levels") or [] if isinstance(lv, dict)]
    given = run.get("config")
    config: dict[str, Any] = given if isinstance(given, dict) else {}
    w("## Load run\n")
    facts = [
        f"{config.get('url')}" if config.get("url") else None,
        f"model {config.get('model')}" if config.get("model") else None,
        f"input {config.get('input_len')} words" if config.get("input_len") else None,
        f"output {config.get('output_len')} tokens" if config.get("output_len") else None,
        f"SGLang {run.get('sglang_version')}" if run.get("sglang_version") else None,
        f"started {_when(run['started_at'])}" if isinstance(run.get("started_at"), (int, float)) else None,
    ]
    facts_text = ", ".join(f for f in facts if f)
    if facts_text:
        w(facts_text + ".\n")
    w(
        "| concurrency | requests | errors | output tok/s | tok/s per stream | TTFT p50 ms | TTFT p99 ms | "
        "TPOT mean ms | ITL mean ms | chunk gap mean ms | tokens/chunk | E2E p50 ms |"
    )
    w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for lv in levels:
        w(
            f"| {lv.get('concurrency', '-')} | {lv.get('requests', '-')} | {lv.get('errors', '-')} | "
            f"{_number(lv.get('output_tokens_per_s'))} | {_number(lv.get('output_tokens_per_s_per_stream'))} | "
            f"{_number(_stat(lv, 'ttft_ms', 'p50'))} | {_number(_stat(lv, 'ttft_ms', 'p99'))} | "
            f"{_number(_stat(lv, 'tpot_ms', 'mean'))} | {_number(_stat(lv, 'itl_ms', 'mean'))} | "
            f"{_number(_stat(lv, 'chunk_gap_ms', 'mean'))} | {_number(lv.get('tokens_per_chunk'), '.2f')} | "
            f"{_number(_stat(lv, 'e2e_ms', 'p50'))} |"
        )
    w("")
    if any(lv.get("token_count_source", "usage") != "usage" for lv in levels):
        w("The server sent no usage for some levels: their tokens were counted from chunks (an estimate).\n")


# -- gathering over a host ------------------------------------------------------------------------
