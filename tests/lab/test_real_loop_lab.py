"""The cockpit's whole loop on a real SGLang 0.5.23 (issue 25, item 2), in the real-SGLang lab's
tp 1 unit: the seed incident's EAGLE mistake caught by SGLang's own dry run before the write,
written anyway, read in the journal and the source, fixed in the editor and back to ready; and a
load sweep whose tokens are the server's own count. Two real starts in all (the mistake dies in
its argument resolution, 9 to 17 s in here; the fix starts to ready), the sweep served by the start
the fix made: the server is left stopped for the next module."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cockpit.config import Config, HostConfig, LoadProfile, UnitConfig
from cockpit.lab.lab import REAL_UNITS
from cockpit.load.store import load_runs
from cockpit.sglang.server.metrics import samples
from cockpit.targets import Target
from cockpit.traceback.journal_rows import MAIN
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.attempts import AttemptsPane
from cockpit.ui.panes.flags import FlagsPane
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.source import SourcePane, SourceView
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.panes.throughput import ThroughputPane
from cockpit.ui.screens.write import WriteModal
from tests.conftest import LAB_SITE, LabHandle, until
from tests.lab.test_real_sglang_lab import START_S, end
from tests.unit.test_preflight import COCKPIT

pytestmark = pytest.mark.real_sglang

TP1 = "sglang-real-tp1.service"
TP1_FILE = f"/etc/systemd/system/{TP1}"
PORT = REAL_UNITS[TP1]
HOOK = f"{LAB_SITE}/sglang/srt/arg_groups/speculative_hook.py"
# The seed incident's mistake as NOTES has it: EAGLE3 and a top-k, neither steps nor draft tokens.
MISTAKE = (("speculative-algorithm", "EAGLE3"), ("speculative-eagle-topk", "4"))
INPUT_LEN, OUTPUT_LEN = 32, 16


@pytest.fixture(scope="module", autouse=True)
def stopped_after(real_lab: LabHandle) -> Iterator[None]:
    """The next module's tests start tp 1 themselves and read that start."""
    yield
    end(real_lab, TP1)
    real_lab.ssh("systemctl", "reset-failed", TP1, check=False)


def answers_ready(lab: LabHandle) -> bool:
    probe = f"import urllib.request as u; u.urlopen('http://127.0.0.1:{PORT}/ready', timeout=5)"
    return lab.ssh("python3", "-c", probe, check=False).returncode == 0


def serving(lab: LabHandle) -> None:
    """tp 1 ready: the start the fix below made where it ran, else one of its own."""
    if not answers_ready(lab):
        lab.ssh("systemctl", "start", TP1)
        lab.wait_for(lambda: answers_ready(lab), START_S, f"{TP1} to answer /ready")


