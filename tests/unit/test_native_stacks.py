"""Stacks that are not Python tracebacks fold into one record each (issue 27, point 3).

faulthandler's dump and torch's c10::Error are real (tests/data/fold/native/README.md says how
they were made with the lab's own torch). NCCL's watchdog needs GPUs: its lines are written here
in the format torch's ProcessGroupNCCL prints (the issue's own example), with invented numbers.
"""

from __future__ import annotations

import time

import pytest

from cockpit.traceback import Line, Traceback, fold_lines
from cockpit.traceback.native import NativeStack
from cockpit.traceback.render import summary
from tests.conftest import ROOT
from tests.data.fold.checks import assert_every_line_once

NATIVE = ROOT / "tests" / "data" / "fold" / "native"
LIB = "/opt/sglang/venv/lib/python3.11/site-packages/torch/lib"


def fold(text: str) -> list[Line | Traceback]:
    records = fold_lines(text.encode().splitlines()).records
    assert_every_line_once(text.splitlines(), records)
    return records


def only_stack(records: list[Line | Traceback]) -> NativeStack:
    [stack] = [r for r in records if isinstance(r, Traceback)]
    assert isinstance(stack, NativeStack)
    return stack


def test_a_real_faulthandler_dump_is_one_record_whose_frames_open() -> None:
    text = (NATIVE / "faulthandler-segv.txt").read_text()
    records = fold(text)
    stack = only_stack(records)
    assert stack.to_json()["kind"] == "faulthandler" and stack.complete
    assert summary(stack) == "Fatal Python error: Segmentation fault"
    assert [f.function for f in stack.frames][-2:] == ["<module>", "event_loop_overlap"]  # innermost last
    assert stack.failing_frame is not None and (stack.failing_frame.file, stack.failing_frame.line) == (
        "/tmp/segv.py",
        11,
    )
    k = stack.failing_frame_line()  # where Enter lands: the current thread's innermost frame
    assert stack.lines[k] == '  File "/tmp/segv.py", line 11 in event_loop_overlap'
    assert stack.frame_of_line(3) == (stack, 3)  # the other thread's frames open too
    assert records[-1].text == "Segmentation fault"  # the shell's line after it stays a line


def test_a_stack_printed_without_a_prefix_takes_the_rank_its_process_said_last() -> None:
    """faulthandler writes its dump from C, with no SGLang prefix: the row had no rank though the
    same PID's lines just before said TP3. Another rank's lines between do not lend it theirs."""
    dump = [line for line in (NATIVE / "faulthandler-segv.txt").read_text().splitlines() if line]
    said = "Dec 03 10:00:0{} gpu1 python[{}]: {}"
    text = [
        said.format(0, 4242, "[2026-12-03 10:00:00 TP3] Load weight end. type=LlamaForCausalLM"),
        said.format(1, 4243, "[2026-12-03 10:00:01 TP5] Load weight end. type=LlamaForCausalLM"),
        *(said.format(2, 4242, line) for line in dump),
        said.format(3, 4243, "[2026-12-03 10:00:03 TP5] Memory pool end."),
    ]
    stack = only_stack(fold_lines("\n".join(text).encode().splitlines()).records)
    assert (stack.pid, stack.rank, stack.to_json()["rank"]) == (4242, "TP3", "TP3")
    assert only_stack(fold("\n".join(dump))).rank is None  # nothing said it: no rank is made up


def test_the_dump_as_the_journal_holds_it_without_blank_lines() -> None:
    lines = [line for line in (NATIVE / "faulthandler-segv.txt").read_text().splitlines() if line]
    stack = only_stack(fold("\n".join(lines)))
    assert len(stack.frames) == 6 and stack.message == "Segmentation fault"


def test_a_real_c10_error_through_terminate_is_one_record_with_its_cpp_frames() -> None:
    stack = only_stack(fold((NATIVE / "c10-error-terminate.txt").read_text()))
    data = stack.to_json()
    assert (data["kind"], data["exception"]) == ("cpp", "c10::Error")
    assert data["message"] == "draft model hidden size 4096 does not match the target's 7168"
    assert len(data["cpp_frames"]) == 7 and data["cpp_frames"][0].startswith("frame #0: c10::Error::Error(")
    assert data["frames"] == [] and stack.complete


