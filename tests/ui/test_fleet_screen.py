"""The fleet screen over a recorded round: worst first, a deployment folded, the cursor kept on
its unit when the order changes, Enter opening a unit (the live rounds: tests/lab/test_fleet_lab.py)."""

from __future__ import annotations

from cockpit.config import Config, DeploymentConfig, HostConfig, UnitConfig
from cockpit.sglang.deployments.fleet import DEGRADED, FAILED, READY, STOPPED, FleetUnit, HostGpus, HostRound
from cockpit.systemd.status import UnitStatus
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens import fleet as fleet_screen
from cockpit.ui.screens.fleet import FleetList, FleetScreen

CONFIG = Config(
    hosts={"gpu-a": HostConfig(name="gpu-a"), "gpu-b": HostConfig(name="gpu-b")},
    units={
        "k26-node0": UnitConfig(name="k26-node0", host="gpu-a", unit="sglang-k26.service"),
        "k26-node1": UnitConfig(name="k26-node1", host="gpu-b", unit="sglang-k26.service"),
        "qwen": UnitConfig(name="qwen", host="gpu-b", unit="sglang-qwen.service", url="http://127.0.0.1:30001"),
    },
    deployments={"k26": DeploymentConfig(name="k26", nodes=("k26-node0", "k26-node1"))},
)
H200 = HostGpus(8, 8, 977640, 1150168)


def _unit(host: str, unit: str, trouble: str, reason: str, active: str = "active", rank: int = 0) -> FleetUnit:
    return FleetUnit(host, unit, trouble, reason, UnitStatus(unit, host, active_state=active), rank)


def fleet(qwen: str = READY) -> list[HostRound]:
    return [
        HostRound(
            "gpu-a",
            [
                _unit("gpu-a", "sglang-k26.service", READY, "/health answered 200"),
                _unit("gpu-a", "sglang-old.service", STOPPED, "the unit is inactive (dead)", "inactive"),
            ],
            H200,
        ),
        HostRound(
            "gpu-b",
            [
                _unit("gpu-b", "sglang-k26.service", READY, "its 8 schedulers run", rank=1),
                _unit("gpu-b", "sglang-qwen.service", qwen, "/health answered 200" if qwen == READY else "exited"),
                _unit("gpu-b", "sglang-eagle.service", DEGRADED, "/health answered 503 after it was ready at 10:02:11"),
            ],
            HostGpus(8, 2, 160000, 1150168),
        ),
    ]


def fleet_app(monkeypatch) -> CockpitApp:
    """The app over the recorded fleet, a round every 50 ms."""
    monkeypatch.setattr(fleet_screen, "REFRESH_S", 0.05)
    app = CockpitApp(CONFIG, None, live=False)
    app.session.fleet = fleet()
    return app


async def test_rows_resort_under_the_cursor_and_enter_opens_the_unit(monkeypatch) -> None:
    app = fleet_app(monkeypatch)
    opened: list[Target | str | None] = []
    async with app.run_test(size=(160, 30)) as pilot:
        app.push_screen(FleetScreen(app.session), opened.append)
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        assert [(r.trouble, r.node or r.unit) for r in screen.rows] == [
            (DEGRADED, "sglang-eagle.service"),
            (READY, "sglang-qwen.service"),  # within a trouble, by host or deployment name
            (READY, "k26"),
            (READY, "k26-node0"),
            (READY, "k26-node1"),
            (STOPPED, "sglang-old.service"),
        ]
        await pilot.press("j")  # onto qwen
        assert screen.rows[screen.query_one(FleetList).cursor].unit == "sglang-qwen.service"
        app.session.fleet = fleet(qwen=FAILED)  # qwen fails: it goes to the top, the cursor with it
        await pilot.pause(0.2)
        view = screen.query_one(FleetList)
        assert screen.rows[0].unit == "sglang-qwen.service" and view.cursor == 0
        summary = str(screen.query_one("#fleet-summary").render())
        assert "1 failed, 1 degraded" in summary and "; 1 deployment ready (" in summary  # the group's own line
        await pilot.press("enter")
        await pilot.pause()
    assert opened == [Target("gpu-b", "sglang-qwen.service", url="http://127.0.0.1:30001")]


async def test_a_deployment_row_opens_the_deployment(monkeypatch) -> None:
    app = fleet_app(monkeypatch)
    opened: list[Target | str | None] = []
    async with app.run_test(size=(160, 30)) as pilot:
        app.push_screen(FleetScreen(app.session), opened.append)
        await pilot.pause(0.2)
        await pilot.press("j", "j", "enter")
        await pilot.pause()
        assert opened == ["k26"]
        app.action_fleet()  # through the app: the deployment opened as one, on its node 0
        await pilot.pause(0.2)
        await pilot.press("j", "j", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.session.group == "k26" and app.session.target == Target("gpu-a", "sglang-k26.service")
        assert [node for node, _ in app.session.nodes] == ["k26-node0", "k26-node1"]


def test_fleet_snapshot(snap_compare, monkeypatch) -> None:
    monkeypatch.setattr(fleet_screen, "REFRESH_S", 3600)
    app = CockpitApp(CONFIG, None, live=False)
    app.session.fleet = fleet(qwen=FAILED)

    async def run_before(pilot) -> None:
        await pilot.press("V")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(160, 24), run_before=run_before)
