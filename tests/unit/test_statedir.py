"""Where the cockpit keeps its state (cockpit/statedir.py): $XDG_STATE_HOME, else the home's
~/.local/state, and never a directory named `~` under the current one."""

from __future__ import annotations

import os

import pytest

from cockpit import statedir


def test_the_state_is_under_xdg_state_home_or_the_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "/srv/state")
    assert statedir.state_path("gpu-1", "../u") == "/srv/state/cockpit/gpu-1/_u"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", "/home/ops")
    assert str(statedir.state_dir("launch.marshal")) == "/home/ops/.local/state/cockpit/launch.marshal"


def test_no_home_to_be_found_is_an_error_not_a_directory_named_tilde(monkeypatch: pytest.MonkeyPatch) -> None:
    """No $HOME and no passwd entry: `expanduser` gives its argument back unchanged."""
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setattr(os.path, "expanduser", lambda path: path)
    with pytest.raises(RuntimeError, match="home directory"):
        statedir.state_path("attempts")
