"""The real-SGLang lab (`cockpit lab up --real-sglang`): SGLang 0.5.23 really imports in the service
Python, so the pre-flight's dry run runs end to end through the cockpit's own path (over SSH, in
the unit's Python) and gives SGLang's own verdict; the stand-in dies with SGLang's own traceback
instead of a replay; and SGLang itself serves: the lab's tp 1 and tp 2 units start on the CPU, on
its tiny random-weight Llama, to SGLang's own ready line, answer /generate with tokens, the app
and `cockpit status` read them ready, and no name of the lab's import-only sgl_kernel is called
(each says `cockpit lab: sgl_kernel.NAME called` in the journal when it is). One start of each,
one after the other: a start takes 3 to 4 GB and both cores for half a minute and more. Its image
is a second one (about 6 GB, built once and cached)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from textual.widgets import Label

from cockpit.config import Config
from cockpit.incident import render
from cockpit.lab.lab import REAL_UNITS, Lab, generate
from cockpit.load.passive import ThroughputPoint
from cockpit.remote.pool import HostPool
from cockpit.session import Session
from cockpit.sglang.catalog.catalogs import CatalogCache
from cockpit.sglang.catalog.generation import SWITCH
from cockpit.sglang.deployments.fleet import READY as FLEET_READY
from cockpit.sglang.deployments.fleet import FleetReader
from cockpit.sglang.deployments.status_read import read_status
from cockpit.systemd.readiness import RECHECK_S, LastAnswer
from cockpit.targets import Target
from cockpit.traceback.model import Line
from cockpit.traceback.stack_dump import folded
from cockpit.ui.app import CockpitApp
from cockpit.ui.panes.flags import FlagsPane
from cockpit.ui.panes.journal import JournalView
from cockpit.ui.panes.status import StatusPane
from cockpit.ui.panes.throughput import SparkRow
from cockpit.ui.screens.startup import StartupScreen
from tests.conftest import LabHandle, until
from tests.lab.standin_units import standin_unit
from tests.lab.test_model_checks_lab import model_findings
from tests.unit.test_preflight import COCKPIT

pytestmark = pytest.mark.real_sglang

SEED = (
    "--speculative-algorithm EAGLE3 --speculative-draft-model-path /models/EAGLE3-LLaMA3.1-Instruct-8B "
    "--speculative-eagle-topk 4 --speculative-num-draft-tokens 3"
)


def preflight(lab: LabHandle, unit: str) -> list[dict]:
    out = subprocess.run(
        [COCKPIT, "preflight", "--host", lab.name, "--unit", unit, "--json"],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return json.loads(out.stdout)


def verdict(findings: list[dict]) -> str:
    [said] = [f["message"] for f in findings if f["rule"] == "dry-run" and f["severity"] == "info"]
    return said.rsplit(": ", 1)[1]


def dry_run_errors(findings: list[dict]) -> list[dict]:
    return [f for f in findings if f["rule"] == "dry-run" and f["severity"] == "error"]


def test_sglang_imports_in_the_units_python(real_lab: LabHandle) -> None:
    probe = "import sglang, torch; print(sglang.__version__, torch.__version__)"
    out = real_lab.ssh("/opt/sglang/venv/bin/python", "-c", probe, timeout=120).stdout.split()
    assert out[0] == "0.5.23" and out[1].startswith("2.14.1"), out


def test_the_dry_run_gives_sglangs_verdict_on_a_passing_unit(real_lab: LabHandle) -> None:
    findings = preflight(real_lab, "sglang-demo.service")
    assert verdict(findings) == "passed", findings
    assert not [f for f in findings if f["severity"] == "error"], findings


@pytest.mark.parametrize(
    ("case", "flags", "raised", "named", "words"),
    [
        # The seed incident: SGLang's own assertion, with the three flags named from its source.
        (
            "seed",
            SEED,
            "AssertionError",
            {"--speculative-eagle-topk", "--speculative-num-draft-tokens", "--speculative-num-steps"},
            "_handle_eagle_family",
        ),
        # argparse's refusal, in the release's own words.
        ("argparse", "--chunked-prefill-size abc", "SystemExit(2)", {"--chunked-prefill-size"}, "invalid int value"),
        # Outside the EAGLE family: a value check of the release's validations.
        (
            "mm-limit",
            """--limit-mm-data-per-request '{"text": 1}'""",
            "ValueError",
            {"--limit-mm-data-per-request"},
            "Invalid modality 'text'",
        ),
        # Outside the EAGLE family: what launch_server checks after resolving.
        ("served-name", "--served-model-name a:b", "AssertionError", {"--served-model-name"}, "check_server_args"),
    ],
)
def test_the_dry_run_gives_sglangs_own_failure(
    real_lab: LabHandle, case: str, flags: str, raised: str, named: set[str], words: str
) -> None:
    with standin_unit(real_lab, f"sglang-dry-{case}.service", 30100, flags=flags, start=False) as unit:
        findings = preflight(real_lab, unit)
    assert verdict(findings) == "failed", findings
    [error] = dry_run_errors(findings)
    assert error["would_raise"] == raised, error
    assert named <= set(error["flags"]), error
    assert words in error["message"], error


def test_the_standin_dies_with_sglangs_own_traceback(real_lab: LabHandle) -> None:
    """No replay here: the stand-in runs 0.5.23's resolution, which raises in its own source."""
    with standin_unit(real_lab, "sglang-seed.service", 30101, flags=SEED, restart=False, start=False) as unit:
        real_lab.ssh("systemctl", "start", unit)
        real_lab.wait_for(
            lambda: real_lab.ssh("systemctl", "is-failed", unit, check=False).stdout.strip() == "failed",
            timeout=90,
            what="the seed unit to fail",
        )
        journal = real_lab.ssh("journalctl", "-u", unit, "-o", "cat").stdout
    site = "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/"
    assert f'File "{site}server_args.py"' in journal and "in _handle_eagle_family" in journal, journal[-3000:]
    assert "\nAssertionError\n" in journal + "\n", journal[-3000:]  # the release's bare assertion
    assert "replays" not in journal, journal[-3000:]


