"""The traceback folder: real SGLang fixtures, real Python output, the journal's quirks."""

from __future__ import annotations

import argparse
import io
import itertools
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from cockpit.cli import fold as cli
from cockpit.systemd.entry import LEFT_OUT, JournalEntry, parse_json_line, parse_json_lines
from cockpit.traceback import BatchChanges, Change, Folder, Line, Traceback
from cockpit.traceback.render import header, summary
from tests.conftest import FIXTURES, ROOT
from tests.data.fold.checks import assert_every_line_once, assert_same, lines_of
from tests.data.fold.crashes import Cfg, chained, check_eagle, cuda, down, group, group_handled, raised, resolve, syntax
from tests.data.fold.truth import describe_exception, printed

SGLANG = FIXTURES / "sglang"
UNIT = "sglang-demo.service"
SITE = "/opt/sglang/venv/lib/python3.11/site-packages/sglang"
HOOK = f"{SITE}/srt/arg_groups/speculative_hook.py"
ARGS = f"{SITE}/srt/server_args.py"
RUNPY = ("<frozen runpy>", 198, "_run_module_as_main", None)
STRING_INIT = ("<string>", 331, "__init__", None)
ASSERT_23 = ("AssertionError", "", (HOOK, 1162, "_handle_eagle_family", "and cfg.speculative_num_draft_tokens is None"))
TYPE_23 = (
    "TypeError",
    "'>' not supported between instances of 'NoneType' and 'int'",
    (HOOK, 1274, "_handle_eagle_family", "cfg.speculative_eagle_topk > 1"),
)
ASSERT_9 = (
    "AssertionError",
    "",
    (ARGS, 2425, "_handle_speculative_decoding", "and self.speculative_num_draft_tokens is None"),
)
TYPE_9 = (
    "TypeError",
    "'>' not supported between instances of 'NoneType' and 'int'",
    (ARGS, 2453, "_handle_speculative_decoding", "self.speculative_eagle_topk > 1"),
)

# fixture -> (exception, message, failing frame, number of frames, a frame it must hold, complete, truncated)
FIXTURE_TRACEBACKS = {
    "launch_server/launch_server-0.5.23-eagle3-steps3-only.txt": (*TYPE_23, 10, RUNPY, True, False),
    "launch_server/launch_server-0.5.23-eagle3-topk4-drafttok3.txt": (*ASSERT_23, 10, RUNPY, True, False),
    "launch_server/launch_server-0.5.23-eagle3-topk4-drafttok3.tail20.txt": (*ASSERT_23, 10, RUNPY, False, True),
    "launch_server/launch_server-0.5.9-eagle3-topk4-drafttok3.txt": (*ASSERT_9, 8, STRING_INIT, True, False),
    "preflight/traceback-0.5.23-c1-topk4-drafttok3-nosteps.txt": (*ASSERT_23, 7, None, True, False),
    "preflight/traceback-0.5.23-c2-drafttok3-only.txt": (*ASSERT_23, 7, None, True, False),
    "preflight/traceback-0.5.23-c3-steps3-only.txt": (*TYPE_23, 7, None, True, False),
    "preflight/traceback-0.5.23-c4-steps3-drafttok4-notopk.txt": (*TYPE_23, 7, None, True, False),
    "preflight/traceback-0.5.23-c5-topk4-only.txt": (*ASSERT_23, 7, None, True, False),
    "preflight/traceback-0.5.9-c1-topk4-drafttok3-nosteps.txt": (*ASSERT_9, 6, STRING_INIT, True, False),
    "preflight/traceback-0.5.9-c2-drafttok3-only.txt": (*ASSERT_9, 6, STRING_INIT, True, False),
    "preflight/traceback-0.5.9-c3-steps3-only.txt": (*TYPE_9, 6, STRING_INIT, True, False),
    "preflight/traceback-0.5.9-c4-steps3-drafttok4-notopk.txt": (*TYPE_9, 6, STRING_INIT, True, False),
    "preflight/traceback-0.5.9-c5-topk4-only.txt": (*ASSERT_9, 6, STRING_INIT, True, False),
    "logs/startup-and-error-lines.template.log": ("RuntimeError", "example", None, 0, None, True, False),
}


# --- helpers ------------------------------------------------------------------------------


def entry(
    message: str,
    pid: int | None = 4100,
    *,
    t: int = 0,
    unit: str | None = UNIT,
    priority: int = 6,
    invocation: str = "inv1",
) -> JournalEntry:
    return JournalEntry(
        message,
        cursor=f"c{t}",
        realtime_us=1796031916000000 + t,
        pid=pid,
        priority=priority,
        invocation_id=invocation,
        unit=unit,
    )


