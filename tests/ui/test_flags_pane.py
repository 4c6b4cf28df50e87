"""The flag editor, the write modal and the attempt timeline: Pilot and snapshot tests on the
seed incident's unit, with the real 0.5.23 flag catalog (the topics and the timeline's text alone:
tests/unit/test_flag_topics_and_timeline.py)."""

from __future__ import annotations

import asyncio
import time

import pytest
from textual.widgets import Button

from cockpit.attempts import Attempt
from cockpit.config import Config
from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.preflight.dry_runs import Verdict
from cockpit.sglang.preflight.preflight import Finding
from cockpit.systemd.unit import load_unit
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.attempts import AttemptsPane
from cockpit.ui.panes.flags import FlagsPane
from cockpit.ui.screens.write import WriteModal
from tests.conftest import until
from tests.lab.test_rollout_lab import SEED, UNIT


@pytest.fixture(scope="module")
def catalog(sglang_root):
    return load_catalog(sglang_root("0.5.23"))


def app_with_unit(catalog) -> CockpitApp:
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    app.session.use_unit(load_unit({UNIT: SEED}, UNIT, name="sglang-demo.service", catalog=catalog), catalog)
    return app


async def test_the_mistake_shows_before_anything_is_written(catalog) -> None:
    app = app_with_unit(catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        await pilot.press("e")
        pane = app.query_one(FlagsPane)
        assert [f.rule for f in pane.findings if f.severity == "error"] == ["eagle-params-together"]
        await pilot.press("a", *"num-steps")
        await pilot.pause()
        await pilot.press("enter", "3", "enter")
        await pilot.pause()
        assert [f for f in pane.findings if f.severity == "error"] == []
        assert _flags(pane)["--speculative-num-steps"] == "3"
        assert "--speculative-num-steps 3" in pane.edited.render(UNIT)
        await pilot.press("ctrl+z")
        assert pane.edited is pane.loaded


async def test_did_you_mean_for_an_unknown_flag(catalog) -> None:
    app = app_with_unit(catalog)
    app.session.use_unit(app.session.unit.set_flag("--num-speculative-tokens", "16"), catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        await pilot.press("e")
        pane = app.query_one(FlagsPane)
        unknown = [f for f in pane.findings if f.rule == "unknown-flag"]
        assert unknown and "Did you mean --speculative-num-draft-tokens?" in unknown[0].message


async def test_write_shows_diff_and_verdict_and_respects_read_only(catalog) -> None:
    app = app_with_unit(catalog)
    ran = []
    async with app.run_test(size=(150, 50)) as pilot:
        app.run_attempt = lambda loaded, edited, note: ran.append(edited)
        await pilot.press("e")
        pane = app.query_one(FlagsPane)
        pane.edited = pane.edited.set_flag("--speculative-num-steps", "3")
        pane._refresh()
        await pilot.press("w")
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, WriteModal)
        assert "+    --speculative-num-steps 3" in str(modal.query_one("#write-diff").query_one("Static").render())
        body = str(modal.query_one(".dialog-body").render())
        assert "keeping a backup of what is on disk" in body and "this check is best-effort" in body
        await pilot.press("y")
        await pilot.pause()
        assert len(ran) == 1 and "--speculative-num-steps 3" in ran[0].render(UNIT)
    ro = app_with_unit(catalog)
    ro.session.read_only = True
    async with ro.run_test(size=(150, 50)) as pilot:
        await pilot.press("e")
        pane = ro.query_one(FlagsPane)
        pane.edited = pane.edited.set_flag("--speculative-num-steps", "3")
        await pilot.press("w")
        await pilot.pause()
        assert not isinstance(ro.screen, WriteModal)


def _attempts() -> list[Attempt]:
    base = dict(host="cockpit-lab", unit="sglang-demo.service", texts={}, previous_texts={})
    return [
        Attempt(
            1,
            started_at=1796032000.0,
            flags_before={"--speculative-eagle-topk": "4"},
            flags_after={"--speculative-eagle-topk": "4", "--num-speculative-tokens": "16"},
            outcome="crashed",
            seconds=2.1,
            traceback={"exception": "SystemExit"},
            **base,
        ),
        Attempt(
            2,
            started_at=1796032100.0,
            flags_before={"--speculative-eagle-topk": "4"},
            flags_after={"--speculative-eagle-topk": "4", "--speculative-num-steps": "3"},
            outcome="ready",
            seconds=1.6,
            **base,
        ),
    ]


@pytest.mark.parametrize("view", ["flags", "write", "attempts"])
def test_snapshots(snap_compare, catalog, view) -> None:
    async def run_before(pilot) -> None:
        app = pilot.app
        if view == "attempts":
            pane = app.query_one(AttemptsPane)
            pane.show(_attempts())
            app.show_detail("attempts")
            pane.focus()
        else:
            await pilot.press("e")
            if view == "write":
                pane = app.query_one(FlagsPane)
                pane.edited = pane.edited.set_flag("--speculative-num-steps", "3")
                pane._refresh()
                await pilot.press("w")
        await pilot.pause()

    assert time.timezone == 0  # snapshots are taken in UTC (conftest)
    assert snap_compare(app_with_unit(catalog), terminal_size=(150, 50), run_before=run_before)


async def _enter_on(pilot, name: str) -> FlagsPane:
    """Open the editor, put the cursor on `name` and press Enter."""
    await pilot.press("e")
    pane = pilot.app.query_one(FlagsPane)
    _select(pane, name)
    await pilot.press("enter")
    await pilot.pause()
    return pane


def _flags(pane: FlagsPane) -> dict:
    return {i.name: i.value for i in pane.edited.flags()}


def _select(pane: FlagsPane, name: str) -> None:
    from textual.widgets import OptionList

    options = pane.query_one("#flag-list", OptionList)
    options.highlighted = next(i for i in range(options.option_count) if options.get_option_at_index(i).id == name)


async def test_enter_edits_a_value_in_place(catalog) -> None:
    app = app_with_unit(catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        pane = await _enter_on(pilot, "--tp-size")
        field = pane.query_one("#flag-input")
        assert field.display and field.value == "8"
        field.value = "4"
        await pilot.press("enter")
        await pilot.pause()
        assert _flags(pane)["--tp-size"] == "4"
        assert "    --tp-size 4 \\\n" in pane.edited.render(UNIT)
        assert "1 change not yet written (w writes)" in str(pane.query_one("#flags-head").render())


async def test_a_flag_with_choices_offers_them(sglang_root) -> None:
    app = app_with_unit(load_catalog(sglang_root("0.5.9")))  # 0.5.23 leaves the algorithm open (plugins)
    async with app.run_test(size=(150, 50)) as pilot:
        pane = await _enter_on(pilot, "--speculative-algorithm")
        box = pane.query_one("#flag-suggestions")
        offered = [box.get_option_at_index(i).id for i in range(box.option_count)]
        assert box.display and {"choice:EAGLE", "choice:EAGLE3", "choice:NEXTN"} <= set(offered)
        pane.query_one("#flag-input").value = ""
        for ch in "nex":
            await pilot.press(ch)
        await pilot.pause()
        assert [box.get_option_at_index(i).id for i in range(box.option_count)] == ["choice:NEXTN"]
        await pilot.press("enter")
        await pilot.pause()
        assert _flags(pane)["--speculative-algorithm"] == "NEXTN"


async def test_enter_on_a_switch_turns_it_off(catalog) -> None:
    app = app_with_unit(catalog)
    app.session.use_unit(app.session.unit.set_flag("--enable-metrics", None), catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        pane = await _enter_on(pilot, "--enable-metrics")
        assert "--enable-metrics" not in _flags(pane)
        assert not pane.query_one("#flag-input").display


async def test_del_leaves_the_cursor_on_the_next_flag(catalog) -> None:
    app = app_with_unit(catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        await pilot.press("e")
        pane = app.query_one(FlagsPane)
        order = [i.name for i in pane.edited.flags()]
        _select(pane, "--speculative-num-draft-tokens")
        await pilot.press("delete")
        await pilot.pause()
        assert pane._selected_name() != "--model-path"  # it used to jump to the top: del, del lost it
        after = pane._selected_name()
        await pilot.press("delete")
        await pilot.pause()
        left = [i.name for i in pane.edited.flags()]
        assert "--model-path" in left and after not in left and len(left) == len(order) - 2


class SGLangOnTheHost:
    """What the session's dry run answers the editor (its contract), held until the test lets it
    answer: each ask is kept, so a test sees which flags were asked about and when."""

    def __init__(self, verdicts: dict[str, Verdict]) -> None:
        self.verdicts = verdicts  # by the --speculative-num-steps value asked about ("" when absent)
        self.asked: list[str] = []
        self.answer = asyncio.Event()

    async def __call__(self, unit) -> Verdict:
        steps = dict((i.name, i.value) for i in unit.flags()).get("--speculative-num-steps") or ""
        self.asked.append(steps)
        await self.answer.wait()
        return self.verdicts[steps]


async def test_sglangs_own_verdict_replaces_the_static_one_once_typing_pauses(catalog, monkeypatch) -> None:
    from cockpit.ui.panes import flags

    # The pause that asks is 0.6 s; on a machine busy with another run, opening the editor took
    # longer than that and the test read the ask as made at once. What is tested is the order.
    monkeypatch.setattr(flags, "ASK_AFTER_S", 2.0)
    seed = Verdict(
        "gpu-node",
        "0.5.23",
        "failed",
        (
            Finding(
                "error",
                "dry-run",
                ["--speculative-eagle-topk"],
                "The dry run stopped: AssertionError in _handle_eagle_family.",
                "AssertionError",
            ),
        ),
    )
    # SGLang rejects the seed incident's flags as loaded, and starts with --speculative-num-steps 34.
    host = SGLangOnTheHost({"": seed, "34": Verdict("gpu-node", "0.5.23", "passed")})
    app = app_with_unit(catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        pane = app.query_one(FlagsPane)
        pane.dry_run = host
        await pilot.press("e")
        assert [f.rule for f in pane.findings if f.severity == "error"] == ["eagle-params-together"]
        assert host.asked == []  # not while the editor opens: once it has been still for a moment
        await until(lambda: host.asked == [""], 5, "the unit as loaded was not asked about")
        host.answer.set()
        await until(lambda: pane.verdict is not None, 5)
        text = str(pane.query_one("#flag-findings").render())
        assert "SGLang 0.5.23's own verdict (a dry run on gpu-node): it will not start" in text
        assert "_handle_eagle_family. Fix: Set --speculative-num-steps" in text  # the static rule's fix, lent
        assert [f.rule for f in pane.findings if f.severity == "error"] == ["dry-run"]  # replaces the static error
        host.answer.clear()
        await pilot.press("a", *"num-steps")
        await pilot.pause()
        await pilot.press("enter", "3")
        await pilot.pause()
        # As the value is typed, before Enter: the static layer answers at once.
        assert pane.verdict is None and not [f for f in pane.findings if f.severity == "error"]
        await pilot.press("4")
        await until(lambda: "34" in host.asked, 5, "the typed value was not asked about")
        assert host.asked == ["", "34"]  # "3" alone was typed over before the pause: never asked
        await pilot.press("enter")  # the same flags as asked: no second ask, the answer still awaited
        host.answer.set()
        await until(lambda: pane.verdict is not None, 5)
        assert pane.verdict.outcome == "passed" and host.asked == ["", "34"]
        assert "✓ SGLang 0.5.23's own verdict" in str(pane.query_one("#flag-findings").render())


async def test_a_verdict_on_flags_edited_since_is_dropped(catalog) -> None:
    late = Verdict("gpu-node", "0.5.23", "passed")
    host = SGLangOnTheHost({"": late})
    app = app_with_unit(catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        pane = app.query_one(FlagsPane)
        pane.dry_run = host
        await pilot.press("e")
        await until(lambda: host.asked == [""], 5)
        pane.edited = pane.edited.set_flag("--speculative-num-steps", "3")
        pane._refresh()  # an edit while the host is still resolving the flags as loaded
        host.answer.set()
        await pilot.pause(0.2)
        assert pane.verdict is None  # the answer about the old flags is not shown for the new ones
        assert not [f for f in pane.findings if f.severity == "error"]


async def test_a_flag_given_twice_is_one_row_with_the_value_that_counts(catalog) -> None:
    """A stand-in node's unit gives --tp-size twice (the demo's 8, then the launch's 16): the
    editor opened with one row for it, the last value, marked; editing it edits that one."""
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    twice = SEED.replace("--port 30000", "--port 30000 --tp-size 16")
    app.session.use_unit(load_unit({UNIT: twice}, UNIT, name="sglang-demo.service", catalog=catalog), catalog)
    async with app.run_test(size=(130, 40)) as pilot:
        from textual.widgets import OptionList

        await pilot.press("e")
        await pilot.pause()
        options = app.query_one("#flag-list", OptionList)
        rows = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        [row] = [r for r in rows if r.strip().startswith("--tp-size")]
        assert "16" in row and "given more than once: the last counts" in row
        pane = app.query_one(FlagsPane)
        assert pane.edited is not None
        assert pane.edited.set_flag("--tp-size", "8").flag_values()["--tp-size"] == "8"


async def test_the_unit_view_offers_the_kill_mode_and_writes_it_like_a_flag(catalog) -> None:
    app = app_with_unit(catalog)
    ran = []
    async with app.run_test(size=(150, 50)) as pilot:
        app.run_attempt = lambda loaded, edited, note: ran.append(edited)
        await pilot.press("e")
        pane = app.query_one(FlagsPane)
        assert [f.rule for f in pane.findings if f.severity == "warning"] == ["kill-mode"]
        assert "KillMode= is not set" in str(pane.query_one("#flag-findings").render())
        assert pane.check_action("setting", ()) is False  # offered in the unit view only
        await pilot.press("R")
        raw = str(pane.query_one("#flag-help").render())
        assert "Restart=on-failure" in raw and "k sets KillMode=mixed in [Service] (the pre-flight's kill-mode)" in raw
        await pilot.press("k")
        await pilot.pause()
        assert pane.edited.setting("KillMode") == "mixed" and pane.edited.exec() == pane.loaded.exec()
        assert not [f for f in pane.findings if f.rule == "kill-mode"] and pane.check_action("setting", ()) is False
        assert "KillMode=mixed\n" in str(pane.query_one("#flag-help").render())  # the unit as it would be written
        assert "1 change not yet written" in str(pane.query_one("#flags-head").render())
        await pilot.press("w")
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, WriteModal)
        assert "+KillMode=mixed" in str(modal.query_one("#write-diff").query_one("Static").render())
        await pilot.press("y")
        await pilot.pause()
        written = SEED.replace("RestartSec=2\n", "RestartSec=2\nKillMode=mixed\n")
        assert len(ran) == 1 and ran[0].changed() == {UNIT: written}


async def test_a_restart_in_the_timeline_is_no_rollback_target(catalog) -> None:
    restart = Attempt(
        3,
        "cockpit-lab",
        "sglang-demo.service",
        1796032200.0,
        {"--tp-size": "8"},
        {"--tp-size": "8"},
        {},
        {},
        outcome="ready",
        seconds=23.4,
        note="restart",
    )
    app = app_with_unit(catalog)
    ran = []
    async with app.run_test(size=(150, 50)) as pilot:
        app.run_attempt = lambda loaded, edited, note: ran.append(note)
        pane = app.query_one(AttemptsPane)
        pane.show([*_attempts(), restart])
        app.show_detail("attempts")
        pane.focus()
        newest = str(pane.get_option_at_index(0).prompt)
        assert "✓ #3" in newest and "restart" in newest, newest
        pane.highlighted = 0
        await pilot.press("u")
        await pilot.pause()
        assert ran == [] and not isinstance(app.screen, WriteModal)
        assert any("wrote nothing (a restart)" in str(n.message) for n in app._notifications), app._notifications


async def test_a_rollback_to_a_set_that_crashed_runs_the_writes_pre_flight(catalog) -> None:
    """Rollback showed `The pre-flight found nothing that stops the server` for the flag set that
    had crashed 11 times: it opened the write modal with no findings at all."""
    fixed = load_unit({UNIT: SEED}, UNIT, name="sglang-demo.service", catalog=catalog)
    fixed = fixed.set_flag("--speculative-num-steps", "3").set_flag("--speculative-num-draft-tokens", "4")
    fixed = load_unit({UNIT: fixed.files[0].render()}, UNIT, name="sglang-demo.service", catalog=catalog)
    crashed = Attempt(
        1,
        "cockpit-lab",
        "sglang-demo.service",
        1796032000.0,
        {},
        {"--speculative-eagle-topk": "4"},
        {UNIT: SEED},  # what it wrote: the seed's mistake
        {},
        outcome="crashed",
        traceback={"exception": "AssertionError"},
    )
    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    app.session.use_unit(fixed, catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        pane = app.query_one(AttemptsPane)
        pane.show([crashed])
        app.show_detail("attempts")
        pane.focus()
        assert pane.highlighted == 0  # it opened with no selection: u did nothing
        await pilot.press("u")
        await until(lambda: isinstance(app.screen, WriteModal), 5)
        modal = app.screen
        assert isinstance(modal, WriteModal)
        assert [f.rule for f in modal.findings if f.severity == "error"] == ["eagle-params-together"]
        assert "Write anyway" in str(modal.query_one("#yes", Button).label)


async def test_a_name_like_no_flag_offers_none(catalog) -> None:
    """`zzznotaflag` offered --cpu-offload-gb, and Enter would have taken it."""
    from textual.widgets import OptionList

    app = app_with_unit(catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        await pilot.press("e", "a", *"zzznotaflag")
        await pilot.pause()
        box = app.query_one(FlagsPane).query_one("#flag-suggestions", OptionList)
        assert not box.display
        await pilot.press("ctrl+u", *"memfrac")
        await pilot.pause()
        assert box.display and box.get_option_at_index(box.highlighted).id == "--mem-fraction-static"


async def test_tab_completes_a_path_from_the_host_and_keeps_the_editor(catalog, tmp_path) -> None:
    """Issue 26, item 5: the value field had no path completion; Tab left the editor, and
    Shift+Tab back then a key erased the value. Completion lists a real directory (LocalHost)."""
    from textual.widgets import Input, OptionList

    from cockpit.remote.local import LocalHost
    from cockpit.sglang.preflight.path_completion import complete_path

    for name in ("Llama-3.1-8B", "Llama-3.2-1B"):
        (tmp_path / "models" / name).mkdir(parents=True)
    app = app_with_unit(catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        pane = await _enter_on(pilot, "--speculative-draft-model-path")
        pane.complete = lambda unit, typed: complete_path(LocalHost(), typed, "/")
        field = pane.query_one("#flag-input", Input)
        box = pane.query_one("#flag-suggestions", OptionList)
        field.value = f"{tmp_path}/mo"
        await pilot.press("tab")
        await until(lambda: field.value == f"{tmp_path}/models/", 5, lambda: field.value)
        assert field.has_focus and not box.display  # one name: filled in, nothing to list
        await pilot.press("tab")
        await until(lambda: box.display, 5, lambda: field.value)
        assert field.value == f"{tmp_path}/models/Llama-3."  # what both share
        listed = [box.get_option_at_index(i).id for i in range(box.option_count)]
        assert listed == [f"path:{tmp_path}/models/Llama-3.1-8B/", f"path:{tmp_path}/models/Llama-3.2-1B/"]
        await pilot.press("down", "tab")
        await pilot.pause()
        assert field.value == f"{tmp_path}/models/Llama-3.2-1B/" and field.has_focus
        await pilot.press("shift+tab", "x")
        await pilot.pause()
        assert field.has_focus and field.value == f"{tmp_path}/models/Llama-3.2-1B/x", field.value
        await pilot.press("backspace", "enter")
        await pilot.pause()
        assert _flags(pane)["--speculative-draft-model-path"] == f"{tmp_path}/models/Llama-3.2-1B/"


async def test_tab_takes_the_highlighted_choice_without_writing_it(sglang_root) -> None:
    from textual.widgets import Input

    app = app_with_unit(load_catalog(sglang_root("0.5.9")))
    async with app.run_test(size=(150, 50)) as pilot:
        pane = await _enter_on(pilot, "--speculative-algorithm")
        field = pane.query_one("#flag-input", Input)
        field.value = ""
        await pilot.press(*"nex", "tab")
        await pilot.pause()
        assert field.has_focus and field.value == "NEXTN"
        assert _flags(pane)["--speculative-algorithm"] == "EAGLE3"  # Enter writes it, not Tab


async def test_v_adds_the_edit_to_the_units_experiment_and_e_offers_it(catalog) -> None:
    """The experiment built in the app: `v` in the editor adds the edit as a variant of the unit's
    plan (nothing written to the unit), says so, and `E` opens on that plan."""
    from textual.widgets import Input

    from cockpit.experiment.plan import read_plan
    from cockpit.ui.screens.experiment import ExperimentScreen

    app = app_with_unit(catalog)
    async with app.run_test(size=(150, 50)) as pilot:
        await pilot.press("e")
        pane = app.query_one(FlagsPane)
        await pilot.press("v")
        await pilot.pause()
        assert app.session.built_plan() is None  # no edit yet: nothing to add
        await pilot.press("a", *"num-steps")
        await pilot.pause()
        await pilot.press("enter", "3", "enter")
        await pilot.pause()
        await pilot.press("v")
        await pilot.pause()
        path = app.session.built_plan()
        assert path is not None
        said = [str(n.message) for n in app._notifications]
        assert f"added variant speculative-num-steps-3 to {path} (2 variants); E runs the experiment" in said
        plan = read_plan(path)
        assert [v.name for v in plan.variants] == ["as-found", "speculative-num-steps-3"]
        assert plan.variants[1].applied(pane.loaded).exec() == pane.edited.exec()
        assert pane.edited is not pane.loaded  # still being edited: nothing was written
        await pilot.press("escape", "E")
        await pilot.pause()
        assert isinstance(app.screen, ExperimentScreen)
        assert app.screen.query_one(Input).value == str(path)
