"""The flag editor's topics and the attempt timeline's text, without an app."""

from __future__ import annotations

from cockpit.attempts import Attempt
from cockpit.ui.panes.flags import topic_of


def test_topics() -> None:
    assert topic_of("--speculative-eagle-topk") == "speculative decoding"
    assert topic_of("--tp-size") == "parallelism"
    assert topic_of("--mem-fraction-static") == "memory"
    assert topic_of("--model-path") == "model"
    assert topic_of("--enable-foo") == "other"


def test_the_timeline_keeps_words_apart_after_a_long_outcome() -> None:
    from cockpit.ui.panes.attempts import describe

    attempt = Attempt(
        3,
        "cockpit-lab",
        "sglang-demo.service",
        1796032000.0,
        {},
        {"--speculative-num-steps": "3"},
        {},
        {},
        outcome="crashed",
        seconds=12.25,
        traceback={"exception": "AssertionError"},
    )
    text = str(describe(attempt))
    assert "AssertionError  --speculative-num-steps" in text and "AssertionError--" not in text