def test_a_c10_error_caught_by_python_stays_one_traceback_with_its_cpp_lines() -> None:
    text = (NATIVE / "c10-error-in-python.txt").read_text()
    [tb] = [r for r in fold(text) if isinstance(r, Traceback)]
    assert not isinstance(tb, NativeStack) and tb.exception == "RuntimeError"
    assert tb.lines[-2].startswith("#30 _start from") and "C++ CapturedTraceback:" in tb.lines  # and a blank


def nccl_rank(rank: int, seq: int = 808) -> list[str]:
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    work = f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000)"
    at = f"[rank{rank}]:[E1203 10:00:0{rank}.123456789 ProcessGroupNCCL.cpp:"
    return [
        f"{at}616] [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for 600021 milliseconds "
        "before timing out.",
        f"{at}1785] {pg} Exception (either an error or timeout) detected by watchdog at work: {seq}, last "
        f"enqueued NCCL work: {seq + 2}, last completed NCCL work: {seq - 1}.",
        f"{at}630] {pg} To avoid data inconsistency, we are taking the entire process down.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  {pg} Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog "
        f"caught collective operation timeout: {work} ran for 600021 milliseconds before timing out.",
        "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 "
        "(most recent call first):",
        f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f00aa in {LIB}/libc10.so)",
        f"frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout() + 0x1e1 (0x7f00bb in {LIB}/libtorch_cuda.so)",
        "frame #2: clone + 0x44 (0x7f00cc in /lib/x86_64-linux-gnu/libc.so.6)",
    ]


def test_an_nccl_watchdog_timeout_says_which_collective_and_rank() -> None:
    text = "\n".join(
        ["[2026-12-03 10:00:00 TP3] Decode batch. #running-req: 4", *nccl_rank(3), "Fatal Python error: Aborted"]
    )
    records = fold(text)
    stack = [r for r in records if isinstance(r, NativeStack)]
    assert [s.kind for s in stack] == ["nccl", "faulthandler"]  # the abort's own dump after it
    data = stack[0].to_json()
    assert data["rank"] == "rank3" and data["exception"] == "NCCL watchdog timeout"
    assert data["collective"] == {"op": "ALLREDUCE", "seq": 808, "ran_ms": 600021, "timeout_ms": 600000}
    assert summary(stack[0]) == "rank3 NCCL watchdog timeout: ALLREDUCE SeqNum=808 ran 600021 ms (timeout 600000 ms)"
    assert len(stack[0].lines) == 9 and len(data["cpp_frames"]) == 3


def test_eight_ranks_timing_out_in_journalctl_text_fold_one_record_a_rank() -> None:
    rows = [nccl_rank(r) for r in range(8)]
    text = "\n".join(
        f"Dec 03 10:00:0{i % 10} gpu-a python3[{4100 + r}]: {line}"
        for i, group in enumerate(zip(*rows, strict=True))
        for r, line in enumerate(group)
    )
    stacks = [r for r in fold_lines(text.encode().splitlines()).records if isinstance(r, NativeStack)]
    assert sorted(s.rank for s in stacks) == [f"rank{r}" for r in range(8)]
    assert all(len(s.lines) == 9 and s.pid == 4100 + int(s.rank[4:]) for s in stacks)


def test_a_cuda_error_in_a_cpp_exception_is_a_cuda_record() -> None:
    text = "\n".join(
        [
            "terminate called after throwing an instance of 'c10::Error'",
            "  what():  CUDA error: an illegal memory access was encountered",
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
            "might be incorrect.",
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:42 (most "
            "recent call first):",
            f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f00aa in {LIB}/libc10.so)",
        ]
    )
    stack = only_stack(fold(text))
    assert stack.to_json()["kind"] == "cuda" and stack.message == "CUDA error: an illegal memory access was encountered"
    assert len(stack.lines) == 6


