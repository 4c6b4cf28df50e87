"""The source pane: a real file at the failing line, the statement marked and explained (the messages
for a missing file, a file we may not read and a package upgraded since the crash, and the real
source opened from the journal in the lab: tests/lab/test_source_pane_lab.py)."""

from __future__ import annotations

from cockpit.config import Config
from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.explain.explain import explain
from cockpit.systemd.entry import parse_json_line
from cockpit.targets import Target
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.source import Shown, SourcePane, highlight
from tests.conftest import ROOT

HOOK = "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/arg_groups/speculative_hook.py"


def test_snapshot_source_pane(snap_compare, sglang_root) -> None:
    root = sglang_root("0.5.23")
    path = root / "sglang/srt/arg_groups/speculative_hook.py"
    text = path.read_text()
    result = explain(text, HOOK, 1162, exception="AssertionError", catalog=load_catalog(root))
    lines = highlight(text, "monokai")

    async def run_before(pilot) -> None:
        pane = pilot.app.query_one(SourcePane)
        pilot.app.query_one(JournalView).append_entries(
            [parse_json_line(line) for line in (ROOT / "tests/data/journal-eagle.jsonl").read_text().splitlines()]
        )
        pilot.app.show_detail("source")
        pane.set_title(f"{HOOK}:1162 · frame 10 of 10 · _handle_eagle_family")
        pane.view.show(Shown("cockpit-lab", HOOK, 0.0, 1162, result.start_line, result.end_line), text, lines)
        pane.set_message(
            "AssertionError\n"
            + result.sentence({"--speculative-eagle-topk": "4", "--speculative-num-draft-tokens": "3"})
        )
        pane.view.focus()
        await pilot.pause()

    app = CockpitApp(Config(), Target("cockpit-lab", "sglang-demo.service"), live=False)
    assert snap_compare(app, terminal_size=(140, 44), run_before=run_before)
