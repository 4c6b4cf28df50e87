"""Themes from TOML files: the shipped ones in `cockpit/ui/theme_files/` (package data, so
every wheel carries them; the repository's top-level `themes/` links there, where a user reads
and copies them), the user's in ~/.config/cockpit/themes/. Textual has no theme file loader
(docs/facts.md): each file becomes a `Theme` and is registered. A bad file is reported in one
sentence and skipped; the app then keeps the default theme. The last theme chosen is remembered
in the state directory."""

from __future__ import annotations

import json
import sys
from dataclasses import fields
from pathlib import Path

from textual.theme import Theme

from cockpit.statedir import state_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    # mypy checks this branch (python_version 3.10), but a venv on 3.11+ has no tomli: its
    # dependency marker is python_version < '3.11'. Where tomli is installed the ignore is unused.
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

DEFAULT_THEME = "cockpit-dark"
SHIPPED = Path(__file__).resolve().with_name("theme_files")
_COLOURS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
_ALLOWED = {f.name for f in fields(Theme)}


def user_dir() -> Path:
    return Path("~/.config/cockpit/themes").expanduser()


def load_theme(path: Path) -> Theme:
    """One theme file; raises ValueError with `FILE: what is wrong` for a bad one."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot read the theme ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None
    unknown = sorted(set(data) - _ALLOWED)
    if unknown:
        raise ValueError(f"{path}: unknown key {unknown[0]!r} (a theme has: {', '.join(sorted(_ALLOWED))})")
    if not isinstance(data.get("name"), str) or not data["name"]:
        raise ValueError(f"{path}: missing `name`")
    if not isinstance(data.get("primary"), str):
        raise ValueError(f'{path}: missing `primary` (a colour such as "#3B82F6")')
    for key in _COLOURS:
        if key in data and not isinstance(data[key], str):
            raise ValueError(f"{path}: {key} must be a colour string, not {data[key]!r}")
    try:
        theme = Theme(**data)
        theme.to_color_system()  # parses every colour: a typo fails here, not at draw time
    except Exception as e:  # Color.parse raises its own error types
        raise ValueError(f"{path}: {e}") from None
    return theme


def discover(extra_dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """(themes, problems): the shipped themes first, then the user's (which may replace them)."""
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for directory in [SHIPPED, user_dir(), *(extra_dirs or [])]:
        for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
            try:
                theme = load_theme(path)
            except ValueError as e:
                problems.append(str(e))
                continue
            themes[theme.name] = theme
    return list(themes.values()), problems


def _memory() -> Path:
    return state_dir("ui.json")


def remembered() -> str | None:
    try:
        return json.loads(_memory().read_text()).get("theme")
    except (OSError, ValueError, AttributeError):
        return None


def remember(theme: str) -> None:
    path = _memory()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"theme": theme}))
    except OSError:
        pass  # a read-only home: the choice lasts for this session only
