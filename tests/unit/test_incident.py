"""The incident note: Markdown from recorded lab journals (every traceback in full, checked with a
CommonMark parser against the journal's own messages), the attempts and load-run tables, the
screenshots' font. The files written from the app: tests/ui/test_incident_screens.py; in the lab,
after the stand-in's eight workers crashed: tests/lab/test_incident_lab.py."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from cockpit.attempts import AttemptLog
from cockpit.incident import Incident, attempts_in, excerpt_of, render, tracebacks_in, unit_events
from cockpit.incident.render import code, command_lines, fence_for, timeline
from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.preflight.preflight import Finding
from cockpit.systemd.entry import JournalEntry, parse_json_line
from cockpit.systemd.unit import load_unit
from cockpit.ui.png import monospace, preserve_spaces
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data"
UNITS = DATA / "units"


# --- an independent reading of the journal: what each traceback is, from the raw JSON ---------


def message_of(fields: dict) -> str:
    value = fields.get("MESSAGE")
    if isinstance(value, list):
        return bytes(value).decode("utf-8", "replace")
    return value or ""


def journal_tracebacks(objects: list[dict]) -> list[list[str]]:
    """Each traceback as the journal's messages of its process, from its header line to its
    exception line, in the order they began (simple tracebacks only: no chains, no groups)."""
    found: list[tuple[int, list[str]]] = []
    open_: dict[str, list[str]] = {}
    for fields in objects:
        pid, text = fields.get("_PID"), message_of(fields)
        if pid in open_:
            open_[pid].append(text)
            if not text.startswith("  "):
                del open_[pid]  # the exception line ends it
        elif text.endswith("Traceback (most recent call last):"):
            lines = [text]
            found.append((int(fields["__REALTIME_TIMESTAMP"]), lines))
            open_[pid] = lines
    return [lines for _, lines in sorted(found, key=lambda f: f[0])]


def fences(markdown: str, info: str = "text") -> list[str]:
    """The contents of the note's fenced blocks with that info string, as CommonMark reads them."""
    return [t.content for t in MarkdownIt("commonmark").parse(markdown) if t.type == "fence" and t.info == info]


def section(markdown: str, title: str) -> str:
    start = markdown.index(f"\n## {title}")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end > 0 else None]


def crash8() -> tuple[list[dict], list[JournalEntry]]:
    lines = (DATA / "journal-crash8.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines], [parse_json_line(line) for line in lines]


# --- the note from recorded data -------------------------------------------------------------------


def test_each_of_the_eight_tracebacks_is_in_the_note_in_full_as_the_journal_has_it() -> None:
    objects, entries = crash8()
    expected = journal_tracebacks(objects)
    assert len(expected) == 8 and all(len(lines) == 10 for lines in expected)
    note = render(
        Incident("cockpit-lab", "sglang-demo.service", tracebacks=tracebacks_in(entries), events=unit_events(entries))
    )
    blocks = fences(section(note, "Tracebacks"))
    assert blocks == ["\n".join(lines) + "\n" for lines in expected]
    longest = max((line for lines in expected for line in lines), key=len)
    assert len(longest) > 130 and longest in note and "…" not in section(note, "Tracebacks")  # never cut
    ranks = re.findall(r"^### \d+\. (TP\d) · StandinCudaError", note, re.M)
    assert sorted(ranks) == [f"TP{k}" for k in range(8)]
    assert "8 tracebacks in the period: StandinCudaError ×8 (TP0, TP1, TP2, TP3, TP4, TP5, TP6, TP7)." in note
    tl = section(note, "Timeline")
    assert "| 8 tracebacks: StandinCudaError (TP0, TP1, TP2, TP3, TP4, TP5, TP6, TP7) |" in tl
    assert "sglang-demo.service: Main process exited, code=killed, status=9/KILL" in tl
    assert tl.index("8 tracebacks") < tl.index("Main process exited") < tl.index("ready to roll")


def test_a_childs_death_is_the_crash_of_its_start_in_the_timeline_with_or_without_a_traceback() -> None:
    """A kill -9 of the real tp 1's scheduler prints no traceback; at tp 2, TP1's leaves one on
    TP0 (gloo's reset connection). Either way SGLang's own lines of its ending stand in the
    timeline between the last request and systemd's exit (tests/data/sglang-0.5.23)."""
    for name, first in (
        ("real-tp1-kill9-scheduler.jsonl", "Subprocess scheduler_0 (pid=489) crashed with exit code -9."),
        ("real-tp2-kill9-scheduler-tp1.jsonl", "traceback: RuntimeError (TP0)"),
    ):
        entries = [parse_json_line(line) for line in (DATA / "sglang-0.5.23" / name).read_text().splitlines()]
        events = [
            text
            for _, text in timeline(
                Incident("lab", "u", tracebacks=tracebacks_in(entries), events=unit_events(entries))
            )
        ]
        ending = next(k for k, text in enumerate(events) if first in text)
        said = next(k for k, text in enumerate(events) if "SIGQUIT received. " in text)
        tree = next(k for k, text in enumerate(events) if "kill_process_tree called: " in text)
        exited = next(k for k, text in enumerate(events) if "Main process exited, code=killed, status=9/KILL" in text)
        assert ending <= said < tree < exited, events


def test_a_traceback_holding_backticks_gets_a_fence_nothing_inside_can_close() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/srv/app/render.py", line 12, in <module>',
        '    raise ValueError("bad fence ``` here")',
        "ValueError: bad fence ``` here",
        "``````",  # a message line of six backticks: a three-backtick fence would end here
        "and the message goes on",
    ]
    entries = [
        JournalEntry(
            text, cursor=f"c{k}", realtime_us=1796033564000000 + k, pid=7, unit="x.service", invocation_id="i1"
        )
        for k, text in enumerate(lines)
    ]
    [tb] = tracebacks_in(entries)
    assert tb.lines == lines
    note = render(Incident("h", "x.service", tracebacks=[tb]))
    assert "\n```````text\n" in note  # seven: one more than the longest run inside
    assert fences(note) == ["\n".join(lines) + "\n"]
    assert fence_for("a ` b") == "```" and fence_for("x ```` y") == "`````"
    assert code("a`b") == "``a`b``" and code("`x`") == "`` `x` ``" and code("plain") == "`plain`"