@pytest.mark.timeout(720)
async def test_the_seed_mistake_is_caught_by_sglang_written_anyway_read_in_its_source_and_fixed(
    real_lab: LabHandle,
) -> None:
    """Driven as an operator would: the flags typed into the editor, w, y, the timeline the
    attempt opens, Esc, [, Enter, Enter, e from the source, del on the two flags, w, y."""
    lab = real_lab
    original = lab.ssh("cat", TP1_FILE).stdout
    try:
        app = CockpitApp(Config(), Target(lab.name, TP1))
        async with app.run_test(size=(160, 50)) as pilot:
            await until(lambda: app.session.unit is not None and app.session.deployment is not None, 60)
            await pilot.press("e")
            pane = app.query_one(FlagsPane)
            await until(lambda: pane.verdict is not None, 120, "SGLang's verdict on the unit as loaded")
            assert pane.verdict.outcome == "passed", pane.verdict
            for name, value in MISTAKE:  # as an operator types them: a, part of the name, Enter, the value
                await pilot.press("a", *name)
                await pilot.pause()
                await pilot.press("enter", *value, "enter")
                await pilot.pause()
            spec = [w for w in pane.edited.exec() if w.startswith("--speculative")]
            assert spec == ["--speculative-algorithm", "--speculative-eagle-topk"], pane.edited.exec()

            # SGLang's own verdict before anything is written
            await until(lambda: pane.verdict is not None, 120, "SGLang's verdict on the mistake")
            assert pane.verdict.outcome == "failed", pane.verdict
            [error] = [f for f in pane.findings if f.severity == "error"]
            assert error.rule == "dry-run" and "AssertionError in _handle_eagle_family" in error.message, error
            shown = str(pane.query_one("#flag-findings").render())
            assert f"SGLang 0.5.23's own verdict (a dry run on {lab.name}): it will not start" in shown, shown
            assert lab.ssh("cat", TP1_FILE).stdout == original
            await pilot.press("w")
            await until(lambda: isinstance(app.screen, WriteModal), 60, "the write modal")
            modal = app.screen
            assert str(modal.query_one("#yes").label) == "Write anyway (y)"
            said = "\n".join(str(s.render()) for s in modal.query(".dialog-body"))
            assert "expects the server NOT to start" in said and "AssertionError in _handle_eagle_family" in said
            # --device cpu: no process on the host's GPUs is in its way, and none is offered to end
            assert modal.holders == [] and "holds" not in said, said

            # written anyway: the real start dies of it
            await pilot.press("y")
            await until(lambda: [a.outcome for a in app.session.attempts()] not in ([], ["pending"]), START_S)
            [crash] = app.session.attempts()
            assert crash.outcome == "crashed" and crash.traceback is not None, crash
            assert crash.traceback["exception"] == "AssertionError", crash.traceback
            last = crash.traceback["frames"][-1]
            assert (last["file"], last["line"], last["function"]) == (HOOK, 1162, "_handle_eagle_family"), last
            listed = app.query_one(AttemptsPane)
            # the attempt, and under it #0, the unit as the cockpit first found it (the way back)
            await until(lambda: app.focused is listed and listed.option_count == 2, 10, "the timeline on the attempt")
            assert "the original" in str(listed.get_option_at_index(1).prompt)
            row = str(listed.get_option_at_index(0).prompt)
            assert row.startswith("✗ #1") and "crashed" in row and "AssertionError" in row, row

            # the journal: SGLang's traceback folded into one row, its failing frame opened
            view = app.query_one(JournalView)

            def folded() -> list[int]:
                return [i for i, tb in view.model.tracebacks() if tb.exception == "AssertionError" and tb.complete]

            await until(folded, 30, "the AssertionError in the journal pane")
            index = folded()[-1]
            tb = view.model.record(index)
            assert [part for i, part in view.model.rows if i == index] == [MAIN], "not one row"
            await pilot.press("escape")  # the timeline the attempt opened: back to the journal
            await pilot.pause()
            assert app.focused is view
            await pilot.press("G", "left_square_bracket")
            await pilot.pause()
            assert view.model.rows[view.cursor] == (index, MAIN)
            row = view.render_line(view.cursor - int(view.scroll_offset.y)).text
            assert f"▶ AssertionError [{len(tb.lines)} lines]" in row, row
            await pilot.press("enter")  # unfold: the cursor lands on the failing frame
            await pilot.pause()
            assert view.model.text(view.cursor).lstrip().startswith(f'File "{HOOK}", line 1162')
            await pilot.press("enter")
            source = app.query_one(SourcePane)
            code = source.query_one(SourceView)
            await until(lambda: code.shown is not None and code.shown.path == HOOK, 30, "the failing frame's source")
            assert code.shown.line == 1162 and (code.shown.start, code.shown.end) == (1160, 1163)
            assert code.lines[1161].strip() == "and cfg.speculative_num_draft_tokens is None"
            explained = str(source.query_one("#explanation").render())
            assert "`speculative_eagle_topk is None and speculative_num_draft_tokens is None`" in explained, explained
            assert "--speculative-eagle-topk 4, --speculative-num-draft-tokens unset" in explained, explained
            assert "--speculative-num-steps unset" in explained, explained

            # fixed in the editor opened from the source: the speculative flags out (the lab has no draft)
            source.focus()
            await pilot.press("e")
            await pilot.pause()
            pane = app.query_one(FlagsPane)
            assert pane._selected_name() == "--speculative-eagle-topk"  # the flag the statement read, set
            await pilot.press("delete")
            for _ in range(10):
                if pane._selected_name() == "--speculative-algorithm":
                    break
                await pilot.press("up")
            await pilot.press("delete")
            assert not [w for w in pane.edited.exec() if w.startswith("--speculative")], pane.edited.exec()
            await until(lambda: pane.verdict is not None, 120, "SGLang's verdict on the fix")
            assert pane.verdict.outcome == "passed", pane.verdict
            await pilot.press("w")
            await until(lambda: isinstance(app.screen, WriteModal), 60, "the write modal")
            assert str(app.screen.query_one("#yes").label) == "Write and restart (y)"
            await pilot.press("y")
            await until(lambda: len(app.session.attempts()) == 2, 30, "the fix's attempt")
            await until(lambda: app.session.attempts()[-1].outcome != "pending", START_S + 60, app.session.attempts)
            crashed, fixed = app.session.attempts()
            assert (crashed.outcome, fixed.outcome) == ("crashed", "ready"), fixed
            print(f"{TP1}: the mistake crashed in {crashed.seconds:.1f} s, the fix was ready in {fixed.seconds:.1f} s")
            status = app.query_one(StatusPane)
            await until(lambda: status.status is not None and status.status.ready, 30, lambda: status.status)
            await until(lambda: app.focused is listed and listed.option_count == 3, 10, "the timeline on the fix")
            rows = [str(listed.get_option_at_index(i).prompt) for i in range(2)]  # newest first
            assert rows[0].startswith("✓ #2") and "ready in" in rows[0], rows
            assert rows[1].startswith("✗ #1") and "crashed" in rows[1] and "AssertionError" in rows[1], rows
        assert lab.ssh("cat", TP1_FILE).stdout == original  # every other byte of the unit as it was
        assert answers_ready(lab)
    except BaseException:
        lab.ssh("tee", TP1_FILE, input=original)
        lab.ssh("systemctl", "daemon-reload")
        end(lab, TP1)
        raise
    finally:
        lab.ssh("sh", "-c", f"rm -f {TP1_FILE}.cockpit-bak.*")