class Fed(Folder):
    """A folder that remembers its input, so a test can check that no line was lost."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[str] = []

    def feed(self, entry: JournalEntry) -> list[Change]:
        self.inputs += entry.message.split("\n")
        return super().feed(entry)

    def feed_batch(self, entries: list[JournalEntry]) -> BatchChanges:
        for e in entries:
            self.inputs += e.message.split("\n")
        return super().feed_batch(entries)

    def check(self) -> None:
        assert_every_line_once(self.inputs, self.records)


def fold_entries(entries: list[JournalEntry]) -> Folder:
    folder = Folder()
    for e in entries:
        folder.feed(e)
    folder.close()
    assert_every_line_once([line for e in entries for line in e.message.split("\n")], folder.records)
    return folder


def fold_text(lines: list[str]) -> Folder:
    folder = Folder()
    for line in lines:
        folder.feed_text(line)
    folder.close()
    assert_every_line_once(lines, folder.records)
    return folder


def tracebacks(folder: Folder) -> list[Traceback]:
    return [r for r in folder.records if isinstance(r, Traceback)]


def frame_tuple(frame) -> tuple:
    return (frame.file, frame.line, frame.function, frame.code)


def logged(prefix: str, exc: BaseException) -> list[str]:
    """SGLang's `logger.error(f"Scheduler hit an exception: {traceback.format_exc()}")`."""
    return f"{prefix} Scheduler hit an exception: {chr(10).join(printed(exc))}\n".split("\n")


# --- the real SGLang fixtures -------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURE_TRACEBACKS))
def test_fixture_traceback_has_the_right_failing_frame_and_exception(name: str) -> None:
    exception, message, failing, n_frames, holds, complete, truncated = FIXTURE_TRACEBACKS[name]
    lines = (SGLANG / name).read_text().splitlines()
    [tb] = tracebacks(fold_text(lines))
    assert (tb.exception, tb.message) == (exception, message)
    assert len(tb.frames) == n_frames
    if failing is not None:
        assert frame_tuple(tb.failing_frame) == failing
    if holds is not None:
        assert holds in [frame_tuple(f) for f in tb.frames]
    assert (tb.complete, tb.truncated) == (complete, truncated)
    assert not tb.open and tb.chained == [] and tb.sub_exceptions == []


def test_every_fixture_with_a_traceback_is_checked() -> None:
    """A new fixture file with a traceback must get its expected values above."""
    found = set()
    for path in sorted(SGLANG.rglob("*")):
        if path.is_file() and path.suffix in (".txt", ".log"):
            folder = fold_text(path.read_text().splitlines())
            if tracebacks(folder):
                found.add(str(path.relative_to(SGLANG)))
    assert found == set(FIXTURE_TRACEBACKS)


def test_fixture_lines_around_the_traceback_stay_plain_lines() -> None:
    lines = (SGLANG / "launch_server/launch_server-0.5.9-eagle3-topk4-drafttok3.txt").read_text().splitlines()
    folder = fold_text(lines)
    start = lines.index("Traceback (most recent call last):")
    assert [r.text for r in folder.records[:start]] == lines[:start]  # warnings and `  warnings.warn(` too
    assert folder.records[start].lines == lines[start:]
    assert folder.records[start].frames[0].code is None  # `<frozen runpy>` has no code line
    assert folder.records[start].frames[2].code == "server_args = prepare_server_args(sys.argv[1:])"


def test_tail_cut_traceback_is_a_record_from_its_first_frame() -> None:
    lines = (SGLANG / "launch_server/launch_server-0.5.23-eagle3-topk4-drafttok3.tail20.txt").read_text().splitlines()
    folder = fold_text(lines)
    assert len(folder.records) == 1 and folder.records[0].lines == lines
    assert "start cut off" in header(folder.records[0])


# --- grouping: processes, ranks, mid-line starts ------------------------------------------


def test_sglang_worker_traceback_starts_mid_line_with_its_rank() -> None:
    exc = raised(resolve, Cfg())
    block = logged("[2026-05-25 19:34:29 TP3]", exc)
    folder = fold_entries(
        [
            entry("[2026-05-25 19:34:28 TP3] Decode batch, #running-req: 32"),
            *[entry(text) for text in block],
            entry("[2026-05-25 19:34:30] Received sigquit from a child process."),
        ]
    )
    [tb] = tracebacks(folder)
    assert tb.lines == block  # the prefixed first line and the blank line logging adds included
    assert (tb.rank, tb.pid, tb.unit, tb.complete) == ("TP3", 4100, UNIT, True)
    assert_same(tb.to_json(), describe_exception(exc))
    assert tb.frames[-1].function == "check_eagle" and tb.frames[-1].file == check_eagle.__code__.co_filename
    assert summary(tb) == "TP3 AssertionError"


