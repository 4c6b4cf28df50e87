"""The shipped themes load."""

from __future__ import annotations

from cockpit.ui.themes import SHIPPED, load_theme
from tests.ui.test_themes_keys import THEMES


def test_shipped_themes_load() -> None:
    names = {load_theme(p).name for p in SHIPPED.glob("*.toml")}
    assert set(THEMES) <= names