def test_the_command_line_is_one_flag_per_line_and_the_shell_reads_it_back() -> None:
    texts = {
        f"/etc/systemd/system/{p.relative_to(UNITS)}": p.read_text()
        for p in [UNITS / "sglang-eagle.service", *sorted((UNITS / "sglang-eagle.service.d").glob("*.conf"))]
    }
    texts["/etc/sglang/eagle.env"] = (UNITS / "eagle.env").read_text()
    argv = load_unit(texts, "/etc/systemd/system/sglang-eagle.service").exec()
    shown = command_lines(argv)
    assert shlex.split(shown.replace("\\\n", " ")) == argv
    lines = shown.splitlines()
    assert all(line.lstrip().startswith("--") for line in lines[1:])
    assert len(lines) == 1 + sum(1 for a in argv if a.startswith("--"))
    assert command_lines(["/py", "-m", "srv", "--port", "1", "--x", "-1", "--name", "a b"]) == (
        "/py -m srv \\\n    --port 1 \\\n    --x -1 \\\n    --name 'a b'"
    )


def _attempts(tmp_path: Path, period_start: float):
    log = AttemptLog("cockpit-lab", "sglang-demo.service", root=tmp_path)
    _, entries = crash8()
    crash = tracebacks_in(entries)[0]
    before = {"--tp-size": "8", "--model-path": "/models/Llama-3.1-8B-Instruct"}
    eagle = {**before, "--speculative-algorithm": "EAGLE3", "--speculative-eagle-topk": "4"}
    finding = Finding(
        "error",
        "eagle-needs-num-steps",
        ["--speculative-eagle-topk", "--speculative-num-steps"],
        "--speculative-eagle-topk is set but --speculative-num-steps is not: SGLang 0.5.23 asserts "
        "that both are set or neither",
        would_raise="AssertionError",
        fix="set --speculative-num-steps 3",
    )
    old = log.new(flags_before=before, flags_after=before, texts={}, previous_texts={})
    old.started_at, old.outcome, old.seconds = period_start - 3600, "ready", 20.0
    log.save(old)
    first = log.new(
        flags_before=before,
        flags_after=eagle,
        texts={"/etc/systemd/system/sglang-demo.service": "x"},
        previous_texts={"/etc/systemd/system/sglang-demo.service": "y"},
        findings=[finding.to_json()],
    )
    first.started_at, first.outcome, first.seconds = period_start - 2, "crashed", 7.25  # ran into the period
    first.detail, first.traceback = "the unit exited 1", crash.to_json()
    log.save(first)
    back = log.new(
        flags_before=eagle,
        flags_after=before,
        texts={"/etc/systemd/system/sglang-demo.service": "y"},
        previous_texts={},
        note="rollback to attempt #2",
    )
    back.started_at, back.outcome, back.seconds = period_start + 30, "ready", 12.3
    log.save(back)
    return log.load()


