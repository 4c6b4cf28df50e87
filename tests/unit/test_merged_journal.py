"""A deployment's journals merged into one pane: the same PIDs on two hosts fold into separate
tracebacks, each complete; `node:1` filters; the nodes' backlogs arrive as one batch in time
order (the live merge over two labs: tests/lab/test_deployment_app_lab.py)."""

from __future__ import annotations

import asyncio
import copy

from cockpit.session import journal_feed
from cockpit.session.journal_feed import MergedStart
from cockpit.systemd.entry import JournalEntry
from cockpit.traceback.journal_rows import Filter, JournalRows
from cockpit.traceback.model import Traceback
from tests.unit.test_journal_rows import entries


def on_node(batch: list[JournalEntry], node: int, shift_us: int = 0) -> list[JournalEntry]:
    """The lab's journal as another host with the same PIDs (a container's PIDs are alike) sent it."""
    out = []
    for entry in batch:
        moved = copy.copy(entry)
        moved.node = node
        moved.realtime_us = (entry.realtime_us or 0) + shift_us
        moved.invocation_id = f"n{node}{entry.invocation_id}"[:32] if entry.invocation_id else None  # its own starts
        out.append(moved)
    return out


def test_the_same_pids_on_two_nodes_fold_into_their_own_tracebacks() -> None:
    crash = entries("journal-crash8.jsonl")
    alone = JournalRows()
    alone.add(crash)
    one = [(tb.rank, tb.lines) for tb in alone.records if isinstance(tb, Traceback)]
    merged = JournalRows()
    merged.nodes = 2
    other = on_node(crash, 1)
    interleaved = [e for pair in zip(crash, other, strict=True) for e in pair]  # line by line, as two links deliver
    merged.add(interleaved)
    tbs = [r for r in merged.records if isinstance(r, Traceback)]
    assert len(tbs) == 2 * len(one) and all(tb.complete for tb in tbs)
    for node in (0, 1):
        assert [(tb.rank, tb.lines) for tb in tbs if tb.node == node] == one  # each node's whole, none mixed
    # Each node's restarts are its own: the nodes' starts interleaving is not a restart.
    said = sorted(merged.separators.values())
    assert len(alone.separators) == 1 and len(said) == 2, said
    assert said[0] == f"n0 {next(iter(alone.separators.values()))}" and said[1].startswith("n1 restart · invocation n1")
    merged.filter = Filter.parse("node:1")
    merged.rebuild()
    assert merged.rows and all(
        merged.record(n).node == 1 for n, _ in merged.rows if isinstance(merged.record(n), Traceback)
    )
    assert Filter.parse("node:n1").node == 1 and Filter.parse("node:1 tb").tracebacks_only


def test_the_backlogs_are_one_batch_in_time_order_and_later_batches_pass_at_once() -> None:
    delivered: list[list[JournalEntry]] = []
    head = [JournalEntry("head", realtime_us=t) for t in (10, 30, 50)]
    other = [JournalEntry("other", realtime_us=t) for t in (20, 40)]

    async def run() -> None:
        start = MergedStart(2, delivered.append)
        first = asyncio.ensure_future(start.batch(0, head))
        await asyncio.sleep(0.05)
        assert delivered == []  # node 0's backlog waits for node 1's
        await start.batch(1, other)
        await first
        await start.batch(1, [JournalEntry("late", realtime_us=60)])

    asyncio.run(run())
    assert [[(e.message, e.realtime_us, e.node) for e in batch] for batch in delivered] == [
        [("head", 10, 0), ("other", 20, 1), ("head", 30, 0), ("other", 40, 1), ("head", 50, 0)],
        [("late", 60, 1)],
    ]


def test_a_node_that_never_answers_holds_the_others_backlog_only_a_while(monkeypatch) -> None:
    monkeypatch.setattr(journal_feed, "MERGE_WAIT_S", 0.1)
    delivered: list[list[JournalEntry]] = []

    async def run() -> None:
        await MergedStart(2, delivered.append).batch(0, [JournalEntry("head", realtime_us=1)])

    asyncio.run(run())
    assert [[e.message for e in batch] for batch in delivered] == [["head"]]
