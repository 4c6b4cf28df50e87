"""The one exception type the CLI and the app turn into a single sentence for the user."""

from __future__ import annotations


class CockpitError(Exception):
    """A failure the user can act on; `str()` is the whole message, one sentence."""


class UsageError(CockpitError):
    """Bad input on the command line or in the config (exit status 2)."""
