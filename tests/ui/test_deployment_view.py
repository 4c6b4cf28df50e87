"""The app on a deployment, from recorded states: the status pane's group line and node lines,
and the group turning broken: the offer to restart names the lost node and shows its traceback
(the live group over two labs: tests/lab/test_deployment_app_lab.py)."""

from __future__ import annotations

from dataclasses import replace

from cockpit.config import Config, DeploymentConfig, HostConfig, UnitConfig
from cockpit.sglang.deployments.nodes_status import BROKEN
from cockpit.sglang.server.health import DOWN, READY, Readiness
from cockpit.systemd.entry import parse_json_line
from cockpit.traceback.fold import fold_entries, last_with_frames
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.screens.confirm import ConfirmModal
from tests.ui.test_app_shell import DATA, recorded_entries, recorded_status

CONFIG = Config(
    hosts={"gpu-a": HostConfig(name="gpu-a"), "gpu-b": HostConfig(name="gpu-b")},
    units={
        "k26-node0": UnitConfig(name="k26-node0", host="gpu-a", unit="sglang-k26.service"),
        "k26-node1": UnitConfig(name="k26-node1", host="gpu-b", unit="sglang-k26.service"),
    },
    deployments={"k26": DeploymentConfig(name="k26", nodes=("k26-node0", "k26-node1"))},
)
BROKEN_REASON = (
    "k26-node1 (sglang-k26.service on gpu-b) is down: the unit is failed (failed, exited 1); k26-node0 still "
    "runs, and its ranks block in their next collective until the watchdogs end them: restart the group"
)


def nodes(node1_down: bool) -> list:
    head = recorded_status(unit="sglang-k26.service", host="gpu-a", readiness=READY)
    other = recorded_status(unit="sglang-k26.service", host="gpu-b", main_pid=4242, readiness=READY)
    if node1_down:
        other = replace(other, active_state="failed", sub_state="failed", main_pid=0, readiness=DOWN)
    return [("k26-node0", head), ("k26-node1", other)]


def crash_traceback():
    entries = [parse_json_line(line) for line in (DATA / "journal-crash8.jsonl").read_text().splitlines()]
    return last_with_frames(fold_entries(entries))


def test_the_group_and_its_nodes_are_drawn_and_a_broken_group_is_offered_a_restart(snap_compare) -> None:
    app = CockpitApp(CONFIG, None, live=False, group="k26")
    traceback = crash_traceback()
    assert traceback is not None

    async def run_before(pilot) -> None:
        app.query_one(StatusPane).show_status(nodes(False)[0][1])
        app.session.listener.group(Readiness(READY, "k26-node0 is ready and every node's schedulers run"), nodes(False))
        await pilot.pause()
        drawn = str(app.query_one(StatusPane).render())
        assert "deployment k26: ready ✓" in drawn and "n1 k26-node1" in drawn, drawn
        app.session.listener.group(Readiness(BROKEN, BROKEN_REASON), nodes(True))
        app.session.listener.group_broken(BROKEN_REASON, "k26-node1", traceback)
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ConfirmModal) and modal.title_text == "Deployment k26 is broken"
        assert traceback.lines[-1] in modal.body and modal.body.startswith(BROKEN_REASON)
        await pilot.press("n")  # the pane behind it, for the picture
        await pilot.pause()
        pane = app.query_one(StatusPane)  # the reason whole, on lines of its own that fit: no ellipsis
        below = [line for line in str(pane.render()).splitlines() if line.startswith("    ")]
        assert " ".join(line.strip() for line in below) == BROKEN_REASON, below
        assert all(len(line) <= pane.content_size.width for line in below)

    assert snap_compare(app, terminal_size=(150, 30), run_before=run_before)
    assert app.session.target is not None and app.session.target.host == "gpu-a"  # node 0 is the one opened
    assert recorded_entries()  # the shared recorded data this file reuses is there


def test_the_merged_journal_names_each_rows_node(snap_compare) -> None:
    """Node 1's lines (the same lab journal, as another host with the same PIDs) interleaved with
    node 0's: each traceback folded on its own node, each row prefixed."""
    from tests.unit.test_merged_journal import on_node

    app = CockpitApp(CONFIG, None, live=False, group="k26")
    crash = [parse_json_line(line) for line in (DATA / "journal-crash8.jsonl").read_text().splitlines()]
    merged = [e for pair in zip(crash, on_node(crash, 1, shift_us=1), strict=True) for e in pair]

    async def run_before(pilot) -> None:
        app.session.journal.rows.nodes = 2
        app.session.deliver(merged)
        await pilot.pause()
        view = app.journal_view
        texts = [view.render_line(y).text for y in range(view.scrollable_content_region.height)]
        assert any(" n1 " in t and "TP7" in t for t in texts) and any(" n0 " in t and "TP7" in t for t in texts), texts

    assert snap_compare(app, terminal_size=(150, 40), run_before=run_before)


def test_the_group_write_modal_shows_a_diff_per_node(snap_compare) -> None:
    """node 0's edit carried to node 1's unit (whose --node-rank stays), each node's diff, and a
    finding between the nodes named by its node."""
    from cockpit.remote.local import LocalHost
    from cockpit.rollout.group import carried
    from cockpit.sglang.preflight.preflight import WARNING, Finding
    from cockpit.systemd.group_write import NodeWrite
    from cockpit.systemd.unit import load_unit
    from cockpit.ui.screens.write import GroupWriteModal
    from tests.lab.test_rollout_lab import SEED, UNIT

    head = load_unit({UNIT: SEED.replace("--tp-size 8", "--tp-size 16 --nnodes 2 --node-rank 0")}, UNIT)
    other = load_unit({UNIT: SEED.replace("--tp-size 8", "--tp-size 16 --nnodes 2 --node-rank 1")}, UNIT)
    edited = head.set_flag("--speculative-num-steps", "3")
    edit = carried(head, edited)
    writes = [
        NodeWrite("k26-node0", LocalHost("gpu-a"), HostConfig(name="gpu-a"), head, edit(head)),
        NodeWrite("k26-node1", LocalHost("gpu-b"), HostConfig(name="gpu-b"), other, edit(other)),
    ]
    assert writes[1].edited.flag_values()["--node-rank"] == "1"
    assert writes[1].edited.flag_values()["--speculative-num-steps"] == "3"
    finding = Finding(WARNING, "nic-missing", [], "NCCL_SOCKET_IFNAME=ib0 names no interface", node="k26-node1")
    app = CockpitApp(CONFIG, None, live=False, group="k26")

    async def run_before(pilot) -> None:
        app.push_screen(GroupWriteModal("k26", writes, [finding]))
        await pilot.pause()

    assert snap_compare(app, terminal_size=(150, 50), run_before=run_before)
