"""The help screen's header, one of each command in the palette, the source pane's footer."""

from __future__ import annotations

from cockpit.config import Config
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp


def _app() -> CockpitApp:
    return CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)


async def test_the_help_header_names_the_config_table() -> None:
    app = _app()
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        keys = app.screen.query_one("#help-keys")
        text = "".join(seg.text for line in keys.render_lines(keys.region.reset_offset) for seg in line)
        assert "id (for [ui.keys])" in text


async def test_the_palette_offers_one_keys_and_one_snapshot() -> None:
    app = _app()
    async with app.run_test(size=(140, 44)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert titles.count("Keys") == 1 and "Snapshot" in titles and "Screenshot" not in titles
        assert "Theme" in titles and "Quit" in titles  # Textual's others stay


async def test_the_source_panes_own_keys_fit_its_footer() -> None:
    from textual.widgets import Footer

    from cockpit.ui.panes.source import SourcePane

    app = _app()
    async with app.run_test(size=(140, 44)) as pilot:
        app.show_detail("source")
        app.query_one(SourcePane).view.focus()
        footer = app.query_one(Footer)
        for _ in range(100):  # the footer is recomposed after the focus moves; on a busy machine, later
            await pilot.pause(0.05)
            if any(k.description == "Up the stack" and k.region.width for k in footer.query("FooterKey")):
                break
        shown = {key.description: key.region for key in footer.query("FooterKey")}
        edge = min(footer.region.right, shown.get("palette", footer.region).x)  # the palette key sits at the right
        whole = [d for d, r in shown.items() if r.width and r.right <= edge]
        for label in ("Up the stack", "Down the stack", "Edit these flags", "Close", "Quit", "Restart"):
            assert label in whole, whole
