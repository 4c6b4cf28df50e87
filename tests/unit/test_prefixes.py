"""Pasted text folds as the export does: journalctl's text, collectors' and loggers' prefixes read off.

The journalctl text and its export are real (the lab's eight-rank crash, `journalctl -o
short-precise` and `-o json` of the same run); the wrapped forms are the real SGLang fixture's lines
as compose, CRI, docker's json-file, Python logging, ray and vLLM print them (every format in every
short variant, from the lab's own journalctl, is tests/lab/test_fold_text_lab.py).
"""

from __future__ import annotations

import json

import pytest

from cockpit.systemd.entry import UNKNOWN_PRIORITY
from cockpit.traceback import Traceback, fold_lines
from cockpit.traceback.prefixes import HELD, PrefixReader
from tests.conftest import FIXTURES, ROOT

DATA = ROOT / "tests" / "data" / "fold"
CRASH = (FIXTURES / "sglang" / "launch_server" / "launch_server-0.5.23-eagle3-topk4-drafttok3.txt").read_text()
SCHEDULER_LINES = (FIXTURES / "sglang" / "logs" / "scheduler-lines-0.5.23.log").read_text().splitlines()


def tracebacks(data: bytes) -> list[dict]:
    """Each traceback's reading, less what only a journal export can say (unit, time)."""

    def plain(x: object) -> object:
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items() if k not in ("unit", "start")}
        return [plain(v) for v in x] if isinstance(x, list) else x

    return [plain(r.to_json()) for r in fold_lines(data.splitlines()).records if isinstance(r, Traceback)]


def test_real_journalctl_text_of_eight_ranks_folds_as_their_export() -> None:
    export = tracebacks((DATA / "eight-ranks.export.jsonl").read_bytes())
    text = tracebacks((DATA / "eight-ranks.short-precise.txt").read_bytes())
    assert len(export) == 8 and len({t["pid"] for t in export}) == 8
    assert text == export  # by PID, lines interleaved as journald stored them


def test_the_same_text_without_prefixes_cannot_be_told_apart() -> None:
    """What the prefix layer is for: the bare messages of eight interleaved processes fold wrong."""
    bare = b"\n".join(
        line.split(b"]: ", 1)[1] for line in (DATA / "eight-ranks.short-precise.txt").read_bytes().splitlines()
    )
    assert tracebacks(bare) != tracebacks((DATA / "eight-ranks.export.jsonl").read_bytes())


def wrapped(lines: list[str], kind: str) -> list[str]:
    if kind == "compose":
        return [f"sglang-1  | {line}" if line else "sglang-1  |" for line in lines]
    if kind == "cri":
        return [f"2025-10-24T11:07:36.{i:09d}Z stderr F {line}" for i, line in enumerate(lines)]
    if kind == "docker":
        return [
            json.dumps({"log": line + "\n", "stream": "stderr", "time": "2025-10-24T11:07:36.123456789Z"})
            for line in lines
        ]
    if kind == "journalctl":
        return [f"May 25 19:34:29 dflash-train python[67732]: {line}" for line in lines]
    if kind == "logging":  # the first line through a logger, the traceback printed after it bare
        return [f"2025-10-24 11:07:36,123 - sglang.launch - ERROR - {lines[0]}", *lines[1:]]
    if kind == "ray":
        return [f"(WorkerDict pid=616, ip=10.0.0.7) {line}" for line in lines]
    assert kind == "vllm"
    return [f"(VllmWorkerProcess pid=185216) ERROR 03-05 05:40:33 [multiproc_executor.py:880] {line}" for line in lines]


@pytest.mark.parametrize("kind", ["compose", "cri", "docker", "journalctl", "logging", "ray", "vllm"])
def test_a_real_sglang_crash_wrapped_by_a_collector_or_logger_folds_as_it_was(kind: str) -> None:
    lines = CRASH.splitlines()
    bare = tracebacks(CRASH.encode())
    assert bare and bare[-1]["exception"] == "AssertionError"
    got = tracebacks("\n".join(wrapped(lines, kind)).encode())
    pid = {"journalctl": 67732, "ray": 616, "vllm": 185216}.get(kind)
    assert got == [{**t, "pid": pid, "chained": [{**c, "pid": pid} for c in t["chained"]]} for t in bare]