def test_eight_processes_interleaving_line_by_line_are_told_apart_by_pid() -> None:
    blocks = {}
    for rank in range(8):
        cfg = Cfg()
        cfg.speculative_num_draft_tokens = rank  # a different statement value, the same frames
        exc = raised(chained) if rank % 2 else raised(resolve, cfg)
        blocks[5000 + rank] = (rank, exc, logged(f"[2026-05-25 19:34:29 TP{rank}]", exc))
    entries, t = [], 0
    for row in itertools.zip_longest(*[b[2] for b in blocks.values()]):
        for pid, text in zip(blocks, row, strict=True):
            if text is not None:
                t += 1
                entries.append(entry(text, pid, t=t))
        entries.append(entry("[2026-05-25 19:34:29 TP0] Decode batch, #running-req: 1", 4100, t=t))
    folder = fold_entries(entries)
    found = {tb.pid: tb for tb in tracebacks(folder)}
    assert set(found) == set(blocks)
    for pid, (rank, exc, block) in blocks.items():
        tb = found[pid]
        assert (tb.rank, tb.lines, tb.complete) == (f"TP{rank}", block, True)
        assert_same(tb.to_json(), describe_exception(exc))
    assert len(folder.records) == 8 + max(len(b[2]) for b in blocks.values())  # decode lines stay lines


def test_ranks_sharing_one_pid_are_told_apart_by_their_prefix() -> None:
    """SGLang's workers inherit the main process's stdout: one _PID for every rank."""
    excs = [raised(resolve, Cfg()) if k % 3 else raised(group) for k in range(8)]
    blocks = [logged(f"[2026-05-25 19:34:29 TP{k}]", exc) for k, exc in enumerate(excs)]
    entries = [entry(text) for block in blocks for text in block]
    # another rank's log line arriving while rank 0's frames are still coming passes by
    entries.insert(3, entry("[2026-05-25 19:34:29 TP5] Load weight end."))
    folder = fold_entries(entries)
    tbs = tracebacks(folder)
    assert [tb.rank for tb in tbs] == [f"TP{k}" for k in range(8)]
    for tb, block, exc in zip(tbs, blocks, excs, strict=True):
        assert tb.lines == block and tb.complete
        assert_same(tb.to_json(), describe_exception(exc))
    assert folder.records[1].text.endswith("Load weight end.")


def test_plain_text_takes_ranks_from_the_log_prefix() -> None:
    exc = raised(resolve, Cfg())
    block = logged("[2026-05-25 19:34:29 DP1 TP3]", exc)
    lines = [
        "[2026-05-25 19:34:28 DP1 TP3] Prefill batch, #new-seq: 2",
        *block,
        'INFO:     127.0.0.1:5 - "GET /health"',
    ]
    folder = fold_text(lines)
    [tb] = tracebacks(folder)
    assert (tb.rank, tb.pid, tb.unit, tb.start, tb.lines) == ("DP1 TP3", None, None, None, block)
    assert folder.records[-1].text.startswith("INFO:")
    assert folder.records[0].rank == "DP1 TP3" and folder.records[0].priority is None


@pytest.mark.parametrize("rank", ["DP0 ATTN_CP1 TP1", "MOE_DP2 TP1"])
def test_rank_tokens_with_an_underscore_0_5_23_prints(rank: str) -> None:
    exc = raised(resolve, Cfg())
    block = logged(f"[2026-05-25 19:34:29 {rank}]", exc)
    folder = fold_text([*block, f"[2026-05-25 19:34:30 {rank}] Decode batch, #running-req: 1"])
    [tb] = tracebacks(folder)
    assert (tb.rank, tb.lines) == (rank, block)
    assert folder.records[-1].rank == rank


# --- Python's formats ---------------------------------------------------------------------


def testchained_exceptions_cause_and_context() -> None:
    exc = raised(chained)
    lines = printed(exc)
    [tb] = tracebacks(fold_text(lines))
    assert tb.lines == lines
    assert [c.exception for c in tb.chained] == ["KeyError", "RuntimeError"]
    assert [c.relation for c in tb.chained] == ["cause", "context"]
    assert (tb.exception, tb.message) == ("ValueError", "bad 3\nsecond line of 3")
    assert tb.chained[0].lines[0] == "Traceback (most recent call last):"
    assert tb.chained[1].lines[-3:] == ["", "During handling of the above exception, another exception occurred:", ""]
    assert_same(tb.to_json(), describe_exception(exc))