def test_lines_that_only_mention_these_words_stay_lines() -> None:
    text = "\n".join(
        [
            "[2026-12-03 10:00:00] the watchdog is on (Watchdog caught nothing yet)",
            "what():  not after a terminate line",
            "frame #0: a frame line with nothing before it",
            "Thread 0x00007f (most recent call first):",
            "[2026-12-03 10:00:01] Exception raised from nowhere, said a log line",
        ]
    )
    assert all(isinstance(r, Line) for r in fold(text))


def test_real_cuda_errors_from_an_h200_fold_whole_and_say_which_cuda_error() -> None:
    cuda = ROOT / "tests" / "data" / "fold" / "cuda"
    assert_assert = fold((cuda / "index-assert.txt").read_text())
    [tb] = [r for r in assert_assert if isinstance(r, Traceback)]
    data = tb.to_json()
    assert (data["exception"], data["cuda_error"]) == ("torch.AcceleratorError", "device-side assert triggered")
    assert data["complete"] and data["lines"][-2].startswith("Compile with `TORCH_USE_CUDA_DSA`")
    assert data["lines"][-1] == ""  # torch's message ends in a newline: the blank line is its own
    assert isinstance(assert_assert[0], Line) and "Assertion `-sizes[i] <= index" in assert_assert[0].text
    records = fold((cuda / "illegal-address.txt").read_text())
    kinds = [(r.exception, r.to_json().get("cuda_error")) if isinstance(r, Traceback) else r.text for r in records]
    assert kinds == [
        ("torch.AcceleratorError", "an illegal memory access was encountered"),
        ("cupy_backends.cuda.api.driver.CUDADriverError", None),
        "Exception ignored in: 'cupy.cuda.function.Module.__dealloc__'",  # Python's own header: not a message
        ("cupy_backends.cuda.api.driver.CUDADriverError", None),
    ]


# --- what a review found (each failed before its mend) ------------------------------------------------


def test_a_cpp_records_message_stops_at_a_log_line_and_a_traceback() -> None:
    text = "\n".join(
        [
            "terminate called after throwing an instance of 'std::bad_alloc'",
            "  what():  std::bad_alloc",
            "[2026-12-03 11:44:32] Received sigquit from a child process. It usually means the child failed.",
            "Traceback (most recent call last):",
            '  File "/x.py", line 3, in run',
            "RuntimeError: NCCL error",
        ]
    )
    records = fold(text)
    assert [type(r).__name__ for r in records] == ["NativeStack", "Line", "Traceback"]
    assert records[2].exception == "RuntimeError"


@pytest.mark.parametrize(
    "line",
    [
        "[rank0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 6 "
        "milliseconds",  # no `]:`
        "[PG " * 25_000 + "Watchdog caught collective operation timeout: WorkNCCL(",  # a search that rescans
        "WorkNCCL(SeqNum=1, OpType=A, " * 3_450 + "Watchdog caught collective operation timeout: WorkNCCL(",
    ],
)
def test_an_odd_or_long_nccl_line_is_read_without_error_or_backtracking(line: str) -> None:
    started = time.process_time()
    [record] = fold_lines([line.encode()]).records
    record.to_json()
    assert time.process_time() - started < 2.0  # the quadratic searches took 5 to 25 s
    assert isinstance(record, NativeStack) and record.kind == "nccl"


def test_unindented_frames_whose_code_is_a_bare_keyword() -> None:
    """Python 3.11's own output of a @contextmanager chain, its indentation lost in a paste."""
    lines = [
        "Traceback (most recent call last):",
        'File "/tmp/r2.py", line 5, in guard',
        "yield",
        'File "/tmp/r2.py", line 10, in f',
        'raise ValueError("x")',
        "ValueError: x",
    ]
    [tb] = [r for r in fold("\n".join(lines)) if isinstance(r, Traceback)]
    assert (tb.exception, [f.code for f in tb.frames]) == ("ValueError", ["yield", 'raise ValueError("x")'])