async def test_the_flag_editor_shows_sglangs_own_verdict(real_lab: LabHandle) -> None:
    app = CockpitApp(Config(), Target(real_lab.name, "sglang-demo.service"))
    async with app.run_test(size=(150, 50)) as pilot:
        await until(lambda: app.session.unit is not None and app.session.deployment is not None, 60)
        await pilot.press("e")
        pane = app.query_one(FlagsPane)
        await until(lambda: pane.verdict is not None, 90, "SGLang's verdict on the unit as loaded")
        assert pane.verdict.outcome == "passed", pane.verdict
        edited = pane.edited
        for name, value in zip(SEED.split()[::2], SEED.split()[1::2], strict=True):
            edited = edited.set_flag(name, value)
        pane.edited = edited
        pane._refresh()
        await until(lambda: pane.verdict is not None, 90, "SGLang's verdict on the seed incident's flags")
        assert pane.verdict.outcome == "failed", pane.verdict
        [error] = [f for f in pane.findings if f.severity == "error"]  # SGLang's, in place of the static one
        assert error.rule == "dry-run" and "AssertionError in _handle_eagle_family" in error.message, error
        assert "--speculative-num-steps" in (error.fix or ""), error  # the static rule's fix, on SGLang's verdict
        shown = str(pane.query_one("#flag-findings").render())
        assert f"SGLang 0.5.23's own verdict (a dry run on {real_lab.name}): it will not start" in shown, shown
        runs = app.session.dry_runs.runs
        await pilot.press("ctrl+z")  # back to the flags as loaded: SGLang's verdict on them is kept
        await until(lambda: pane.verdict is not None, 10, "the kept verdict")
        assert pane.verdict.outcome == "passed" and app.session.dry_runs.runs == runs


async def test_a_dropped_dry_run_ends_its_probe_on_the_host(real_lab: LabHandle) -> None:
    """The editor drops a dry run at the next edit; a closed SSH channel does not end a process,
    so the probe is ended by name, not left resolving flags nobody waits for."""
    from cockpit.config import HostConfig
    from cockpit.remote.ssh import SSHHost
    from cockpit.sglang.preflight.preflight import dry_run

    def probes() -> list[str]:
        out = real_lab.ssh("pgrep", "-af", "cockpit_probe=", check=False).stdout
        return [line for line in out.splitlines() if "pgrep" not in line]

    host = SSHHost(HostConfig(name=real_lab.name))
    try:
        python, flags = "/opt/sglang/venv/bin/python", ["--model-path", "/models/Llama-3.1-8B-Instruct"]
        asked = asyncio.create_task(dry_run(host, python, flags, None))
        await until(lambda: probes(), 30, "the probe on the host")
        asked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asked
        # Left alone it would import SGLang for about 7 s more (the verdicts above took 7 s and longer).
        await until(lambda: not probes(), 3, "the dropped probe to end")
    finally:
        await host.close()


READY = "The server is fired up and ready to roll!"
STAND_IN_CALLED = "cockpit lab: sgl_kernel."
START_S = 240  # 17 to 36 s idle here, 60 to 70 s on a loaded machine (NOTES); tp 2 takes longer


def journal(lab: LabHandle, unit: str) -> str:
    """The unit's lines: each real unit starts once in this module, so those of that start."""
    return lab.ssh("journalctl", "-u", unit, "-o", "cat", "--no-pager").stdout


def wait_ready(lab: LabHandle, unit: str) -> None:
    """The ready line of the unit's running start (an earlier start's is in its journal too),
    polled on the host, once a second, in one SSH session: both cores are the server's now."""
    script = (
        f'for i in $(seq {START_S}); do journalctl -u "$1" -o cat '
        '_SYSTEMD_INVOCATION_ID="$(systemctl show -p InvocationID --value "$1")" | grep -qF "$2" && exit 0; '
        'systemctl -q is-failed "$1" && exit 2; sleep 1; done; exit 1'
    )
    waited = lab.ssh("sh", "-c", script, "sh", unit, READY, check=False, timeout=START_S + 30)
    assert waited.returncode == 0, f"{unit} never said it was ready: {journal(lab, unit)[-3000:]}"