def test_a_cri_partial_line_and_a_split_docker_line_are_joined() -> None:
    cri = ["2025-10-24T11:07:36.1Z stderr P Traceback (most rec", "2025-10-24T11:07:36.2Z stderr F ent call last):"]
    docker = [
        json.dumps({"log": '  File "/x.py", line 1, in <mod', "stream": "stderr"}),
        json.dumps({"log": "ule>\n", "stream": "stderr"}),
        json.dumps({"log": "    boom()\n", "stream": "stderr"}),
        json.dumps({"log": "ValueError: bad\n", "stream": "stderr"}),
    ]
    [tb] = tracebacks("\n".join(cri + docker).encode())
    assert tb["lines"] == [
        "Traceback (most recent call last):",
        '  File "/x.py", line 1, in <module>',
        "    boom()",
        "ValueError: bad",
    ]
    assert tb["complete"] is True and tb["frames"][0]["function"] == "<module>"


def test_journalctls_indented_lines_of_a_multi_line_message_are_its_lines() -> None:
    text = (
        "Dec 03 11:44:42 me42 native[1264]: Traceback (most recent call last):\n"
        '                                     File "/x.py", line 1, in <module>\n'
        "                                       boom()\n"
        "                                   ValueError: bad\n"
        "                                   \n"
        "Dec 03 11:44:43 me42 other[7]:   an indented line of another process\n"
    )
    folded = fold_lines(text.encode().splitlines()).records
    tb = folded[0]
    assert isinstance(tb, Traceback) and tb.pid == 1264 and tb.exception == "ValueError" and tb.complete
    assert (
        tb.lines[1] == '  File "/x.py", line 1, in <module>' and tb.lines[-1] == ""
    )  # the blank line, indent read off
    assert folded[1].to_json()["text"] == "  an indented line of another process" and folded[1].pid == 7


def test_what_each_prefix_carries() -> None:
    reader = PrefixReader()
    journal = reader.read("2026-12-03T11:43:52.379854+0000 me42 python3[146]: hello")
    assert journal is not None and (journal.message, journal.pid, journal.host) == ("hello", 146, "me42")
    assert journal.time_us == 1796298232379854 and journal.priority == UNKNOWN_PRIORITY
    monday = reader.read("Mon 2026-12-07 11:43:52 UTC me42 python3[146]: hi")  # a weekday is no month
    assert monday is not None and monday.time_us == 1796643832000000
    unit = reader.read("Thu 2026-12-03 11:43:52 UTC me42 fold-chained.service[146]: hi")
    assert unit is not None and unit.unit == "fold-chained.service" and unit.time_us == 1796298232000000
    other = reader.read("Dec 03 11:43:52 gpu-b python3[146]: hi")
    assert other is not None and reader.entry(other).node == 1  # the same PID on another host: its own stream
    logged = PrefixReader().read("2025-10-24 11:07:36,123 - sglang - WARNING - careful")
    assert logged is not None and (logged.message, logged.priority) == ("careful", 4)
    assert PrefixReader().read("2025-10-24T11:07:36.1Z stdout P half") is HELD


@pytest.mark.parametrize(
    "line",
    [
        *SCHEDULER_LINES[:5],
        "[2026-12-03 11:44:32 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "ValueError: a lone exception line",
        "Loading safetensors checkpoint shards: 50% Completed | 1/2 [00:01<00:01,  1.2s/it]",
        "| name | value |",
        '  File "/x.py", line 1, in <module>',
    ],
)
def test_a_line_without_a_prefix_stays_as_it_is(line: str) -> None:
    assert PrefixReader().read(line) is None


def test_prefixed_noise_makes_no_record() -> None:
    """SGLang's own scheduler lines and a lone exception line, through every wrapper: lines only."""
    lines = [*SCHEDULER_LINES, "ValueError: not raised, only logged", "Warning: something"]
    for kind in ("compose", "cri", "docker", "journalctl", "ray", "vllm"):
        assert tracebacks("\n".join(wrapped(lines, kind)).encode()) == [], kind


# --- paste damage, mended where the meaning is certain (issue 27, point 2) ---------------------------


def crash_reading() -> dict:
    [tb] = [t for t in tracebacks(CRASH.encode()) if t["exception"] == "AssertionError"]
    return {k: tb[k] for k in ("frames", "exception", "message", "complete")}


def the_crash(text: str) -> dict:
    [tb] = [t for t in tracebacks(text.encode()) if t["exception"] == "AssertionError"]
    return {k: tb[k] for k in ("frames", "exception", "message", "complete")}


def test_frames_that_lost_their_indentation_fold_as_they_were() -> None:
    flat = "\n".join(line.lstrip() for line in CRASH.splitlines())
    assert the_crash(flat) == crash_reading()


def test_a_terminal_boxs_borders_are_taken_off() -> None:
    boxed = "\n".join(
        ["╭" + "─" * 140 + "╮", *(f"│ {line:<138} │" for line in CRASH.splitlines()), "╰" + "─" * 140 + "╯"]
    )
    assert the_crash(boxed) == crash_reading()