def test_exception_group_with_nestedgroups_and_chains() -> None:
    exc = raised(group)
    lines = printed(exc)
    [tb] = tracebacks(fold_text(lines))
    assert tb.lines == lines and tb.complete
    assert tb.exception == "ExceptionGroup" and tb.message == "many (4 sub-exceptions)"
    assert [s.exception for s in tb.sub_exceptions] == ["ValueError", "ValueError", "TypeError", "ExceptionGroup"]
    assert tb.sub_exceptions[2].chained[0].relation == "cause"
    assert [s.exception for s in tb.sub_exceptions[3].sub_exceptions] == ["FileNotFoundError", "RuntimeError"]
    assert_same(tb.to_json(), describe_exception(exc))


@pytest.mark.parametrize("crash", [chained, group, group_handled])
def test_chains_and_groups_as_the_journal_stores_them_without_blank_lines(crash) -> None:
    """journald drops empty lines: no blank around `During handling...`, none after a block."""
    exc = crash() if crash is group_handled else raised(crash)
    block = [line for line in logged("[2026-05-25 19:34:29 TP4]", exc) if line]
    folder = fold_entries([entry(text, 8) for text in block] + [entry("[2026-05-25 19:34:30 TP4] next", 8)])
    [tb] = tracebacks(folder)
    assert tb.lines == block and tb.complete
    assert_same(tb.to_json(), describe_exception(exc))


def test_exception_group_printed_by_the_interpreter_itself() -> None:
    """An uncaught group: Python 3.11's C printer leaves a member's second message line
    without the box's margin."""
    code = (
        "import json, sys; sys.path[:0] = ['tests/data/fold']\n"
        "from crashes import group\nfrom truth import describe_exception\n"
        "def hook(t, e, tb):\n    print(json.dumps(describe_exception(e)))\n    sys.__excepthook__(t, e, tb)\n"
        "sys.excepthook = hook\ngroup()\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    lines = run.stderr.splitlines()
    if sys.version_info < (3, 12):
        assert "second line of 0" in lines
    [tb] = tracebacks(fold_text(lines))
    assert tb.lines == lines
    assert_same(tb.to_json(), msgspec.json.decode(run.stdout))


def test_exception_group_without_a_traceback_of_its_own() -> None:
    exc = group_handled()
    lines = printed(exc)
    assert lines[0].startswith("  | ExceptionGroup:")  # no header at all
    [tb] = tracebacks(fold_text(["[2026-05-25 19:34:29] starting", *lines]))
    assert tb.lines == lines
    assert_same(tb.to_json(), describe_exception(exc))


def test_exception_group_logged_mid_line() -> None:
    exc = raised(group)
    block = logged("[2026-05-25 19:34:29 TP1]", exc)
    assert block[0].endswith(":   + Exception Group Traceback (most recent call last):")
    [tb] = tracebacks(fold_entries([entry(text) for text in block]))
    assert tb.lines == block and tb.rank == "TP1"
    assert_same(tb.to_json(), describe_exception(exc))


def testsyntax_error_location_is_not_a_frame_and_keeps_its_code() -> None:
    exc = raised(syntax)
    lines = printed(exc)
    [tb] = tracebacks(fold_text(lines))
    assert (tb.location.file, tb.location.line, tb.location.code) == ("<cell>", 1, "x = (1,")
    assert all(f.function for f in tb.frames) and tb.failing_frame is tb.location
    assert tb.to_json()["location"] == {"file": "<cell>", "line": 1, "code": "x = (1,"}
    assert (tb.exception, tb.message) == ("SyntaxError", "'(' was never closed")
    assert_same(tb.to_json(), describe_exception(exc))


def testsyntax_error_of_a_script_prints_no_header(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text("print('a')\nx = (1,\n")
    stderr = subprocess.run([sys.executable, str(script)], capture_output=True, text=True).stderr.splitlines()
    assert stderr[0].startswith('  File "')  # what Python prints: no `Traceback (most recent call last):`
    [tb] = tracebacks(fold_text(["[2026-05-25 19:34:29] launching", *stderr]))
    assert tb.frames == [] and (tb.location.file, tb.location.line, tb.location.code) == (str(script), 2, "x = (1,")
    assert (tb.exception, tb.complete, tb.truncated) == ("SyntaxError", True, False)


def test_multi_line_message_ends_at_the_next_log_line() -> None:
    exc = raised(cuda)
    block = logged("[2026-05-25 19:34:29 TP2]", exc)[:-1]  # no trailing blank line this time
    folder = fold_text([*block, "[2026-05-25 19:34:30 TP2] Exit"])
    [tb] = tracebacks(folder)
    assert tb.message == str(exc) and tb.message.count("\n") == 2
    assert folder.records[-1].text.endswith("Exit")
    for ender in (
        'INFO:     127.0.0.1:43210 - "POST /generate HTTP/1.1" 200 OK',
        "/opt/x.py:92: UserWarning: careful",
        "Traceback (most recent call last):",
    ):
        folder = fold_text([*block, ender])
        assert tracebacks(folder)[0].message == str(exc)


def test_blank_line_ends_a_message_unless_a_chain_marker_follows() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "ValueError: x",
        "",
        "a plain line after it",
    ]
    folder = fold_text(lines)
    assert folder.records[0].lines == lines[:4] and folder.records[1].text == "a plain line after it"


def test_exception_without_message() -> None:
    exc = raised(resolve, Cfg())
    [tb] = tracebacks(fold_text(printed(exc)))
    assert (tb.exception, tb.message) == ("AssertionError", "")
    assert tb.to_json()["message"] == ""


def test_python_313_multi_line_statements_and_carets() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/srv/hook.py", line 1161, in _handle_eagle_family',
        "    cfg.speculative_eagle_topk is None",
        "    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~",
        "    and cfg.speculative_num_draft_tokens is None",
        "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        '  File "/srv/run.py", line 9, in run',
        "    foo(1,",
        "    ...<2 lines>...",
        "        3)",
        "AssertionError",
    ]
    [tb] = tracebacks(fold_text(lines))
    assert tb.frames[0].code == "cfg.speculative_eagle_topk is None\nand cfg.speculative_num_draft_tokens is None"
    assert tb.frames[1].code == "foo(1,\n...<2 lines>...\n3)"


