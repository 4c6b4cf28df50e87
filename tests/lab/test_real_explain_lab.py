"""The source pane's explanation with the failing frame's callers, on the real server's own failure
(issue 28): in the real-SGLang lab the stand-in's flags go through SGLang 0.5.23's own resolution,
so `--speculative-algorithm FOO` dies in `SpeculativeAlgorithm.from_string(name)`; the flag is the
argument its caller passed, read from the caller's file on the host, and the flags `e` edits from
there are that one."""

from __future__ import annotations

import asyncio
import time

import pytest

from cockpit.config import Config
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.source import SourcePane, SourceView
from tests.conftest import LabHandle
from tests.lab.standin_units import standin_unit

pytestmark = pytest.mark.real_sglang

UNKNOWN = "--speculative-algorithm FOO --speculative-draft-model-path /models/EAGLE3-LLaMA3.1-Instruct-8B"


@pytest.mark.timeout(300)
async def test_the_failing_frames_callers_are_read_on_the_host_for_the_flag_they_passed(real_lab: LabHandle) -> None:
    with standin_unit(real_lab, "sglang-unknown.service", 30102, flags=UNKNOWN, restart=False) as unit:
        app = CockpitApp(Config(), Target(real_lab.name, unit))
        async with app.run_test(size=(140, 44)) as pilot:
            view = app.query_one(JournalView)
            deadline = time.monotonic() + 90  # SGLang imports torch before it resolves the flags
            while not any(tb.exception == "ValueError" and tb.complete for _, tb in view.model.tracebacks()):
                assert time.monotonic() < deadline, "the ValueError never reached the pane"
                await asyncio.sleep(0.2)
            view.focus()
            await pilot.press("G", "left_square_bracket", "enter", "enter")  # unfold, open the failing frame
            pane = app.query_one(SourcePane)
            deadline = time.monotonic() + 15
            while "Its caller" not in (explanation := str(pane.query_one("#explanation").render())):
                assert time.monotonic() < deadline, explanation
                await asyncio.sleep(0.1)
            assert "Unknown speculative algorithm name: FOO" in explanation
            assert "Its caller handle_speculative_decoding passed --speculative-algorithm" in explanation
            assert pane.query_one(SourceView).shown.path.endswith("sglang/srt/speculative/spec_info.py")
            assert "--speculative-algorithm" in pane.flags  # what `e` opens the flag editor on