def test_the_attempts_of_the_period_with_diff_findings_outcome_and_time_to_ready(tmp_path: Path) -> None:
    start = 1796033564.0
    attempts = attempts_in(_attempts(tmp_path, start), start)
    assert [a.number for a in attempts] == [2, 3]  # #1 ended an hour before the period
    note = render(Incident("cockpit-lab", "sglang-demo.service", attempts=attempts, period_start=start))
    table = section(note, "Attempts")
    rows = [line for line in table.splitlines() if re.match(r"\| \d+ \|", line)]
    assert rows[0].startswith(
        "| 2 | 2026-11-30 10:12:42 | --speculative-algorithm, --speculative-eagle-topk | 1 error | crashed | 7.2 s |"
    )
    assert rows[1] == (
        "| 3 | 2026-11-30 10:13:14 | --speculative-algorithm, --speculative-eagle-topk | - | ready | "
        "12.3 s to ready | rollback to attempt #2 |"
    )
    assert "| `--speculative-eagle-topk` | (unset) | `4` |" in table
    assert "| `--speculative-algorithm` | `EAGLE3` | (unset) |" in table
    assert (
        "- **error** eagle-needs-num-steps (`--speculative-eagle-topk`, `--speculative-num-steps`): "
        "--speculative-eagle-topk is set but --speculative-num-steps is not"
    ) in table
    assert "Would raise `AssertionError`. Fix: set --speculative-num-steps 3" in table
    assert "Crashed with `StandinCudaError: CUDA error: an illegal memory access" in table
    events = [text for _, text in timeline(Incident("h", "u", attempts=attempts))]
    assert events == [
        "attempt #2 writes the unit (--speculative-algorithm, --speculative-eagle-topk)",
        "attempt #2: crashed",
        "attempt #3 writes the unit (--speculative-algorithm, --speculative-eagle-topk)",
        "attempt #3: ready",
    ]


def test_the_source_excerpt_marks_the_failing_statement_and_explains_it(sglang_root) -> None:
    root = sglang_root("0.5.23")
    [tb] = tracebacks_in(parse_json_line(line) for line in (DATA / "journal-eagle.jsonl").read_text().splitlines())
    text = (root / "sglang/srt/arg_groups/speculative_hook.py").read_text()
    found = excerpt_of(
        text,
        "cockpit-lab",
        tb,
        catalog=load_catalog(root),
        values={"--speculative-eagle-topk": "4", "--speculative-num-draft-tokens": "3"},
    )
    assert (found.line, found.start_line, found.end_line) == (1162, 1160, 1163)
    note = render(Incident("cockpit-lab", "sglang-demo.service", tracebacks=[tb], source=found))
    part = section(note, "The failing statement")
    [block] = fences(part)
    marks = {int(m.group(2)): m.group(1) for m in re.finditer(r"^([>* ]) +(\d+)  ", block, re.M)}
    assert marks[1162] == ">" and [marks[n] for n in (1160, 1161, 1163)] == ["*"] * 3
    assert marks[1159] == " " and marks[1164] == " "
    assert "and cfg.speculative_num_draft_tokens is None" in block.splitlines()[1162 - found.first_line]
    assert (
        "This check failed: `not speculative_adaptive and speculative_num_steps is None` requires "
        "`speculative_eagle_topk is None and speculative_num_draft_tokens is None`."
    ) in part
    assert (
        "(current values from the unit: --speculative-eagle-topk 4, --speculative-num-draft-tokens 3, "
        "--speculative-adaptive unset, --speculative-num-steps unset)."
    ) in part