def test_recursion_summary_line_stays_in_the_block() -> None:
    exc = raised(down, 0)
    lines = printed(exc)
    assert any(line.startswith("  [Previous line repeated") for line in lines)
    [tb] = tracebacks(fold_text(lines))
    assert tb.lines == lines and tb.exception == "RecursionError"


# --- noise --------------------------------------------------------------------------------


def test_progress_bars_invalid_utf8_and_warnings_are_plain_lines() -> None:
    bar = msgspec.json.encode(
        {"MESSAGE": list(b"Loading: 10%\rLoading: 20%\r"), "_PID": "7", "PRIORITY": "6", "__REALTIME_TIMESTAMP": "1"}
    )
    bad = msgspec.json.encode({"MESSAGE": list(b"caf\xe9 \xff"), "_PID": "7"})
    entries = [
        parse_json_line(bar),
        parse_json_line(bad),
        entry(
            "/opt/sglang/venv/lib/python3.11/site-packages/requests/__init__.py:92: "
            "RequestsDependencyWarning: Unable to find acceptable character detection dependency",
            7,
        ),
        entry("  warnings.warn(", 7),
        entry('  File "/app/x.py", line 3, in f', 7),  # looks like a frame, no traceback is open
        entry("[2026-05-25 19:34:29] next", 7),
    ]
    assert entries[0].binary and "\r" in entries[0].message and entries[1].message == "caf\ufffd \ufffd"
    folder = fold_entries(entries)
    assert [r.kind for r in folder.records] == ["line"] * 6


def test_a_lone_frame_like_line_at_the_end_stays_a_line() -> None:
    folder = fold_text(["ok", '  File "x", line 3, in f'])
    assert [r.kind for r in folder.records] == ["line", "line"]


@pytest.mark.parametrize("where", ["plain", "frame-like", "in frames", "in message", "as exception"])
def test_a_100000_character_line_costs_no_backtracking(where: str) -> None:
    long = "x" * 100_000
    head = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>']
    lines = {
        "plain": [long, "Traceback"],
        "frame-like": ['  File "' + long, '  File "' + long + '", line 1', "    " + long],
        "in frames": [*head, "    " + long + "(", "ValueError: " + long],
        "in message": [*head, "ValueError: boom", long, "[" + long],
        "as exception": [*head, long + ":" + long],
    }[where]
    started = time.process_time()
    folder = fold_text(lines)
    for tb in tracebacks(folder):
        tb.to_json()
    assert time.process_time() - started < 2.0  # a backtracking blow-up would take minutes
    if where in ("in frames", "in message"):
        assert tracebacks(folder)[0].exception == "ValueError"


# --- incomplete tracebacks and exits ------------------------------------------------------


def test_killed_process_leaves_an_incomplete_traceback_closed_by_its_next_line() -> None:
    exc = raised(resolve, Cfg())
    head = printed(exc)[:5]
    entries = [entry(text, 11) for text in head] + [entry("[2026-05-25 19:34:29] restarted worker", 11)]
    folder = Fed()
    for e in entries[:-1]:
        folder.feed(e)
    assert folder.records[0].open and not folder.records[0].complete
    changes = folder.feed(entries[-1])
    assert changes == [Change("updated", 0), Change("appended", 1)]
    tb = folder.records[0]
    assert (tb.open, tb.complete, tb.lines, tb.exception) == (False, False, head, None)
    assert [list(frame_tuple(f)) for f in tb.frames] == describe_exception(exc)["frames"][:2]  # so far
    assert "incomplete" in header(tb)
    folder.check()


