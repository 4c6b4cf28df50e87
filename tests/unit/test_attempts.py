"""Attempt #0, the original: the way back that is always there, kept once."""

from __future__ import annotations

from pathlib import Path

from cockpit.attempts import ORIGINAL, AttemptLog
from cockpit.incident import attempts_in
from cockpit.ui.panes.attempts import describe

UNIT = "/etc/systemd/system/sglang-demo.service"


def test_the_unit_as_first_opened_is_kept_once_as_attempt_0(tmp_path: Path) -> None:
    log = AttemptLog("cockpit-lab", "sglang-demo.service", root=tmp_path)
    first = log.keep_original({UNIT: "[Service]\nExecStart=/bin/sglang --tp-size 8\n"}, {"--tp-size": "8"})
    assert first is not None and (first.number, first.outcome) == (0, ORIGINAL)
    assert log.keep_original({UNIT: "changed since"}, {}) is None  # the original is the first seen, kept once
    attempt = log.new(flags_before={}, flags_after={}, texts={UNIT: "written"}, previous_texts={UNIT: "x"})
    assert attempt.number == 1
    [original, _] = log.load()
    assert original.texts == {UNIT: "[Service]\nExecStart=/bin/sglang --tp-size 8\n"}
    assert attempts_in(log.load(), None) == [attempt]  # the incident note tells what ran, not the way back
    assert "the original" in describe(original).plain and "u writes it back" in describe(original).plain


def test_a_timeline_from_before_takes_its_first_attempts_record_of_what_it_found(tmp_path: Path) -> None:
    log = AttemptLog("cockpit-lab", "sglang-demo.service", root=tmp_path)
    log.new(
        flags_before={"--tp-size": "8"},
        flags_after={"--tp-size": "4"},
        texts={UNIT: "as attempt 1 wrote it"},
        previous_texts={UNIT: "as it was before any attempt"},
    )
    original = log.keep_original({UNIT: "as the unit is now"}, {"--tp-size": "4"})
    assert original is not None
    assert original.texts == {UNIT: "as it was before any attempt"} and original.flags_after == {"--tp-size": "8"}
    assert [a.number for a in log.load()] == [0, 1]