def test_the_load_run_table_from_a_bench_record() -> None:
    run = json.loads((DATA / "incident" / "run-standin.json").read_text())
    note = render(Incident("cockpit-lab", "sglang-demo.service", load_run=run))
    table = section(note, "Load run")
    rows = [line for line in table.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == len(run["levels"]) == 2
    for row, level in zip(rows, run["levels"], strict=True):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == str(level["concurrency"]) and cells[2] == "0"
        assert cells[3] == f"{level['output_tokens_per_s']:.1f}" and cells[5] == f"{level['ttft_ms']['p50']:.1f}"
        assert cells[10] == f"{level['tokens_per_chunk']:.2f}"
    assert "SGLang 0.5.23" in table and "output 40 tokens" in table


# --- screenshots --------------------------------------------------------------------------------------


def test_the_png_font_is_a_monospace_one_that_is_installed() -> None:
    svg = '<svg class="rich-terminal"><style>.terminal-1-matrix {\n font-family: Fira Code, monospace;\n}</style></svg>'
    assert 'font-family: "DejaVu Sans Mono", monospace;' in monospace(svg)
    assert preserve_spaces(svg).startswith('<svg xml:space="preserve" class="rich-terminal">')
    match = subprocess.run(
        ["fc-match", "-f", "%{family}|%{spacing}", "DejaVu Sans Mono"], capture_output=True, text=True, check=True
    ).stdout
    assert match == "DejaVu Sans Mono|100"  # fontconfig's spacing 100: monospace


# --- a server that dies mid-answer -----------------------------------------------------------------------


async def test_a_cut_server_info_answer_is_no_answer_not_a_crash() -> None:
    """A server that dies mid-answer: the transport says ConnectionError, server_info says None."""
    from cockpit.remote.local import LocalHost
    from cockpit.systemd.readiness import server_info

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"version": "0.5')
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(cut, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(ConnectionError, match="cut or malformed"):
            await LocalHost().http_request("GET", "127.0.0.1", port, "/server_info")
        assert await server_info(LocalHost(), "127.0.0.1", port) is None
    finally:
        server.close()
        await server.wait_closed()


# --- what a note says about a restart loop and the flags of the run that crashed -------------------------


def test_the_same_traceback_at_every_start_is_printed_once_with_where_it_came_back() -> None:
    from tests.ui.test_crash_loop import restart_loop

    tracebacks = tracebacks_in(restart_loop(17))
    assert len(tracebacks) == 17
    note = render(Incident(host="cockpit-lab", unit="sglang-demo.service", tracebacks=tracebacks))
    part = section(note, "Tracebacks")
    assert note.count("## Tracebacks (17, 1 kind)") == 1
    assert len(fences(part)) == 1 and "(×17)" in part
    assert "And 16 more like it, at " in part and part.count("(pid ") == 16


def test_a_crash_is_explained_with_the_flags_it_ran_with() -> None:
    from cockpit.attempts import Attempt, flags_in_effect

    seed = {"--speculative-eagle-topk": "4", "--speculative-num-draft-tokens": "3"}
    fixed = {**seed, "--speculative-num-steps": "3"}
    first = Attempt(1, "h", "u", 1000.0, seed, fixed, {}, {}, outcome="ready")
    failed = Attempt(2, "h", "u", 2000.0, fixed, {"--x": "1"}, {}, {}, outcome="failed")
    assert flags_in_effect([first], 900.0) == (seed, first)  # before any edit: what the first attempt found
    assert flags_in_effect([first], 1500.0) == (fixed, first)  # after it: what it wrote
    assert flags_in_effect([first, failed], 2500.0) == (fixed, failed)  # a failed write changed nothing
    assert flags_in_effect([], 1500.0) is None


def test_stacks_that_are_not_python_tracebacks_are_in_the_note_in_full() -> None:
    """Issue 27: a segfault's faulthandler dump, a c10::Error through terminate, a CUDA error (real
    output: tests/data/fold/native/ and cuda/) and NCCL's watchdog timeout, as the journal holds
    them, each a traceback of the note, line for line."""
    from tests.unit.test_native_stacks import nccl_rank

    fold_data = ROOT / "tests" / "data" / "fold"
    texts = [
        [line for line in (fold_data / name).read_text().splitlines() if line]  # journald keeps no blank line
        for name in ("native/faulthandler-segv.txt", "native/c10-error-terminate.txt", "cuda/illegal-address.txt")
    ]
    texts.append([*nccl_rank(3), "after"])
    entries = [
        JournalEntry(text, cursor=f"c{k}-{i}", realtime_us=1796033564000000 + 10 * k + i, pid=7 + k, unit="x.service")
        for k, lines in enumerate(texts)
        for i, text in enumerate(lines)
    ]
    tbs = tracebacks_in(entries)
    cupy = "cupy_backends.cuda.api.driver.CUDADriverError"  # the H200's run: the process's exit hooks fail after it
    assert [tb.exception for tb in tbs] == [
        "Fatal Python error",
        "c10::Error",
        "torch.AcceleratorError",
        cupy,
        cupy,
        "NCCL watchdog timeout",
    ]
    note = render(Incident("h", "x.service", tracebacks=tbs))
    shown = fences(note)
    assert tbs[3].lines == tbs[4].lines  # the same failure twice is printed once
    assert shown == ["\n".join(tb.lines) + "\n" for tb in tbs[:4] + tbs[5:]]
    assert tbs[0].lines == texts[0][:-1] and tbs[1].lines == texts[1][:-1]  # the shell's last line is its own
    assert tbs[-1].lines == texts[3][:-1] and tbs[2].lines == texts[2][:7]  # NCCL's record, the CUDA error's
    assert "Fatal Python error · " in note and "Failing frame: `/tmp/segv.py`, line 11" in note
