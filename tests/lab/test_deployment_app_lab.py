"""The app opened on a two-node deployment (node 0 in the test lab, node 1 in a second lab):
one key starts the group, the status pane shows every node and the group ready; node 1 dying
of an exception while node 0 runs is shown as the group broken within 5 s of its end (the lab's
own timestamp), with node 1's traceback in the offer to restart; one key restarts the group,
and the deployment's timeline holds one attempt per group restart."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from cockpit.config import Config, load
from cockpit.sglang.deployments.nodes_status import BROKEN
from cockpit.sglang.server.health import READY
from cockpit.traceback.model import Line
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.attempts import AttemptsPane
from cockpit.ui.panes.journal import TIME_WIDTH, JournalView
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.screens.confirm import ConfirmModal
from tests.conftest import LabHandle
from tests.lab.standin_units import deployment_config, standin_unit
from tests.lab.test_multinode_standin_lab import NODES, PORT, launch, two_nodes

CRASH_AFTER_S = 20  # node 1's ranks hit an exception this long after its schedulers run


@contextlib.contextmanager
def stopped_nodes(lab: LabHandle, node1: LabHandle) -> Iterator[None]:
    """Both nodes' units written and not started; node 1's ranks set to crash once up."""
    with (
        standin_unit(lab, NODES[0], PORT, flags=launch(lab, 0), restart=False, start=False),
        standin_unit(
            node1,
            NODES[1],
            PORT,
            flags=launch(lab, 1),
            env=f"COCKPIT_STANDIN_CRASH_AFTER_S={CRASH_AFTER_S}",
            restart=False,
            start=False,
        ),
    ):
        yield


def k26(lab: LabHandle, node1: LabHandle, tmp_path: Path) -> Config:
    """The config whose [deployments.k26] is node 0 in the test lab and node 1 in the second."""
    nodes = [("k26-node0", lab, NODES[0]), ("k26-node1", node1, NODES[1])]
    return load(deployment_config(tmp_path / "cockpit.toml", "k26", nodes))


async def _until(what: str, seconds: float, ok, seen=lambda: "") -> None:
    deadline = time.monotonic() + seconds
    while not ok():
        assert time.monotonic() < deadline, f"{what}: {seen()}"
        await asyncio.sleep(0.1)


def _init_lines(view: JournalView) -> list[tuple[int, str]]:
    """Each node's last rank's `Init parallel ends.` (node 0's TP7, node 1's TP15): (its node, its text)."""
    found = []
    for number, _ in view.model.rows:
        record = view.model.record(number)
        if isinstance(record, Line) and any(f"TP{r}] Init parallel ends." in record.text for r in (7, 15)):
            found.append((record.entry.node, record.text))
    return found[-2:]


def _outcomes(app: CockpitApp) -> list[str]:
    return [a.outcome for a in app.session.attempts()]


async def test_the_app_starts_the_group_and_says_at_once_when_node_1_is_lost(
    lab: LabHandle, node1: LabHandle, tmp_path: Path
) -> None:
    with stopped_nodes(lab, node1):
        app = CockpitApp(k26(lab, node1, tmp_path), None, group="k26")
        async with app.run_test(size=(160, 40)) as pilot:
            pane = app.query_one(StatusPane)
            await _until("the group's first status", 30, lambda: pane.group is not None)
            await pilot.press("r")
            assert isinstance(app.screen, ConfirmModal) and "deployment k26" in app.screen.title_text
            await pilot.press("y")
            await _until(
                "the group ready",
                120,
                lambda: pane.group is not None and pane.group[1].state == READY,
                lambda: (pane.group, app.session.attempts()),
            )
            drawn = str(pane.render())
            assert "deployment k26: ready ✓" in drawn, drawn
            lines = [" ".join(line.split()) for line in drawn.splitlines()]
            assert f"n0 k26-node0 {NODES[0]} on {lab.name} active (running) ready ✓" in "\n".join(lines), drawn
            assert f"n1 k26-node1 {NODES[1]} on {node1.name} active (running) ready ✓" in "\n".join(lines), drawn
            assert "degraded" not in drawn, drawn  # node 0's own line agrees (its census came before its ready line)
            await _until("the group restart to finish", 30, lambda: _outcomes(app) == ["ready"])
            view = app.query_one(JournalView)
            await _until("both nodes' init lines", 20, lambda: len(_init_lines(view)) == 2, lambda: _init_lines(view))
            (head, head_text), (other, other_text) = sorted(_init_lines(view))
            assert (head, other) == (0, 1) and "TP7]" in head_text and "TP15]" in other_text
            drawn = [view.render_line(y).text for y in range(view.scrollable_content_region.height)]
            rows = [t[TIME_WIDTH:] for t in drawn if t.strip() and not t.startswith("────")]  # not a restart's rule
            assert rows and all(t.startswith(("n0 ", "n1 ")) for t in rows), drawn  # every row names its node

            await _until("node 1 lost", CRASH_AFTER_S + 30, lambda: pane.group[1].state == BROKEN)
            seen = time.time()
            props = node1.ssh(
                "systemctl", "show", "-p", "ActiveState,InactiveEnterTimestamp", "--timestamp=unix", NODES[1]
            )
            state = dict(line.split("=", 1) for line in props.stdout.split())
            ended = float(state["InactiveEnterTimestamp"].lstrip("@"))
            assert state["ActiveState"] in ("failed", "inactive") and seen - ended < 5, (seen - ended, state)
            assert f"k26-node1 ({NODES[1]} on {node1.name}) is down" in pane.group[1].reason
            assert "deployment k26: broken ✗" in str(pane.render())
            await _until("the offer to restart", 10, lambda: isinstance(app.screen, ConfirmModal))
            modal = app.screen
            assert isinstance(modal, ConfirmModal) and modal.title_text == "Deployment k26 is broken"
            assert "k26-node1's last traceback:" in modal.body and "StandinCudaError" in modal.body, modal.body

            dropin = f"/etc/systemd/system/{NODES[1]}.d"  # node 1 mended before the group restarts
            node1.ssh("mkdir", "-p", dropin)
            node1.ssh("tee", f"{dropin}/mend.conf", input="[Service]\nEnvironment=COCKPIT_STANDIN_CRASH_AFTER_S=0\n")
            await pilot.press("y")
            await _until("the second group attempt", 120, lambda: _outcomes(app)[1:] not in ([], ["pending"]))
            attempts = app.session.attempts()
            assert [a.outcome for a in attempts] == ["ready", "ready"], [a.detail for a in attempts]
            assert attempts[-1].note == "group restart of k26-node0, k26-node1"
            await _until("the group ready again", 30, lambda: pane.group[1].state == READY)
            await pilot.press("h")
            await pilot.pause()
            timeline = app.query_one(AttemptsPane)
            rows = [str(timeline.get_option_at_index(i).prompt) for i in range(timeline.option_count)]
            assert len(rows) == 2 and all("group restart of k26-node0, k26-node1" in row for row in rows), rows

            # A restart of a running group stops node 0 while node 1 still runs: its own doing,
            # shown in the group's lines but never offered as a node lost.
            await pilot.press("escape", "r", "y")
            offers, deadline = [], time.monotonic() + 120
            while _outcomes(app)[2:] in ([], ["pending"]):
                if isinstance(app.screen, ConfirmModal):
                    offers.append(app.screen.title_text)
                assert time.monotonic() < deadline, "the third group attempt"
                await asyncio.sleep(0.1)
            assert _outcomes(app) == ["ready", "ready", "ready"] and offers == [], offers


async def test_one_edit_in_the_flag_editor_is_written_to_every_node_and_restarts_the_group(
    lab: LabHandle, node1: LabHandle, tmp_path: Path
) -> None:
    """`e`, a flag changed on node 0's form, `w`: a diff per node, then every node written (each
    keeps its --node-rank) and the group restarted as one attempt that records the change."""
    from cockpit.ui.panes.flags import FlagsPane
    from cockpit.ui.screens.write import GroupWriteModal

    with two_nodes(lab, node1):
        app = CockpitApp(k26(lab, node1, tmp_path), None, group="k26")
        async with app.run_test(size=(160, 40)) as pilot:
            pane = app.query_one(StatusPane)
            await _until("the group ready", 90, lambda: pane.group is not None and pane.group[1].state == READY)
            await _until("node 0's unit read", 30, lambda: app.session.unit is not None)
            await pilot.press("e")
            flags = app.query_one(FlagsPane)
            assert flags.edited is not None
            flags.edited = flags.edited.set_flag("--watchdog-timeout", "7")
            await pilot.press("w")
            await _until("the group's write modal", 30, lambda: isinstance(app.screen, GroupWriteModal))
            modal = app.screen
            assert [w.node for w in modal.writes] == ["k26-node0", "k26-node1"]
            assert all(w.edited.flag_values()["--watchdog-timeout"] == "7" for w in modal.writes)
            assert [w.edited.flag_values()["--node-rank"] for w in modal.writes] == ["0", "1"]
            await pilot.press("y")
            await _until("the group attempt", 120, lambda: _outcomes(app) not in ([], ["pending"]))
            [attempt] = app.session.attempts()
            assert attempt.outcome == "ready", attempt.detail
            assert attempt.diff() == [("--watchdog-timeout", "5", "7")]
            for handle, unit, rank in ((lab, NODES[0], 0), (node1, NODES[1], 1)):
                text = handle.ssh("cat", f"/etc/systemd/system/{unit}").stdout
                assert "--watchdog-timeout 7" in text and f"--node-rank {rank}" in text, text