def test_exit_of_the_unit_closes_its_open_tracebacks() -> None:
    folder = Fed()
    folder.feed(entry("Traceback (most recent call last):", 21))
    folder.feed(entry('  File "a.py", line 1, in <module>', 21))
    folder.feed(entry("Traceback (most recent call last):", 22, unit="other.service"))
    changes = folder.feed(entry(f"{UNIT}: Main process exited, code=killed, status=9/KILL", 1, unit=UNIT))
    assert changes == [Change("updated", 0), Change("appended", 2)]
    assert not folder.records[0].open and folder.records[1].open
    assert [tb.pid for tb in folder.open_tracebacks] == [22]
    folder.check()


def test_lines_journald_reads_after_the_exit_message_still_join_their_traceback() -> None:
    exc = raised(resolve, Cfg())
    lines = printed(exc)
    entries = [entry(text, 31) for text in lines[:-1]]
    entries.append(entry(f"{UNIT}: Main process exited, code=exited, status=1/FAILURE", 1))
    entries.append(entry(lines[-1], 31))  # `AssertionError` came after systemd's message
    folder = fold_entries(entries)
    [tb] = tracebacks(folder)
    assert tb.lines == lines and tb.complete and not tb.open
    assert_same(tb.to_json(), describe_exception(exc))


def test_a_later_run_that_reuses_the_pid_does_not_reopen_an_old_traceback() -> None:
    folder = Fed()
    folder.feed(entry("Traceback (most recent call last):", 32))
    folder.feed(entry('  File "a.py", line 1, in <module>', 32))
    folder.feed(entry(f"{UNIT}: Main process exited, code=killed, status=9/KILL", 1))
    folder.feed(entry("    indented output of the next run", 32, invocation="inv2"))
    assert [r.kind for r in folder.records] == ["traceback", "line", "line"]
    assert len(folder.records[0].lines) == 2 and not folder.records[0].open
    folder.check()


def test_close_one_pid_or_all() -> None:
    folder = Fed()
    folder.feed(entry("Traceback (most recent call last):", 41))
    folder.feed(entry("Traceback (most recent call last):", 42))
    assert folder.close(41) == [Change("updated", 0)]
    assert [tb.pid for tb in folder.open_tracebacks] == [42]
    assert folder.close() == [Change("updated", 1)] and folder.open_tracebacks == []
    folder.check()


# --- the incremental API ------------------------------------------------------------------


def test_records_update_in_place_as_lines_arrive() -> None:
    folder = Fed()
    assert folder.feed(
        entry("[2026-05-25 19:34:29 TP0] Scheduler hit an exception: Traceback (most recent call last):")
    ) == [Change("appended", 0)]
    assert folder.feed(entry('  File "/x.py", line 3, in run')) == [Change("updated", 0)]
    assert folder.records[0].frames[-1].function == "run" and folder.records[0].exception is None
    assert folder.feed(entry("ValueError: boom")) == [Change("updated", 0)]
    assert folder.records[0].exception == "ValueError" and folder.records[0].complete
    assert folder.feed(entry("decode", 99)) == [Change("appended", 1)]
    folder.check()


def test_a_frame_like_line_becomes_a_traceback_when_the_next_line_continues_it() -> None:
    folder = Fed()
    folder.feed(entry('  File "/x.py", line 3, in run', 51))
    assert isinstance(folder.records[0], Line)
    folder.feed(entry("other process", 52))
    changes = folder.feed(entry("    run()", 51))
    assert changes == [Change("updated", 0)]
    tb = folder.records[0]
    assert isinstance(tb, Traceback) and tb.truncated and tb.frames[0].code == "run()"
    assert folder.records[1].text == "other process"
    folder.check()


def test_feed_batch_reports_new_and_updated_records() -> None:
    folder = Fed()
    folder.feed_batch([entry("Traceback (most recent call last):"), entry("a", 2)])
    result = folder.feed_batch(
        [entry('  File "x.py", line 1, in <module>'), entry("b", 2), entry("KeyError: 'k'"), entry("c", 2)]
    )
    assert result == BatchChanges(first_new=2, updated=[0])
    assert [r.kind for r in folder.records] == ["traceback", "line", "line", "line"]
    assert folder.records[0].exception == "KeyError"
    folder.check()


def test_discard_forgets_the_oldest_records_and_shifts_indices() -> None:
    folder = Folder()
    for i in range(3):
        folder.feed(entry(f"line {i}", 2))
    folder.feed(entry("Traceback (most recent call last):"))
    folder.discard(2)
    assert [lines_of(r)[0] for r in folder.records] == ["line 2", "Traceback (most recent call last):"]
    assert folder.feed(entry('  File "x.py", line 1, in <module>')) == [Change("updated", 1)]


