"""The session's journal pipeline over recorded data: one fold per batch, fanned out to every
subscriber, and a subscriber's failure kept from the others."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cockpit.config import Config
from cockpit.session import JournalBatch, Listener, RecordedSession
from cockpit.systemd.entry import JournalEntry, parse_json_line
from cockpit.targets import Target
from cockpit.traceback.model import Traceback

DATA = Path(__file__).resolve().parents[1] / "data"
TARGET = Target("cockpit-lab", "sglang-demo.service")


def entries(name: str) -> list[JournalEntry]:
    return [parse_json_line(line) for line in (DATA / name).read_text().splitlines()]


class Heard(Listener):
    def __init__(self) -> None:
        self.batches: list[JournalBatch] = []
        self.points: list[float] = []
        self.failures: list[str] = []

    def journal(self, batch: JournalBatch) -> None:
        self.batches.append(batch)

    def throughput(self, points) -> None:
        self.points += [p.gen_throughput for p in points]
        self.calls = getattr(self, "calls", 0) + 1

    def failed(self, what: str, detail: str) -> None:
        self.failures.append(f"{what}: {detail}")


def test_each_batch_is_folded_once_and_every_subscriber_reads_the_same_rows() -> None:
    session = RecordedSession(Config(), TARGET)
    heard = session.listener = Heard()
    crash = entries("journal-crash8.jsonl")
    folds = []
    add = session.rows.add

    def counting_add(batch: list[JournalEntry]) -> int:
        folds.append(len(batch))
        return add(batch)

    session.rows.add = counting_add  # type: ignore[method-assign]
    half = len(crash) // 2
    session.deliver(crash[:half])
    session.deliver(crash[half:])
    assert folds == [half, len(crash) - half]  # once per batch, whoever listens
    assert [b.entries for b in heard.batches] == [crash[:half], crash[half:]]
    assert heard.batches[0].rows_before == 0 and heard.batches[1].rows_before > 0
    tracebacks = [tb for _, tb in session.rows.tracebacks()]
    assert len(tracebacks) == 8 and all(isinstance(tb, Traceback) for tb in tracebacks)
    assert {tb.rank for tb in tracebacks} == {f"TP{i}" for i in range(8)}
    # the incident the session would write from memory holds the same tracebacks
    assert [tb.rank for tb in session.incident_in_memory().tracebacks] == [tb.rank for tb in reversed(tracebacks)]


def test_decode_lines_reach_the_throughput_listener() -> None:
    session = RecordedSession(Config(), TARGET)
    heard = session.listener = Heard()
    decode = parse_json_line(
        '{"MESSAGE":"[2026-11-30 10:00:00 TP0] Decode batch, #running-req: 32, #token: 9, token usage: 0.13, '
        'cuda graph: True, gen throughput (token/s): 4351.94, #queue-req: 3","PRIORITY":"6","_PID":"142",'
        '"__REALTIME_TIMESTAMP":"1796032472855077","__CURSOR":"c1"}'
    )
    session.deliver([decode, *entries("journal-crash8.jsonl")[:5]])
    assert heard.points == [4351.94]


def test_a_failing_subscriber_is_reported_and_the_others_still_get_the_batch() -> None:
    session = RecordedSession(Config(), TARGET)
    heard = session.listener = Heard()
    later: list[int] = []

    def broken(batch: JournalBatch) -> None:
        raise RuntimeError("a drawing bug")

    session.journal.subscribe(broken)
    session.journal.subscribe(lambda batch: later.append(len(batch.entries)))
    crash = entries("journal-crash8.jsonl")
    session.deliver(crash)
    assert later == [len(crash)]
    assert len(heard.batches) == 1
    assert len(heard.failures) == 1 and "a drawing bug" in heard.failures[0]


def test_unsubscribing_stops_the_batches() -> None:
    session = RecordedSession(Config(), TARGET)
    got: list[int] = []
    unsubscribe = session.subscribe(lambda batch: got.append(len(batch)))  # the restart watch's view
    crash = entries("journal-crash8.jsonl")
    session.deliver(crash[:10])
    unsubscribe()
    session.deliver(crash[10:20])
    assert got == [10]


async def test_stop_goes_on_without_a_task_that_ignores_its_cancel_and_says_where_it_waits(monkeypatch) -> None:
    """A quit never hangs on a task that will not end: it is named, with where it waits."""
    import asyncio
    import time

    from cockpit.session import session as session_module

    monkeypatch.setattr(session_module, "STOP_WAIT_S", 0.2)
    session = RecordedSession(Config(), TARGET)
    heard = session.listener = Heard()
    release = asyncio.Event()

    async def deaf() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # a task that swallows its cancel

    async def polite() -> None:
        await asyncio.sleep(60)

    stuck, ended = session._spawn(deaf(), "the deaf task"), session._spawn(polite(), "a polite task")
    await asyncio.sleep(0)
    started = time.monotonic()
    await session.stop()
    assert time.monotonic() - started < 2
    assert ended.cancelled() and not stuck.done()
    assert len(heard.failures) == 1, heard.failures
    assert heard.failures[0].startswith("the deaf task: still running 0.2 s after it was stopped, waiting in wait ("), (
        heard.failures
    )
    release.set()
    await stuck


def test_a_deployments_timeline_is_its_nodes_not_its_name() -> None:
    """Two configs' `k26` on different hosts: each its own timeline (they once shared one file)."""
    from cockpit.config import DeploymentConfig, UnitConfig
    from cockpit.rollout.group import attempt_log

    def k26(*hosts: str) -> Config:
        units = {
            f"k26-node{i}": UnitConfig(f"k26-node{i}", h, f"sglang-k26-node{i}.service") for i, h in enumerate(hosts)
        }
        return Config(units=units, deployments={"k26": DeploymentConfig("k26", tuple(units))})

    mine, theirs = (
        RecordedSession(k26("gpu-a", "gpu-b"), None, group="k26"),
        RecordedSession(k26("gpu-c", "gpu-d"), None, group="k26"),
    )
    attempt_log("k26", [t for _, t in mine.nodes]).new(flags_before={}, flags_after={}, texts={}, previous_texts={})
    assert [a.number for a in mine.attempts()] == [1]
    assert theirs.attempts() == []


