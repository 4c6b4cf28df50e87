"""The write modal's list of processes that hold what the restart needs: each one with its own
choice, chosen at first only where it is part of no running unit, a warning in words when a
choice takes another unit down, and k handing the app the chosen ones with their identities."""

from __future__ import annotations

import pytest
from textual.widgets import SelectionList, Static

from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.preflight.host_preflight import findings_of
from cockpit.sglang.preflight.preflight import given_flags
from cockpit.systemd.gpu_use import Gpu, GpuProcess, GpuUse
from cockpit.systemd.process_end import Identity
from cockpit.systemd.process_facts import Viewpoint
from cockpit.systemd.unit import load_unit
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.write import WriteModal
from tests.lab.test_rollout_lab import SEED, UNIT
from tests.ui.test_flags_pane import app_with_unit

ORPHAN, TP0, UNREAD = 4242, 812, 977


@pytest.fixture(scope="module")
def catalog(sglang_root):
    return load_catalog(sglang_root("0.5.23"))


def _held(catalog) -> list:
    """The host check's findings on the seed unit's GPUs: an orphan of an earlier start, TP0 of
    another running server, and a process whose facts could not be read."""
    gpus = [Gpu(i, f"GPU-{i}", 75000, 143771) for i in range(8)]
    procs = [
        GpuProcess(ORPHAN, "sglang::scheduler_TP3", 70000, 3, "GPU-3", "/cockpit-orphans", 1, 60.0, "old", 5000),
        GpuProcess(
            TP0, "sglang::scheduler_TP0", 70000, 0, "GPU-0", "/system.slice/sglang-other.service", 300, 9.0, "x", 9000
        ),
        GpuProcess(UNREAD, "python3", 1000, 5, "GPU-5"),
    ]
    view = Viewpoint("sglang-demo.service", "now", frozenset({"old"}))
    unit = load_unit({UNIT: SEED}, UNIT, name="sglang-demo.service", catalog=catalog)
    return findings_of(GpuUse(gpus, procs), given_flags(unit.exec(), catalog), {}, view, "gpu-a")


async def _modal(app: CockpitApp, pilot, catalog) -> WriteModal:
    """The write modal of an edit to the seed unit, with the holders of _held."""
    loaded = app.session.unit
    modal = WriteModal(
        "gpu-a", "sglang-demo.service", loaded, loaded.set_flag("--log-level", "info"), _held(catalog), False
    )
    app.push_screen(modal)
    await pilot.pause()
    return modal


async def test_each_holder_has_its_own_choice_and_another_units_rank_is_not_chosen(catalog) -> None:
    app = app_with_unit(catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        modal = await _modal(app, pilot, catalog)
        choices = modal.query_one("#holders", SelectionList)
        rows = [str(choices.get_option_at_index(i).prompt) for i in range(choices.option_count)]
        assert [r.split(" ")[1] for r in rows] == [str(TP0), str(UNREAD), str(ORPHAN)]
        assert "70000 MiB on GPU 0 · unit sglang-other.service" in rows[0]
        assert "could not be read here: not offered" in rows[1] and choices.get_option_at_index(1).disabled
        assert "from sglang-demo.service's earlier invocation old" in rows[2]
        assert choices.selected == [ORPHAN]  # only the one that is part of no running unit
        warning = modal.query_one("#holders-warning", Static)
        assert str(warning.render()).strip() == ""
        choices.select(TP0)
        await pilot.pause()
        said = str(warning.render())
        assert (
            "ends PID 812 (sglang::scheduler_TP0) of sglang-other.service, a running unit: that unit goes down" in said
        )
        await pilot.press("k")
        await pilot.pause()
        assert app.screen is not modal
        assert [h.identity for h in modal.end_chosen] == [
            Identity(TP0, 9000, "/system.slice/sglang-other.service"),
            Identity(ORPHAN, 5000, "/cockpit-orphans"),
        ]


async def test_k_with_nothing_chosen_ends_nothing(catalog) -> None:
    app = app_with_unit(catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        modal = await _modal(app, pilot, catalog)
        modal.query_one("#holders", SelectionList).deselect(ORPHAN)
        await pilot.press("k")
        await pilot.pause()
        assert app.screen is modal and modal.end_chosen == []