def test_multi_line_message_of_one_entry_is_split_into_lines() -> None:
    exc = raised(resolve, Cfg())
    text = "\n".join(printed(exc))
    folder = fold_entries([entry("before", 3), entry(text, 3), entry("[2026-05-25 19:34:30] after", 3)])
    assert [r.kind for r in folder.records] == ["line", "traceback", "line"]
    assert folder.records[1].lines == printed(exc)


# --- JSON and text output -----------------------------------------------------------------


def test_json_records_follow_the_design_contract() -> None:
    exc = raised(chained)
    folder = fold_entries(
        [
            entry("hello", 5, t=1, priority=3),
            *[entry(text, 6, t=2) for text in logged("[2026-05-25 19:34:29 TP3]", exc)],
        ]
    )
    assert (folder.records[0].cursor, folder.records[0].invocation_id) == ("c1", "inv1")
    assert (folder.records[1].cursor, folder.records[1].invocation_id) == ("c2", "inv1")
    line, tb = (r.to_json() for r in folder.records)
    assert line == {
        "kind": "line",
        "text": "hello",
        "pid": 5,
        "rank": None,
        "unit": UNIT,
        "time": "1796031916000001",
        "priority": 3,
    }
    assert set(tb) == {
        "kind",
        "pid",
        "rank",
        "unit",
        "start",
        "lines",
        "frames",
        "location",
        "exception",
        "message",
        "chained",
        "complete",
        "sub_exceptions",
        "truncated",
    }
    assert (tb["kind"], tb["pid"], tb["rank"], tb["unit"], tb["start"]) == (
        "traceback",
        6,
        "TP3",
        UNIT,
        "1796031916000002",
    )
    assert set(tb["frames"][0]) == {"file", "line", "function", "code"}
    assert set(tb["chained"][0]) == set(tb) | {"relation"}
    assert msgspec.json.decode(msgspec.json.encode(tb)) == tb


def run_cli(capsysbinary, *argv: str) -> tuple[int, bytes, bytes]:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    code = cli.run(parser.parse_args(["fold", *argv]))
    out, err = capsysbinary.readouterr()
    return code, out, err


def test_cli_json_on_a_journal_export(tmp_path: Path, capsysbinary) -> None:
    exc = raised(resolve, Cfg())
    lines = logged("[2026-05-25 19:34:29 TP3]", exc)
    export = tmp_path / "journal.json"
    rows = [
        {
            "MESSAGE": text,
            "_PID": "77",
            "__REALTIME_TIMESTAMP": str(100 + i),
            "PRIORITY": "6",
            "_SYSTEMD_UNIT": UNIT,
            "__CURSOR": f"c{i}",
        }
        for i, text in enumerate(["start", *lines])
    ]
    export.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in rows) + b'{"not": "an entry"}\n')
    code, out, _ = run_cli(capsysbinary, str(export), "--json")
    records = [msgspec.json.decode(line) for line in out.splitlines()]
    assert code == 0 and [r["kind"] for r in records] == ["line", "traceback", "line"]
    assert records[1]["start"] == "101" and records[1]["lines"] == lines and records[1]["pid"] == 77
    assert_same(records[1], describe_exception(exc))
    assert records[2]["text"] == '{"not": "an entry"}' and records[2]["pid"] is None


def test_cli_text_prints_each_traceback_whole_under_a_header(tmp_path: Path, capsysbinary) -> None:
    a, b = logged("[2026-05-25 19:34:29 TP0]", raised(chained)), logged("[2026-05-25 19:34:29 TP1]", raised(group))
    rows = []
    for pair in itertools.zip_longest(a, b):
        rows += [{"MESSAGE": text, "_PID": str(10 + k)} for k, text in enumerate(pair) if text is not None]
    export = tmp_path / "j.json"
    export.write_bytes(b"\n".join(msgspec.json.encode(r) for r in rows))
    code, out, _ = run_cli(capsysbinary, str(export))
    text = out.decode().split("\n")
    assert code == 0
    assert text[0] == f"── TP0 pid 10 · ValueError · {len(a)} lines · 2 chained ──"
    assert text[1 : 1 + len(a)] == a
    assert text[1 + len(a)] == f"── TP1 pid 11 · ExceptionGroup · {len(b)} lines ──"
    assert text[2 + len(a) : 2 + len(a) + len(b)] == b