@dataclass(frozen=True)
class Counters:
    """The server's own token counters, summed over their labels (`is_streaming` for two)."""

    generated: float
    prompted: float
    cached: float  # absent until the first cache hit: 0 then


def counters(lab: LabHandle) -> Counters:
    read = f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{PORT}/metrics').read().decode())"
    found = samples(lab.ssh("python3", "-c", read).stdout)

    def total(name: str) -> float:
        return sum(s.value for s in found if s.name == name)

    return Counters(total("generation_tokens_total"), total("prompt_tokens_total"), total("cached_tokens_total"))


def assert_adds_up(record: dict, before: Counters, after: Counters) -> None:
    """The run's levels, warm-up included, against what the server counted meanwhile."""
    levels = record["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2], levels
    for lv in levels:
        assert lv["errors"] == 0 and lv["token_count_source"] == "usage", lv
        # ignore_eos: every token asked for, in the server's usage
        assert lv["output_tokens"] == lv["requests"] * OUTPUT_LEN, lv
        assert lv["warmup_output_tokens"] == lv["warmup_requests"] * OUTPUT_LEN, lv
        # each word of the runner's prompts is one token of the server's tokenizer
        assert lv["prompt_tokens"] == lv["requests"] * INPUT_LEN, lv
        assert lv["warmup_prompt_tokens"] == lv["warmup_requests"] * INPUT_LEN, lv
    sent = sum(lv["output_tokens"] + lv["warmup_output_tokens"] for lv in levels)
    prompts = sum(lv["prompt_tokens"] + lv["warmup_prompt_tokens"] for lv in levels)
    assert after.generated - before.generated == sent, (before, after, sent)
    assert after.prompted - before.prompted == prompts, (before, after, prompts)
    # different prompts, a run's own: the prefix cache serves little of them (with the runner's
    # old words, 344 of 384 tokens; a repeat of a run's seed, 372 of 384)
    assert after.cached - before.cached < 0.1 * prompts, (before, after, prompts)
    print(f"{TP1}: {sent} tokens generated, {prompts} prompt tokens, {after.cached - before.cached:g} cached")


@pytest.mark.timeout(480)
def test_cockpit_bench_at_concurrency_1_and_2_counts_what_the_server_counted(
    real_lab: LabHandle, tmp_path: Path
) -> None:
    """`cockpit bench` against the server's own `generation_tokens_total`, to the token."""
    lab = real_lab
    serving(lab)
    before = counters(lab)
    out = tmp_path / "run.json"
    levels = ("--concurrency", "1,2", "--requests", "4", "--input-len", str(INPUT_LEN), "--output-len", str(OUTPUT_LEN))
    bench = subprocess.run(
        [COCKPIT, "bench", "--host", lab.name, "--unit", TP1, *levels, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert_adds_up(json.loads(out.read_text()), before, counters(lab))
    # Saved where the app's compare (c) finds the unit's runs, as the app's own b saves them.
    [(path, saved)] = load_runs(lab.name, TP1)
    assert saved == json.loads(out.read_text()) and f"the run is saved as {path}" in bench.stderr


@pytest.mark.timeout(480)
async def test_the_apps_load_profile_counts_what_the_server_counted(real_lab: LabHandle) -> None:
    """The app's b, the unit's load profile, against the same counters."""
    lab = real_lab
    serving(lab)
    before = counters(lab)
    profile = LoadProfile(
        name="loop", concurrency=(1, 2), requests=4, warmup=2, input_len=INPUT_LEN, output_len=OUTPUT_LEN
    )
    config = Config(
        hosts={lab.name: HostConfig(name=lab.name)},
        units={"tp1": UnitConfig(name="tp1", host=lab.name, unit=TP1, profile="loop")},
        profiles={"loop": profile},
    )
    app = CockpitApp(config, Target(lab.name, TP1, profile="loop"))
    async with app.run_test(size=(160, 50)) as pilot:
        head = app.query_one(ThroughputPane).query_one("#run-head")
        # where the server listens is the unit's own --port, known once the unit is read
        await until(lambda: app.session.address == ("127.0.0.1", PORT), 60, lambda: app.session.address)
        await pilot.press("b", "y")  # the load run, confirmed
        await until(lambda: "done:" in str(head.render()), 240, lambda: str(head.render()))
    [(_, record)] = load_runs(lab.name, TP1)
    assert record["server_args"]["port"] == PORT, record["server_args"]  # its own /server_info
    assert_adds_up(record, before, counters(lab))