def test_two_blank_lines_before_a_chain_marker_keep_the_chain_whole() -> None:
    from tests.data.fold.crashes import chained
    from tests.data.fold.truth import describe_exception, printed

    try:
        chained()
    except Exception as e:  # noqa: BLE001  (the real exception, printed as Python prints it)
        exc = e
    lines = printed(exc)
    at = lines.index("During handling of the above exception, another exception occurred:")
    torn = [*lines[:at], "", *lines[at:]]  # a CUDA message's own newline: two blank lines before it
    [tb] = tracebacks("\n".join(torn).encode())
    assert tb["exception"] == "ValueError" and len(tb["chained"]) == len(describe_exception(exc)["chained"]) == 2


def test_a_closing_fence_is_not_part_of_the_message() -> None:
    lines = CRASH.rstrip("\n").splitlines()
    glued = "\n".join(["```", *lines[:-1], lines[-1] + "```"])
    assert the_crash(glued) == crash_reading()
    records = fold_lines(("\n".join(["```", *lines, "```", "after the paste"])).encode().splitlines()).records
    assert [r.to_json()["text"] for r in records[-2:]] == ["```", "after the paste"]  # the fence stays a line


def test_the_rank_is_read_where_a_progress_bar_was_glued_before_sglangs_prefix() -> None:
    bar = "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:01<00:00,  1.20it/s]"
    lines = [
        f"{bar}[2026-12-03 11:44:32 TP3] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 2876, in run',
        "    scheduler.event_loop_overlap()",
        "RuntimeError: boom",
    ]
    [tb] = tracebacks("\n".join(lines).encode())
    assert (tb["rank"], tb["exception"]) == ("TP3", "RuntimeError")


def test_what_is_not_certain_is_not_mended() -> None:
    lines = [
        "ValueError: a lone exception line",
        'File "/x.py", line 3, in f',  # an unindented frame line with no header above it
        "boom()",
        "",
        "",
        "During handling of the above exception, another exception occurred:",
    ]
    assert tracebacks("\n".join(lines).encode()) == []


def test_partial_lines_are_joined_per_stream_and_never_lost_at_the_end() -> None:
    lines = [
        "2025-10-24T11:07:36.1Z stdout P AAAA",
        "2025-10-24T11:07:36.2Z stderr F Traceback (most recent call last):",
        "2025-10-24T11:07:36.3Z stdout F BBBB",
        "2025-10-24T11:07:36.4Z stderr F",  # an empty line, its trailing space trimmed by the paste
        "2025-10-24T11:07:36.5Z stderr P the last words, cut off",
    ]
    records = fold_lines("\n".join(lines).encode().splitlines()).records
    texts = [line for r in records for line in (r.lines if isinstance(r, Traceback) else [r.text])]
    assert texts == ["Traceback (most recent call last):", "AAAABBBB", "", "the last words, cut off"]
    docker = [json.dumps({"log": "no newline yet", "stream": "stderr", "time": "12:00:00.5"})]  # an odd time
    assert [r.to_json()["text"] for r in fold_lines([d.encode() for d in docker]).records] == ["no newline yet"]


@pytest.mark.parametrize(
    "line",
    [
        "tp | 8",  # a table or a sentence, not compose's `service-1  | `
        "2025-06-10T12:00:00.123456Z ERROR sglang_router_rs::server: boom",  # a tracing line: no host called ERROR
    ],
)
def test_look_alikes_of_a_prefix_stay_as_they_are(line: str) -> None:
    assert PrefixReader().read(line) is None


def test_fold_json_says_the_host_each_record_came_from() -> None:
    """Two hosts' journalctl text, one PID on each: two records, each with its host in `--json`
    (the PID, time and rank were there; the host was read and not said)."""
    import io

    from cockpit.cli.fold import Printer, stream_fold

    lines = (DATA / "eight-ranks.short-precise.txt").read_bytes().splitlines()
    host = lines[1].split()[3]
    pid = lines[1].split(b"[", 1)[1].split(b"]", 1)[0]
    first = [line for line in lines if b"[" + pid + b"]:" in line]
    other = [line.replace(b" " + host + b" ", b" gpu-node-1 ", 1) for line in first]
    out = io.BytesIO()
    stream_fold(io.BufferedReader(io.BytesIO(b"\n".join(first + other) + b"\n")), Printer(out, as_json=True))
    said = [json.loads(line) for line in out.getvalue().splitlines()]
    folded = [(r["host"], r["pid"]) for r in said if r["kind"] == "traceback"]
    assert folded == [(host.decode(), int(pid)), ("gpu-node-1", int(pid))]
    assert {r["host"] for r in said} == {host.decode(), "gpu-node-1"}