def test_cli_reads_standard_input_and_keeps_open_tracebacks(monkeypatch, capsysbinary) -> None:
    text = 'Traceback (most recent call last):\r\n  File "a.py", line 1, in <module>\n\xff\xfe\n'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("latin-1"))))
    code, out, _ = run_cli(capsysbinary, "-", "--json")
    records = [msgspec.json.decode(line) for line in out.splitlines()]
    assert code == 0 and records[0]["complete"] is False
    assert records[0]["lines"] == ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>']
    assert records[1]["text"] == "\ufffd\ufffd"


def test_cli_unreadable_file_exits_2_with_one_sentence(tmp_path: Path, capsysbinary) -> None:
    code, out, err = run_cli(capsysbinary, str(tmp_path / "missing.json"))
    assert (code, out) == (2, b"")
    assert err.decode().count("\n") == 1 and "cannot read" in err.decode()


# --- journal entry parsing ----------------------------------------------------------------


def test_entry_parsing_keeps_its_semantics() -> None:
    systemd = parse_json_line(
        b'{"MESSAGE":"x.service: Main process exited","UNIT":"x.service",'
        b'"_SYSTEMD_UNIT":"init.scope","_PID":"1","INVOCATION_ID":"abc"}'
    )
    assert (systemd.unit, systemd.pid, systemd.priority, systemd.invocation_id) == ("x.service", 1, 6, "abc")
    null = parse_json_line('{"MESSAGE":null,"PRIORITY":"3","_PID":"12","__REALTIME_TIMESTAMP":"5"}')
    assert (null.message, null.priority, null.pid, null.realtime_us, null.binary) == (LEFT_OUT, 3, 12, 5, False)
    binary = parse_json_line('{"MESSAGE":[104,105,255],"_PID":"12"}')
    assert (binary.message, binary.binary) == ("hi\ufffd", True)
    repeated = parse_json_line('{"MESSAGE":["a","b"],"_PID":["1","2"]}')
    assert (repeated.message, repeated.pid) == ("a\nb", None)
    with pytest.raises(ValueError):
        parse_json_line("not json")
    with pytest.raises(ValueError):
        parse_json_line("[1, 2]")


def test_parse_json_lines_skips_broken_lines_and_shares_repeated_strings() -> None:
    line = msgspec.json.encode(
        {
            "MESSAGE": "m",
            "__CURSOR": "c",
            "__REALTIME_TIMESTAMP": "9",
            "_PID": "4100",
            "PRIORITY": "4",
            "_SYSTEMD_INVOCATION_ID": "inv",
            "_SYSTEMD_UNIT": UNIT,
            "SYSLOG_IDENTIFIER": "python",
        }
    )
    entries = parse_json_lines([line, b"", b'{"MESSAGE": "cut', line, b"[]"])
    assert len(entries) == 2 and entries.skipped == 2  # the cut line and the array; a blank one is no line
    assert entries[0] == JournalEntry("m", "c", 9, 4100, 4, "inv", UNIT, "python", False)
    assert entries[0].unit is entries[1].unit and entries[0].invocation_id is entries[1].invocation_id


DEEP = 100_000  # a host's journalctl can print anything; a real one prints no nesting at all


def test_a_line_nested_too_deep_to_decode_is_skipped_and_counted() -> None:
    """msgspec raises RecursionError past about a thousand levels, in a field the cockpit reads
    (MESSAGE) or one it skips: the follower dropped the whole batch and read it again for ever."""
    good = b'{"MESSAGE":"kept","PRIORITY":"6","_PID":"7"}'
    in_message = b'{"MESSAGE":' + b"[" * DEEP + b"]" * DEEP + b"}"
    in_other = b'{"MESSAGE":"x","PRIORITY":"6","OTHER":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}"
    entries = parse_json_lines([good, in_message, good, in_other, good])
    assert [e.message for e in entries] == ["kept"] * 3 and entries.skipped == 2


def test_cli_folds_the_lines_after_a_line_nested_too_deep(tmp_path: Path, capsysbinary) -> None:
    """`cockpit fold` printed a RecursionError traceback there and lost every line after it; now
    the line is a plain line, as every line that is no journal entry is."""
    deep = b'{"MESSAGE":' + b"[" * 1000 + b"]" * 1000 + b"}"
    lines = logged("[2026-05-25 19:34:29 TP3]", raised(resolve, Cfg()))
    rows = [msgspec.json.encode({"MESSAGE": text, "_PID": "77", "PRIORITY": "6"}) for text in lines]
    export = tmp_path / "journal.json"
    export.write_bytes(b"\n".join([rows[0], deep, *rows[1:]]) + b"\n")
    code, out, err = run_cli(capsysbinary, str(export), "--json")
    records = [msgspec.json.decode(line) for line in out.splitlines()]
    assert (code, err) == (0, b"")
    assert [r["kind"] for r in records] == ["traceback", "line"]  # the traceback takes its lines around it
    assert records[0]["lines"] == lines and records[1]["text"] == deep.decode()