def end(lab: LabHandle, unit: str) -> None:
    """Every process of the unit at once, so the next start has the memory and the cores: a plain
    stop spends 5 s in SGLang's crash diagnostics (tests/data/sglang-0.5.23/real-tp1-stop.jsonl)."""
    lab.ssh("systemctl", "kill", "--signal=SIGKILL", unit, check=False)
    lab.wait_for(lambda: lab.ssh("systemctl", "is-active", unit, check=False).stdout.strip() != "active", 30)


def assert_no_stand_in_called(lab: LabHandle, unit: str) -> None:
    """The unit's `import sgl_kernel` is the lab's stand-in, and none of its names was called."""
    environment = lab.ssh("systemctl", "show", "-p", "Environment", "--value", unit).stdout.split()
    probe = "import sgl_kernel; print(sgl_kernel.__file__)"
    found = lab.ssh("env", *environment, "/opt/sglang/venv/bin/python", "-c", probe).stdout.strip()
    assert found == "/opt/cockpit-lab/guest/sgl_kernel_stub/sgl_kernel.py", found
    lines = journal(lab, unit)
    assert READY in lines and STAND_IN_CALLED not in lines, lines[-3000:]


def cockpit(lab: LabHandle, unit: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """`cockpit ARGV --host LAB --unit UNIT`, run as a user runs it."""
    return subprocess.run(
        [COCKPIT, *argv, "--host", lab.name, "--unit", unit],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def assert_generates(lab: LabHandle, port: int) -> None:
    answer = generate(Lab(lab.name), "what is the model ?", port, tokens=8)
    ids, meta = answer["output_ids"], answer["meta_info"]
    assert isinstance(ids, list) and isinstance(meta, dict), answer
    assert len(ids) == 8 and all(0 <= i < 64 for i in ids), answer  # the tiny model's 64 words
    assert meta["completion_tokens"] == 8 and str(answer["text"]).strip(), answer


@pytest.mark.timeout(480)
async def test_tp1_serves_in_the_app_and_calls_no_sgl_kernel_stand_in(real_lab: LabHandle) -> None:
    lab, unit = real_lab, "sglang-real-tp1.service"
    lab.ssh("systemctl", "start", unit)
    try:
        app = CockpitApp(Config(), Target(lab.name, unit))
        async with app.run_test(size=(150, 40)):
            pane = app.query_one(StatusPane)
            await until(lambda: pane.status is not None and pane.status.ready, START_S, lambda: pane.status)
            assert "ready ✓" in str(pane.render()), str(pane.render())
            view = app.query_one(JournalView)
            await until(
                lambda: any(isinstance(r, Line) and READY in r.text for r in view.model.records),
                10,
                "SGLang's ready line in the journal pane",
            )
        assert_generates(lab, REAL_UNITS[unit])
        assert_no_stand_in_called(lab, unit)
    finally:
        end(lab, unit)


@pytest.mark.timeout(480)
def test_tp2_reaches_ready_and_calls_no_sgl_kernel_stand_in(real_lab: LabHandle) -> None:
    lab, unit = real_lab, "sglang-real-tp2.service"
    lab.ssh("systemctl", "start", unit)
    try:
        wait_ready(lab, unit)
        lines = journal(lab, unit)
        assert " TP0] Load weight end." in lines and " TP1] Load weight end." in lines, lines[-3000:]
        assert_generates(lab, REAL_UNITS[unit])
        status = cockpit(lab, unit, "status", "--json")
        told = json.loads(status.stdout)
        assert status.returncode == 0 and told["readiness"] == "ready", status.stdout + status.stderr
        ranks = {p["title"]: p["rank"] for p in told["processes"]}
        assert {
            "sglang::scheduler_TP0": "TP0",
            "sglang::scheduler_TP1": "TP1",
            "sglang::detokenizer": None,
        }.items() <= ranks.items(), ranks
        dumped = json.loads(cockpit(lab, unit, "stacks", "--json").stdout)["processes"]
        assert sorted((p["title"], p["rank"]) for p in dumped if p["rank"]) == [
            ("sglang::scheduler_TP0", "TP0"),
            ("sglang::scheduler_TP1", "TP1"),
        ], dumped
        assert_no_stand_in_called(lab, unit)
    finally:
        end(lab, unit)


PROMPT = "what is the model ?"  # five words of the tiny model's tokenizer


def unit_start(lab: LabHandle, unit: str) -> tuple[str, float]:
    """The unit's invocation and systemd's own ExecMainStartTimestamp, to the microsecond."""
    shown = lab.ssh("systemctl", "show", "--timestamp=us+utc", "-p", "InvocationID,ExecMainStartTimestamp", unit).stdout
    props = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    at = datetime.strptime(props["ExecMainStartTimestamp"], "%a %Y-%m-%d %H:%M:%S.%f %Z")
    return props["InvocationID"], at.replace(tzinfo=timezone.utc).timestamp()


def stamp_of(lab: LabHandle, unit: str, invocation: str, text: str) -> float:
    """journald's own stamp of the first line of the start holding `text`."""
    out = lab.ssh("journalctl", "-u", unit, f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "json").stdout
    entries = [json.loads(line) for line in out.splitlines()]
    return next(int(e["__REALTIME_TIMESTAMP"]) / 1e6 for e in entries if text in str(e.get("MESSAGE", "")))


@pytest.mark.timeout(480)
async def test_a_real_tp1_start_is_timed_from_the_units_start_with_its_imports(real_lab: LabHandle) -> None:
    """Issue 25, item 6: the real main process prints its first line seconds after systemd's
    Started and the scheduler imports for more before `Init parallel begin.`; the timeline (the
    app's readiness while it starts, `p`, the incident note) has an imports phase from systemd's
    ExecMainStartTimestamp, and its phases add up to the time from there to the ready line, as
    systemd and journald stamped them in this run."""
    lab, unit = real_lab, "sglang-real-tp1.service"
    app = CockpitApp(Config(), Target(lab.name, unit))
    try:
        async with app.run_test(size=(150, 40)) as pilot:
            pane = app.query_one(StatusPane)
            await until(lambda: pane.status is not None, 60, "the unit's status")
            lab.ssh("systemctl", "start", unit)
            reasons: list[str] = []

            def ready() -> bool:
                status = pane.status
                if status is not None and status.readiness == "starting":
                    reasons.append(status.readiness_reason)
                return status is not None and bool(status.ready) and status.invocation_id is not None

            await until(ready, START_S, lambda: (pane.status, reasons[-3:]))
            assert any(re.match(r"in imports for \d+ s; ", r) for r in reasons), reasons
            invocation, started = unit_start(lab, unit)
            began = stamp_of(lab, unit, invocation, "Init parallel begin.")
            ready_at = stamp_of(lab, unit, invocation, READY)
            await until(lambda: app.session.timeline() is not None, 10)
            await pilot.press("p")
            screen = app.screen
            assert isinstance(screen, StartupScreen)
            timeline = screen.timeline
            assert timeline.invocation == invocation
            assert timeline.started_at is not None and abs(timeline.started_at - started) < 0.01, (timeline, started)
            imports = timeline.seconds("", "imports")
            assert imports is not None and abs(imports - (began - started)) < 0.01, (imports, began - started)
            assert imports > 5  # 14 to 33 s here: the most of a real start
            durations = timeline.durations()
            assert list(durations)[0] == "imports" and "warm_up" in durations, durations
            assert abs(sum(durations.values()) - (ready_at - started)) < 1, (durations, ready_at - started)
            shown = "\n".join(str(w.render()) for w in screen.query(Label))
            said = re.search(r"ready (\d+\.\d) s after the unit's start", shown)
            assert said is not None and abs(float(said[1]) - (ready_at - started)) < 0.1, (shown, ready_at - started)
            assert "KV cache: 16,384 tokens (dtype torch.bfloat16" in shown and "SGLang's own timings: " in shown, shown
            note = render(await app.session.incident())
            section = note[note.index("## Start-up") :]
            assert "| imports | rank 0 " in section and "after the unit's start" in section, section[:2000]
    finally:
        end(lab, unit)


@pytest.mark.timeout(480)
async def test_the_server_row_of_a_real_plain_server(real_lab: LabHandle) -> None:
    """Issue 25, item 2: a real 0.5.23 without speculative decoding exports its accept gauges at
    0.0, and its prefix-cache counter only from the first hit: the server row says no accept
    figure, a hit rate of 0% while nothing was cached, and, over the poll that holds a repeat of
    a prompt, the share of its prompt tokens the radix cache served as the server answered it."""
    lab, unit = real_lab, "sglang-real-tp1.service"
    port = REAL_UNITS[unit]
    lab.ssh("systemctl", "start", unit)
    app = CockpitApp(Config(), Target(lab.name, unit))
    try:
        async with app.run_test(size=(150, 40)):
            session = app.session
            await until(lambda: session.status is not None and session.status.ready, START_S, lambda: session.status)
            app.action_throughput()
            row = app.query_one("#row-passive", SparkRow)

            def figures() -> str:
                """The row's tok/s and, on its own wrapped line under it, the server's other figures."""
                return f"{row.shown} · {app.query_one('#passive-words', Label).render()}"

            async def polled_after(done: float) -> ThroughputPoint:
                """The first /metrics reading after a request was answered (the server counts it
                before it answers): its interval holds that request and nothing after it."""

                def fresh() -> bool:
                    latest = app.session.passive.latest
                    return latest is not None and latest.source == "metrics" and latest.time > done

                await until(fresh, 30, lambda: list(app.session.passive)[-3:])
                point = app.session.passive.latest
                assert point is not None
                return point

            first = await asyncio.to_thread(generate, Lab(lab.name), PROMPT, port, 8)
            assert first["meta_info"]["cached_tokens"] == 0, first  # type: ignore[index]
            point = await polled_after(time.time())
            assert point.accept_len is None and point.accept_rate is None, point
            assert row.row_name == "server (/metrics)" and "accept" not in figures(), figures()
            assert figures().endswith("prefix cache hit 0%"), figures()
            again = await asyncio.to_thread(generate, Lab(lab.name), PROMPT, port, 8)
            meta = again["meta_info"]
            assert isinstance(meta, dict) and meta["cached_tokens"] > 0, again  # the radix cache: 4 of 5 here
            point = await polled_after(time.time())
            truth = meta["cached_tokens"] / meta["prompt_tokens"]
            assert point.cache_hit_rate == truth, (point, meta)
            shown = figures()
            assert shown.endswith(f"prefix cache hit {100 * truth:.0f}%") and "accept" not in shown, shown
        metrics = lab.ssh(
            "python3",
            "-c",
            f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/metrics').read().decode())",
        ).stdout
        assert 'sglang:cached_tokens_total{cache_source="device",' in metrics, metrics[-3000:]
        assert re.search(r"^sglang:spec_accept_length\{.*\} 0\.0$", metrics, re.M), metrics[-3000:]
    finally:
        end(lab, unit)


# -- a stop told from a crash (issue 25, item 5) --------------------------------------------------

TP1 = "sglang-real-tp1.service"
TP1_FILE = f"/etc/systemd/system/{TP1}"


def start_ready(lab: LabHandle, unit: str) -> None:
    """Start the unit and wait for its /ready, polled on the host once a second in one SSH session
    (the journal's ready line would be any earlier start's too)."""
    probe = f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{REAL_UNITS[unit]}/ready', timeout=5)"
    script = (
        f'systemctl start "$1"; for i in $(seq {START_S}); do python3 -c "$2" 2>/dev/null && exit 0; '
        'systemctl -q is-failed "$1" && exit 2; sleep 1; done; exit 1'
    )
    started = lab.ssh("sh", "-c", script, "sh", unit, probe, check=False, timeout=START_S + 30)
    assert started.returncode == 0, f"{unit} never answered /ready: {journal(lab, unit)[-3000:]}"


def stop(lab: LabHandle, unit: str) -> tuple[str, str]:
    """`systemctl stop` by someone else than the cockpit; (ActiveState, Result) once it is done."""
    lab.ssh("systemctl", "stop", unit, timeout=120)
    shown = lab.ssh("systemctl", "show", "-p", "ActiveState,Result", unit).stdout  # in systemd's order, not ours
    props = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    return props["ActiveState"], props["Result"]


def kill_scheduler(lab: LabHandle, unit: str) -> None:
    """kill -9 of the unit's `sglang::scheduler`: the crash a stop must not be taken for."""
    script = 'kill -9 $(pgrep -P "$(systemctl show -p MainPID --value "$1")" -f "^sglang::scheduler")'
    lab.ssh("sh", "-c", script, "sh", unit)


@pytest.mark.timeout(600)
async def test_a_plain_stop_by_someone_else_is_said_as_a_stop_and_a_kill_as_a_crash(real_lab: LabHandle) -> None:
    """Under the default KillMode a `systemctl stop` ends `failed`, Result=signal, 9/KILL, as a kill
    -9 of a scheduler does (tests/data/sglang-0.5.23/README.md); systemd's journal says which."""
    lab, unit = real_lab, TP1
    start_ready(lab, unit)
    try:
        app = CockpitApp(Config(), Target(lab.name, unit))
        async with app.run_test(size=(150, 40)):
            pane, view = app.query_one(StatusPane), app.query_one(JournalView)
            await until(lambda: pane.status is not None and pane.status.ready, START_S, lambda: pane.status)
            first = pane.status.invocation_id
            ended = stop(lab, unit)
            await until(lambda: pane.status.active_state in ("failed", "inactive"), 30, lambda: pane.status)
            shown = str(pane.render())
            if ended == ("failed", "signal"):  # 10 of 10 plain stops here; a graceful one leaves no exit to say
                assert "last exit stopped by a stop job (killed 9/KILL)" in shown, shown
                assert "down ✗" in shown and "not a crash" in shown, shown
            lab.ssh("systemctl", "start", unit)
            await until(lambda: pane.status.invocation_id not in (None, first), 60, lambda: pane.status)
            await until(
                lambda: any("previous exit: stopped by a stop job" in t for t in view.model.separators.values()),
                60,
                lambda: view.model.separators,
            )
            await until(lambda: pane.status.ready, START_S, lambda: pane.status)
            second = pane.status.invocation_id
            kill_scheduler(lab, unit)
            await until(
                lambda: pane.status.active_state == "failed" and pane.status.invocation_id == second, 60, pane.status
            )
            shown = str(pane.render())
            assert "last exit killed 9/KILL" in shown and "stopped by" not in shown, shown
    finally:
        end(lab, unit)


@pytest.mark.timeout(600)
async def test_the_cockpits_own_restart_is_recorded_as_a_restart_watched_to_the_next_start(
    real_lab: LabHandle,
) -> None:
    """The app's `r`: one attempt whose outcome is the new start's (ready), however badly the start
    it stopped died of the stop (under the default KillMode, 9/KILL in 4 of 6 restarts here)."""
    from cockpit.ui.panes.attempts import AttemptsPane
    from cockpit.ui.screens.confirm import ConfirmModal

    lab, unit = real_lab, TP1
    start_ready(lab, unit)
    try:
        app = CockpitApp(Config(), Target(lab.name, unit))
        async with app.run_test(size=(150, 40)) as pilot:
            pane, view = app.query_one(StatusPane), app.query_one(JournalView)
            await until(lambda: pane.status is not None and pane.status.ready, START_S, lambda: pane.status)
            await until(lambda: app.session.unit is not None, 30, "the unit file")
            first = pane.status.invocation_id
            await pilot.press("r")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmModal)
            await pilot.press("y")
            await until(lambda: [a.outcome for a in app.session.attempts()] not in ([], ["pending"]), START_S + 60)
            [attempt] = app.session.attempts()
            assert (attempt.note, attempt.outcome, attempt.texts, attempt.traceback) == ("restart", "ready", {}, None)
            assert attempt.detail.startswith("the start before it: stopped by the cockpit's restart"), attempt
            await until(lambda: pane.status.invocation_id != first and pane.status.ready, 30, lambda: pane.status)
            assert "last exit stopped by the cockpit's restart" in str(pane.render()), str(pane.render())
            listed = app.query_one(AttemptsPane)
            await until(lambda: listed.option_count == 2, 5, "the timeline opened on the attempt (and #0)")
            row = str(listed.get_option_at_index(0).prompt)
            assert "✓ #1" in row and "ready in" in row and "restart" in row and "crash" not in row, row
            assert any("previous exit: stopped by a stop job" in t for t in view.model.separators.values())
    finally:
        end(lab, unit)


@pytest.mark.timeout(900)
async def test_the_preflight_warns_of_the_kill_mode_and_its_edit_makes_a_stop_clean(real_lab: LabHandle) -> None:
    """`cockpit preflight` warns on the lab's unit as shipped (no KillMode=); `KillMode=mixed`, set in
    the editor's unit view (R, k) and written by its w, makes every stop end inactive, Result=success."""
    from cockpit.ui.screens.write import WriteModal

    lab, unit = real_lab, TP1
    original = lab.ssh("cat", TP1_FILE).stdout

    def kill_mode_findings() -> list[dict]:
        return model_findings(lab, unit, "kill-mode")

    try:
        [warned] = kill_mode_findings()
        assert warned["severity"] == "warning" and warned["fix"].startswith("KillMode=mixed in [Service]"), warned
        app = CockpitApp(Config(), Target(lab.name, unit))
        async with app.run_test(size=(150, 50)) as pilot:
            await until(lambda: app.session.unit is not None and app.session.deployment is not None, 60)
            await pilot.press("e")
            pane = app.query_one(FlagsPane)
            assert [f.rule for f in pane.findings if f.rule == "kill-mode"] == ["kill-mode"]
            await pilot.press("R", "k")
            await pilot.pause()
            await pilot.press("w")
            await until(lambda: isinstance(app.screen, WriteModal), 30, "the write modal")
            await pilot.press("y")
            await until(lambda: [a.outcome for a in app.session.attempts()] not in ([], ["pending"]), START_S + 60)
            [attempt] = app.session.attempts()
            assert attempt.outcome == "ready", attempt
            written = original.replace("--port 30010\n", "--port 30010\nKillMode=mixed\n")
            assert list(attempt.texts.values()) == [written], attempt.texts
        assert lab.ssh("systemctl", "show", "-p", "KillMode", "--value", unit).stdout.strip() == "mixed"
        assert kill_mode_findings() == []
        # Under the default KillMode 13 of 13 stops ended `failed` (docs/facts.md): under mixed,
        # the stop after the app's restart and one after a start of its own end clean.
        after = [stop(lab, unit)]
        start_ready(lab, unit)
        after.append(stop(lab, unit))
        assert after == [("inactive", "success")] * 2, after
    finally:
        lab.ssh("tee", TP1_FILE, input=original)
        lab.ssh("sh", "-c", f"rm -f {TP1_FILE}.cockpit-bak.*")
        lab.ssh("systemctl", "daemon-reload")
        end(lab, unit)


# -- /health generates a token; the tp 1 scheduler is rank 0 (issue 25, items 1 and 3) ------------

SERVING = "sglang-real-tp1.service"  # started once for the tests below, which only read it
ON_BY_DEFAULT = f"{SWITCH} is on, SGLang 0.5.23's default"
HEALTH_PREFILL = "Prefill batch, #new-seq: 1, #new-token: 1,"  # the one token of a health check
HEALTH_ASKED = '"GET /health '  # its access line
GENERATE_ASKED = '"GET /health_generate '
QUICK_HEALTH = (  # /health's status and seconds, on the lab
    "import sys, time, urllib.request\nbegan = time.monotonic()\n"
    "said = urllib.request.urlopen(f'http://127.0.0.1:{sys.argv[1]}/health', timeout=10).status\n"
    "print(said, time.monotonic() - began)\n"
)


@pytest.fixture(scope="module")
def serving(real_lab: LabHandle) -> Iterator[LabHandle]:
    real_lab.ssh("systemctl", "start", SERVING)
    try:
        wait_ready(real_lab, SERVING)
        yield real_lab
    finally:
        end(real_lab, SERVING)


def cursor(lab: LabHandle, unit: str) -> str:
    """The cursor of the unit's last journal entry now."""
    shown = lab.ssh("journalctl", "-u", unit, "-n", "0", "--show-cursor").stdout
    return shown.rsplit("-- cursor: ", 1)[1].strip()


def lines_after(lab: LabHandle, unit: str, after: str, asks: int = 1, generates: int = 0) -> str:
    """The unit's lines since `after`, once journald has the access lines of `asks` asks of
    /health and `generates` of /health_generate."""
    said = ""

    def read() -> bool:
        nonlocal said
        said = lab.ssh("journalctl", "-u", unit, "-o", "cat", f"--after-cursor={after}").stdout
        return said.count(HEALTH_ASKED) >= asks and said.count(GENERATE_ASKED) >= generates

    lab.wait_for(read, 10, f"{asks} access lines of /health and {generates} of /health_generate in the journal")
    return said


@pytest.mark.timeout(300)
def test_status_says_the_real_health_generated_a_token_and_what_it_cost(serving: LabHandle) -> None:
    """0.5.23's /health is its /health_generate (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is on
    by default): `cockpit status` says so, with the second it took, and the server's journal
    holds that call's token and access line."""
    lab = serving
    before = cursor(lab, SERVING)
    told = json.loads(cockpit(lab, SERVING, "status", "--json").stdout)
    said = lines_after(lab, SERVING, before)
    health = told["health"]
    assert (health["path"], health["status"], health["generates"], health["generation"]) == (
        "/health",
        200,
        True,
        ON_BY_DEFAULT,
    ), health
    assert health["seconds"] >= 1.0, health  # it sleeps 1 s before it looks for the token
    assert (said.count(HEALTH_PREFILL), said.count(HEALTH_ASKED)) == (1, 1), said
    assert told["readiness"] == "ready" and re.fullmatch(
        rf"/health answered 200 in \d+\.\d\d s \(generates a token: {ON_BY_DEFAULT}\)", told["readiness_reason"]
    ), told
    text = cockpit(lab, SERVING, "status").stdout
    assert re.search(
        rf"^  health: /health answered 200 in \d+\.\d\d s \(generates a token: {ON_BY_DEFAULT}\)$", text, re.M
    ), text


@pytest.mark.timeout(300)
async def test_the_fleet_and_the_deployment_watch_ask_a_generating_server_at_most_every_15_s(
    serving: LabHandle,
) -> None:
    """The fleet's rounds and the app's deployment watch (read_status with the answers it keeps)
    come once a second; each /health of this server is a token and journal lines, so each asks
    again only RECHECK_S after its last 200 and says how old the answer is meanwhile: the
    server's own access lines over the rounds are the count."""
    lab = serving
    pool = HostPool(Config())
    reader, catalogs, kept_answers = FleetReader(pool.get), CatalogCache(), dict[tuple[str, str], LastAnswer]()
    before = cursor(lab, SERVING)
    began = time.monotonic()
    fleet: list[str] = []
    watch: list[str] = []
    try:
        while len(fleet) < 20 or time.monotonic() - began < 2 * RECHECK_S + 5:
            [read] = await reader.round({lab.name: [SERVING]})
            unit = read.unit(SERVING)
            assert unit is not None and unit.trouble == FLEET_READY, (read, unit)
            fleet.append(unit.reason)
            status, _ = await read_status(
                pool.get(lab.name), Target(lab.name, SERVING), catalogs, gpus=False, asked=kept_answers
            )
            assert status.readiness == FLEET_READY, status
            watch.append(status.readiness_reason or "")
            await asyncio.sleep(1)
        took = time.monotonic() - began
    finally:
        await pool.close()
    fresh = [r for r in fleet if re.fullmatch(r"/health_generate answered 200 in \d+\.\d\d s \(generates a token\)", r)]
    kept = [r for r in fleet if re.search(r"; asked \d+ s ago: at most every 15 s\)$", r)]
    watched = [
        r
        for r in watch
        if re.fullmatch(rf"/health answered 200 in \d+\.\d\d s \(generates a token: {ON_BY_DEFAULT}\)", r)
    ]
    waited = [r for r in watch if re.search(r"; asked \d+ s ago: at most every 15 s\)$", r)]
    # The watch (status's reader) asks /health, which generates here; the fleet /health_generate.
    said = lines_after(lab, SERVING, before, asks=len(watched), generates=len(fresh))
    by_fleet, by_watch, allowed = said.count(GENERATE_ASKED), said.count(HEALTH_ASKED), int(took // RECHECK_S) + 1
    print(f"{len(fleet)} rounds in {took:.0f} s: the fleet asked {by_fleet} times, the watch {by_watch}")
    assert (by_fleet, by_watch) == (len(fresh), len(watched)), said
    assert said.count(HEALTH_PREFILL) == by_fleet + by_watch, said
    assert 2 <= len(fresh) <= allowed and len(kept) == len(fleet) - len(fresh), fleet
    assert 2 <= len(watched) <= allowed and len(waited) == len(watch) - len(watched), watch


@pytest.mark.timeout(300)
async def test_the_tp1_scheduler_is_rank_0_in_the_census_and_the_stacks(serving: LabHandle) -> None:
    """At tp 1 the scheduler's title is `sglang::scheduler`, with no `_TP0`; beside it run the
    detokenizer and multiprocessing's resource tracker, which are no rank."""
    lab = serving
    told = json.loads(cockpit(lab, SERVING, "status", "--json").stdout)
    assert told["readiness"] == "ready", told
    assert sorted((p["title"], p["rank"]) for p in told["processes"]) == [
        ("/opt/sglang/venv/bin/python", None),
        ("/opt/sglang/venv/bin/python", None),  # the resource tracker
        ("sglang::detokenizer", None),
        ("sglang::scheduler", "TP0"),
    ], told["processes"]
    dumped = json.loads(cockpit(lab, SERVING, "stacks", "--json").stdout)["processes"]
    ranks = {p["title"].split(" -c ")[-1]: (p["rank"], p["error"], bool(p["threads"])) for p in dumped}
    assert ranks["sglang::scheduler"] == ("TP0", None, True), dumped
    assert ranks["from multiprocessing.resource_tracker import main;main(6)"][0] is None, dumped
    assert ranks["sglang::detokenizer"][0] is None, dumped
    session = Session(Config(), Target(lab.name, SERVING))  # what the app's `s` folds
    try:
        capture = await session.stacks()
    finally:
        await session.close()
    folded_ranks = sorted(tb.rank for _, tb in folded(capture.processes, capture.at).tracebacks() if tb.rank)
    assert folded_ranks == ["TP0"], [p.title for p in capture.processes]


@pytest.mark.timeout(480)
def test_a_unit_that_turns_the_switch_off_is_said_to_ask_the_model_nothing(serving: LabHandle) -> None:
    """`Environment=SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0` in a drop-in: the real server
    answers /health at once and generates nothing, so it would answer 200 from a hung server too;
    `cockpit status` reads that from the unit and asks /health_generate instead, as the app and
    the fleet do, and says why. Last of the tests on `serving`: it restarts that server."""
    lab = serving
    drop_in = f"/etc/systemd/system/{SERVING}.d"
    lab.ssh("mkdir", "-p", drop_in)
    lab.ssh("tee", f"{drop_in}/health.conf", input=f"[Service]\nEnvironment={SWITCH}=0\n")
    try:
        lab.ssh("systemctl", "daemon-reload")
        end(lab, SERVING)
        lab.ssh("systemctl", "start", SERVING)
        wait_ready(lab, SERVING)
        before = cursor(lab, SERVING)
        told = json.loads(cockpit(lab, SERVING, "status", "--json").stdout)
        said = lines_after(lab, SERVING, before, asks=0, generates=1)
        quick = lab.ssh("python3", "-c", QUICK_HEALTH, str(REAL_UNITS[SERVING])).stdout.split()
    finally:
        lab.ssh("rm", "-rf", drop_in)
        lab.ssh("systemctl", "daemon-reload")
    health = told["health"]
    assert (health["path"], health["status"], health["generates"]) == ("/health_generate", 200, True), health
    assert health["detail"] == f"not /health, which asks the model nothing: {SWITCH}=0 in the unit's environment"
    assert health["seconds"] >= 1.0 and said.count(HEALTH_PREFILL) == 1, (health, said)
    assert told["readiness"] == "ready", told
    assert quick[0] == "200" and float(quick[1]) < 1.0, quick  # what it asked before, and would believe of a hang


async def test_transformers_classes_are_found_in_a_real_install(real_lab: LabHandle) -> None:
    """The model pre-flight's look into transformers, on the real-SGLang lab's venv (it skipped
    wherever one developer's /tmp/rs-venv was missing)."""
    from cockpit.config import HostConfig
    from cockpit.remote.ssh import SSHHost
    from cockpit.sglang.preflight.architectures import in_transformers

    host = SSHHost(HostConfig(name=real_lab.name))
    try:
        site = real_lab.info.site_packages
        assert await in_transformers(host, site, "LlamaForCausalLM") is True
        assert await in_transformers(host, site, "FooBarForCausalLM") is False
    finally:
        await host.close()