class GpusHeard(Listener):
    def __init__(self) -> None:
        self.uses: list = []

    def gpus(self, use) -> None:
        self.uses.append(use)


def test_a_server_on_the_cpu_is_shown_no_gpu_holder_as_in_its_way() -> None:
    """The lab's real SGLang on --device cpu had all eight of the host's GPU processes marked ⚠."""
    from cockpit.systemd.gpu_use import Gpu, GpuProcess, GpuUse
    from cockpit.systemd.unit import load_unit

    unit_file = "/etc/systemd/system/sglang-demo.service"
    text = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m --device {}\n"
    table = GpuUse([Gpu(0, "GPU-0", 70000, 143771)], [GpuProcess(4242, "python", 70000, 0, "GPU-0")])
    for device, shown in (("cpu", []), ("cuda", [4242])):
        session, heard = RecordedSession(Config(), TARGET), GpusHeard()
        session.listener = heard
        session.use_unit(load_unit({unit_file: text.format(device)}, unit_file))
        session._show_gpus(table)
        assert [p.pid for p in heard.uses[-1].processes] == shown
    assert heard.uses[0].missing is None
    session.use_unit(load_unit({unit_file: text.format("cpu")}, unit_file))
    session._show_gpus(table)
    assert heard.uses[-1].missing == "the server runs on --device cpu, not on the GPUs"


async def test_a_load_run_before_the_unit_says_where_it_listens_is_refused_not_sent_to_port_30000() -> None:
    """It loaded SGLang's default 127.0.0.1:30000, another unit's server in the lab, and saved
    the run as this unit's."""
    import pytest

    from cockpit.errors import CockpitError

    session = RecordedSession(Config(), TARGET)
    with pytest.raises(CockpitError, match="cannot tell where sglang-demo.service listens"):
        await session.load_run(lambda *a: None, lambda level: None, lambda i, r: None)


def test_a_gpu_holder_of_the_start_before_is_not_warned_of_from_a_table_read_before_the_restart() -> None:
    """The ⚠ for the last start's processes stayed about 5 s after every restart, for processes
    already gone: a table read before the new start was seen no longer says they are there; a
    table read after it does, and the poll is asked to read one at once."""
    from cockpit.systemd.gpu_use import Gpu, GpuProcess, GpuUse
    from cockpit.systemd.status import UnitStatus

    def running(invocation: str) -> UnitStatus:
        return UnitStatus(
            TARGET.unit, TARGET.host, active_state="active", sub_state="running", invocation_id=invocation
        )

    cgroup = f"/system.slice/{TARGET.unit}"
    old = GpuProcess(1140, "python", 122000, 0, "GPU-0", cgroup=cgroup, ppid=1, invocation="a" * 32)
    session, heard = RecordedSession(Config(), TARGET), GpusHeard()
    session.listener = heard
    session._status(running("a" * 32))
    session._status(running("b" * 32))  # restarted: the table below was read before this was seen
    assert session._gpus_again.is_set()  # the poll reads again now, not in 5 s
    before = GpuUse([Gpu(0, "GPU-0", 122000, 143771)], [old], read_at=session._start_seen_at - 1)
    session._show_gpus(before)
    assert heard.uses[-1].processes == []
    after = replace(before, read_at=session._start_seen_at + 1)  # it outlived the start: said
    session._show_gpus(after)
    assert [p.pid for p in heard.uses[-1].processes] == [1140]
    assert heard.uses[-1].processes[0].outside(session.gpu_view())


def test_the_group_line_says_the_step_the_cockpit_is_at() -> None:
    """Issue 26, item 5: a group restart showed nothing while node 1 sat 100 s in stop-sigterm;
    the group's line says the step and how long it has taken, and goes back once it is done."""
    import asyncio

    from cockpit.sglang.server.health import DOWN, Readiness

    session = RecordedSession(Config(), TARGET)
    down = Readiness(DOWN, "n1 is down while n0 runs")
    assert session._said_with_step(down) == down

    async def restart() -> None:
        async with session._changing_group():
            session._group_step_began("stopping every node")
            said = session._said_with_step(down)
            assert said.state == DOWN
            assert said.reason == "the cockpit is stopping every node (0 s) · n1 is down while n0 runs", said

    asyncio.run(restart())
    assert session._said_with_step(down) == down
