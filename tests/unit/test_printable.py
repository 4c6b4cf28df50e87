"""cockpit.printable: what a host sent, shown so that a terminal only displays it."""

from __future__ import annotations

import json

from cockpit.printable import json_printable, printable

HOSTILE = "a\x1b]2;T\x07b\x9bc\u202ed\ne\tf\r\x7f\u2066"


def test_every_control_and_reordering_character_is_shown_by_its_escape() -> None:
    assert printable(HOSTILE) == "a\\x1b]2;T\\x07b\\x9bc\\u202ed\\x0ae\tf\\x0d\\x7f\\u2066"


def test_lines_keep_their_newlines_and_text_without_controls_is_the_same_object() -> None:
    assert printable(HOSTILE, lines=True).split("\n") == ["a\\x1b]2;T\\x07b\\x9bc\\u202ed", "e\tf\\x0d\\x7f\\u2066"]
    plain = "TP3] Decode batch, #running-req: 32 · ready ✓ \u00a0(no-break space)"
    assert printable(plain) is plain


def test_json_keeps_the_data_and_writes_what_json_leaves_raw_as_escapes() -> None:
    for encoded in (json.dumps({"m": HOSTILE}), json.dumps({"m": HOSTILE}, ensure_ascii=False)):
        inert = json_printable(encoded)
        assert json.loads(inert) == {"m": HOSTILE}
        assert printable(inert) == inert  # nothing left for a terminal to act on
