"""The source pane's explanation with the failing frame's callers, on the real server's own failure
(issue 28): in the real-SGLang lab the stand-in's flags go through SGLang 0.5.23's own resolution,
so `--speculative-algorithm FOO` dies in `SpeculativeAlgorithm.from_string(name)`; the flag is the
argument its caller passed, read from the caller's file on the host, and the flags `e` edits from
there are that one."""

from __future__ import annotations

import asyncio
import time

import pytest
from textual.widgets import OptionList

from cockpit.config import Config
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.flags import FlagsPane
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.source import SourcePane, SourceView
from tests.conftest import LabHandle
from tests.lab.standin_units import standin_unit

pytestmark = pytest.mark.real_sglang

UNKNOWN = "--speculative-algorithm FOO --speculative-draft-model-path /models/EAGLE3-LLaMA3.1-Instruct-8B"


async def open_failing_frame(app: CockpitApp, pilot, said: str, wait: float = 15) -> tuple[SourcePane, str]:
    """Once the unit's ValueError reached the journal pane: unfold it, open its failing frame, and
    wait for the explanation to say `said`."""
    view = app.query_one(JournalView)
    deadline = time.monotonic() + 90  # SGLang imports torch before it resolves the flags
    while not any(tb.exception == "ValueError" and tb.complete for _, tb in view.model.tracebacks()):
        assert time.monotonic() < deadline, "the ValueError never reached the pane"
        await asyncio.sleep(0.2)
    view.focus()
    await pilot.press("G", "left_square_bracket", "enter", "enter")  # unfold, open the failing frame
    pane = app.query_one(SourcePane)
    deadline = time.monotonic() + wait
    while said not in (explanation := str(pane.query_one("#explanation").render())):
        assert time.monotonic() < deadline, explanation
        await asyncio.sleep(0.1)
    return pane, explanation


@pytest.mark.timeout(300)
async def test_the_failing_frames_callers_are_read_on_the_host_for_the_flag_they_passed(real_lab: LabHandle) -> None:
    with standin_unit(real_lab, "sglang-unknown.service", 30102, flags=UNKNOWN, restart=False) as unit:
        app = CockpitApp(Config(), Target(real_lab.name, unit))
        async with app.run_test(size=(140, 44)) as pilot:
            pane, explanation = await open_failing_frame(app, pilot, "Its caller")
            assert "Unknown speculative algorithm name: FOO" in explanation
            assert "Its caller handle_speculative_decoding passed --speculative-algorithm" in explanation
            assert pane.query_one(SourceView).shown.path.endswith("sglang/srt/speculative/spec_info.py")
            assert "--speculative-algorithm" in pane.flags  # what `e` opens the flag editor on


@pytest.mark.timeout(300)
async def test_the_context_length_failure_says_the_models_value_the_flags_and_the_variable(
    real_lab: LabHandle,
) -> None:
    """Issue 28's context-length case in the app: the model's value read from the unit's --model-path
    on the host (through the release's get_context_length), the flag's, and the variable unset."""
    flags = "--context-length 1000000"
    with standin_unit(real_lab, "sglang-context.service", 30103, flags=flags, restart=False) as unit:
        app = CockpitApp(Config(), Target(real_lab.name, unit))
        async with app.run_test(size=(160, 48)) as pilot:
            pane, explanation = await open_failing_frame(app, pilot, "comes from the model", wait=30)
            said = " ".join(explanation.split())
            assert "derived_context_len comes from the model: get_context_length" in said
            assert "/models/Llama-3.1-8B-Instruct/config.json has" in said
            assert "max_position_embeddings 131072" in said
            assert "--context-length 1000000" in said
            assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN (not set in the unit)" in said
            assert pane.query_one(SourceView).shown.path.endswith("sglang/srt/configs/model_config.py")
            assert pane.flags == ["--context-length", "env:SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"]
            assert "model_config.py:955 from_server_args: passed --context-length" in explanation
            assert "common.py:677 get_context_length: derived_context_len from config.json's" in explanation
            # `e`: the editor on those, the variable the unit does not set on a row of its own
            await pilot.press("e")
            editor = app.query_one(FlagsPane)
            rows = editor.query_one("#flag-list", OptionList)
            deadline = time.monotonic() + 10
            while rows.highlighted is None or rows.get_option_at_index(rows.highlighted).id != "--context-length":
                assert time.monotonic() < deadline, "the editor did not open on --context-length"
                await asyncio.sleep(0.1)
            ids = [rows.get_option_at_index(i).id for i in range(rows.option_count)]
            wanted = ids.index("env:SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")
            assert "not set in the unit: Enter sets it" in str(rows.get_option_at_index(wanted).prompt)
            rows.highlighted = wanted
            await pilot.press("enter", *"1", "enter")
            await pilot.pause()
            assert editor.edited is not None
            assert editor.edited.environment()["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"] == "1"
            assert editor.pending_changes() == 1
            # SGLang's own dry run, asked again for the environment alone (the command line is the
            # same): with the variable set, the check is off and the release says it starts
            deadline = time.monotonic() + 120
            while editor.verdict is None or editor.verdict.outcome != "passed":
                assert time.monotonic() < deadline, editor.verdict
                await asyncio.sleep(0.2)
