"""The pre-flight of a unit's own settings (`kill-mode`) and the [Service] edit that fixes it, on the
real-SGLang lab's own unit file (cockpit/lab/guest/real-sglang/)."""

from __future__ import annotations

import pytest

from cockpit.sglang.preflight.preflight import WARNING
from cockpit.sglang.preflight.unit_preflight import KILL_MODE_RULE, check_unit
from cockpit.systemd.exec_plan import UnitError
from cockpit.systemd.unit import load_unit
from tests.conftest import ROOT

FRAGMENT = "/etc/systemd/system/sglang-real-tp1.service"
DROP_IN = "/etc/systemd/system/sglang-real-tp1.service.d/kill.conf"
TEXT = (ROOT / "cockpit" / "lab" / "guest" / "real-sglang" / "sglang-real-tp1.service").read_text()


def unit(drop_in: str | None = None):
    texts = {FRAGMENT: TEXT, **({DROP_IN: drop_in} if drop_in is not None else {})}
    return load_unit(texts, FRAGMENT)


def test_the_default_kill_mode_is_warned_of_with_the_setting_that_fixes_it() -> None:
    [finding] = check_unit(unit())
    assert (finding.severity, finding.rule, finding.setting) == (WARNING, KILL_MODE_RULE, ("KillMode", "mixed"))
    assert "not set (control-group, systemd's default)" in finding.message and "Result=signal" in finding.message
    assert finding.fix is not None and finding.fix.startswith("KillMode=mixed in [Service]")
    assert "setting" not in finding.to_json()  # `cockpit preflight --json` keeps its fields


@pytest.mark.parametrize(
    ("drop_in", "warned"),
    [
        ("[Service]\nKillMode=control-group\n", True),
        ("[Service]\nKillMode=mixed\n", False),
        ("[Service]\nKillMode=process\n", False),  # children left alive: the survivors notice says so
        ("[Service]\nKillMode=mixed\nKillMode=\n", True),  # an empty assignment resets it to the default
    ],
)
def test_the_kill_mode_in_effect_is_the_last_one_given(drop_in: str, warned: bool) -> None:
    assert bool(check_unit(unit(drop_in))) is warned


def test_setting_it_adds_one_line_at_the_end_of_service_and_leaves_every_other_byte() -> None:
    edited = unit().set_setting("KillMode", "mixed")
    assert edited.changed() == {FRAGMENT: TEXT.replace("    --port 30010\n", "    --port 30010\nKillMode=mixed\n")}
    assert edited.setting("KillMode") == "mixed" and not check_unit(edited)
    assert edited.exec() == unit().exec()


def test_setting_it_edits_the_directive_in_effect_in_place() -> None:
    edited = unit("[Service]\n# ours\nKillMode = control-group\nTimeoutStopSec=30\n").set_setting("KillMode", "mixed")
    assert edited.changed() == {DROP_IN: "[Service]\n# ours\nKillMode = mixed\nTimeoutStopSec=30\n"}
    assert edited.set_setting("KillMode", "mixed").changed() == edited.changed()  # already so: nothing more


def test_a_value_that_is_no_plain_word_is_refused() -> None:
    with pytest.raises(UnitError, match="plain word"):
        unit().set_setting("KillMode", "mixed %n")
