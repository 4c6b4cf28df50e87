"""The seed incident in the lab: flagged before the write, one restart to ready, attempts recorded;
a concurrent edit refused; the non-root operator writing through sudo; a rollback."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.attempts import AttemptLog
from cockpit.config import HostConfig
from cockpit.remote.ssh import SSHHost
from cockpit.rollout.single import apply, preflight, with_files
from cockpit.sglang.catalog.catalogs import CatalogCache
from cockpit.systemd.remote_unit import load_remote_unit
from cockpit.systemd.status import fetch
from cockpit.targets import Target
from tests.conftest import LAB_SITE, LabHandle

UNIT = "/etc/systemd/system/sglang-demo.service"
SITE = LAB_SITE
SEED = """[Unit]
Description=SGLang demo server (cockpit lab stand-in, not a real SGLang)

[Service]
Environment=PYTHONUNBUFFERED=1
Environment=PYTHONPATH=/opt/cockpit
Environment=COCKPIT_STANDIN_STARTUP_S=0.5
ExecStart=/opt/sglang/venv/bin/python -m cockpit.lab.standin \\
    --model-path /models/Llama-3.1-8B-Instruct \\
    --tp-size 8 \\
    --speculative-algorithm EAGLE3 \\
    --speculative-draft-model-path /models/EAGLE3-LLaMA3.1-Instruct-8B \\
    --speculative-num-draft-tokens 3 \\
    --speculative-eagle-topk 4 \\
    --host 127.0.0.1 \\
    --port 30000
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture
def seed_unit(lab: LabHandle):
    original = lab.ssh("cat", UNIT).stdout
    lab.ssh("tee", UNIT, input=SEED)
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "restart", "sglang-demo")
    yield
    lab.ssh("tee", UNIT, input=original)
    lab.ssh("sh", "-c", f"rm -f {UNIT}.cockpit-bak.*")
    lab.ssh("systemctl", "daemon-reload")
    lab.ssh("systemctl", "reset-failed", "sglang-demo", check=False)
    lab.ssh("systemctl", "restart", "sglang-demo")


async def _load(host: SSHHost):
    status = await fetch(host, "sglang-demo.service")
    catalog = await CatalogCache().get(host, SITE)
    return await load_remote_unit(host, status, catalog), catalog


async def test_seed_incident_is_caught_before_the_write_and_fixed_in_one_restart(
    lab: LabHandle, seed_unit, tmp_path: Path
) -> None:
    host = SSHHost(HostConfig(name=lab.name))
    target = Target(lab.name, "sglang-demo.service")
    log = AttemptLog(lab.name, "sglang-demo.service", root=tmp_path)
    try:
        unit, catalog = await _load(host)
        [finding] = [f for f in preflight(unit, catalog) if f.severity == "error"]
        assert finding.would_raise == "AssertionError" and "_handle_eagle_family" in finding.message
        typo = unit.set_flag("--num-speculative-tokens", "16")
        assert any("Did you mean --speculative-num-draft-tokens?" in f.message for f in preflight(typo, catalog))
        fixed = unit.set_flag("--speculative-num-steps", "3").set_flag("--speculative-num-draft-tokens", "8")
        assert [f for f in preflight(fixed, catalog) if f.severity == "error"] == []
        attempt = await apply(host, host.config, target, unit, fixed, catalog=catalog, log=log, timeout=60)
        assert attempt.outcome == "ready", attempt.detail
        assert 0 < attempt.seconds < 30
        assert sorted(attempt.diff()) == [
            ("--speculative-num-draft-tokens", "3", "8"),
            ("--speculative-num-steps", "(unset)", "3"),
        ]
        written = lab.ssh("cat", UNIT).stdout
        assert "    --port 30000 \\\n    --speculative-num-steps 3\n" in written  # one flag per line, appended
        assert (
            written.replace("--speculative-num-draft-tokens 8", "--speculative-num-draft-tokens 3").replace(
                "    --port 30000 \\\n    --speculative-num-steps 3\n", "    --port 30000\n"
            )
            == SEED
        )
        assert lab.ssh("sh", "-c", f"ls {UNIT}.cockpit-bak.*").stdout.strip()  # a backup beside it
        assert (await fetch(host, "sglang-demo.service")).active_state == "active"
        # Roll back to the file as it was before the attempt: recorded as an attempt too (and it crashes).
        current, _ = await _load(host)
        rolled = await apply(
            host,
            host.config,
            target,
            current,
            with_files(current, attempt.previous_texts),
            catalog=catalog,
            log=log,
            note=f"rollback to before attempt {attempt.number}",
            timeout=60,
        )
        assert rolled.outcome == "crashed" and rolled.traceback["exception"] == "AssertionError"
        assert lab.ssh("cat", UNIT).stdout == SEED
        assert [a.number for a in log.load()] == [1, 2] and log.load()[1].note.startswith("rollback")
    finally:
        await host.close()


async def test_concurrent_edit_is_detected(lab: LabHandle, seed_unit, tmp_path: Path) -> None:
    host = SSHHost(HostConfig(name=lab.name))
    try:
        unit, catalog = await _load(host)
        lab.ssh("sh", "-c", f"echo '# edited by hand' >> {UNIT}")
        attempt = await apply(
            host,
            host.config,
            Target(lab.name, "sglang-demo.service"),
            unit,
            unit.set_flag("--speculative-num-steps", "3"),
            catalog=catalog,
            log=AttemptLog(lab.name, "sglang-demo.service", root=tmp_path),
            timeout=60,
        )
        assert attempt.outcome == "failed"
        assert attempt.detail == (
            f"{UNIT} changed on {lab.name} since it was loaded: reload it and make your change "
            "again (nothing was written)"
        )
        assert lab.ssh("cat", UNIT).stdout.endswith("# edited by hand\n")
    finally:
        await host.close()


async def test_operator_writes_through_sudo(lab: LabHandle, seed_unit, tmp_path: Path) -> None:
    host = SSHHost(HostConfig(name=f"{lab.name}-operator", user="operator", sudo=True))
    try:
        unit, catalog = await _load(host)
        fixed = unit.set_flag("--speculative-num-steps", "3").set_flag("--speculative-num-draft-tokens", "8")
        attempt = await apply(
            host,
            host.config,
            Target(f"{lab.name}-operator", "sglang-demo.service"),
            unit,
            fixed,
            catalog=catalog,
            log=AttemptLog(lab.name, "sglang-demo.service", root=tmp_path),
            timeout=60,
        )
        assert attempt.outcome == "ready", attempt.detail
        assert "--speculative-num-steps 3" in lab.ssh("cat", UNIT).stdout
        assert lab.ssh("stat", "-c", "%U %a", UNIT).stdout.strip() == "root 644"
    finally:
        await host.close()


async def test_the_original_is_kept_and_a_rollback_to_it_runs_the_writes_pre_flight(lab: LabHandle, seed_unit) -> None:
    """The unit as the app first found it (here the seed's crashing set) is attempt #0; fixed
    behind the app's back and read again, a rollback to it is flagged as a write of it would
    be, with `Write anyway`, and Cancel writes nothing."""
    from textual.widgets import Button

    from cockpit.attempts import ORIGINAL
    from cockpit.config import Config
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.panes.attempts import AttemptsPane
    from cockpit.ui.screens.write import WriteModal
    from tests.conftest import until

    log = AttemptLog(lab.name, "sglang-demo.service")
    app = CockpitApp(Config(), Target(lab.name, "sglang-demo.service"))
    async with app.run_test(size=(150, 45)) as pilot:
        await until(lambda: [a.outcome for a in log.load()] == [ORIGINAL], 60, "attempt #0 kept")
        assert log.load()[0].texts == {UNIT: SEED}
        fixed = SEED.replace("--speculative-eagle-topk 4", "--speculative-eagle-topk 1 --speculative-num-steps 2")
        lab.ssh("tee", UNIT, input=fixed)
        lab.ssh("systemctl", "daemon-reload")
        await app.session.reload()
        assert log.keep_original({UNIT: fixed}, {}) is None  # kept once: still the seed's
        await pilot.press("h")
        pane = app.query_one(AttemptsPane)
        await until(lambda: pane.highlighted == 0 and pane.attempts[0].outcome == ORIGINAL, 10, "the timeline")
        await pilot.press("u")
        await until(lambda: isinstance(app.screen, WriteModal), 30, "the rollback's write modal")
        modal = app.screen
        assert isinstance(modal, WriteModal)
        assert "eagle-params-together" in [f.rule for f in modal.findings if f.severity == "error"], modal.findings
        assert "Write anyway" in str(modal.query_one("#yes", Button).label)
        await pilot.press("n")
        await pilot.pause()
    assert lab.ssh("cat", UNIT).stdout == fixed


async def test_the_note_holds_every_traceback_the_screen_shows(lab: LabHandle, seed_unit) -> None:
    """`S` after a crash loop wrote `No traceback in the period` while its screenshot showed 19:
    the default period (the current and previous start) missed the crashes before them."""
    from cockpit.config import Config
    from cockpit.ui.app import CockpitApp
    from tests.conftest import until

    def crashes() -> int:
        return lab.ssh("journalctl", "-u", "sglang-demo", "-o", "cat").stdout.count("AssertionError")

    lab.wait_for(lambda: crashes() >= 4, 90, "four crashes of the seed's mistake")
    app = CockpitApp(Config(), Target(lab.name, "sglang-demo.service"))
    async with app.run_test(size=(150, 45)):
        shown = app.journal_view.model
        await until(lambda: len({tb.invocation_id for _, tb in shown.tracebacks()}) >= 4, 60, "four on screen")
        on_screen = {tb.times[0] for _, tb in shown.tracebacks()}
        incident = await app.session.incident()
    in_note = {tb.times[0] for tb in incident.tracebacks}
    assert on_screen <= in_note, (len(on_screen), len(in_note))
    assert "the incident on screen" in incident.period, incident.period


async def test_the_crash_loop_banner_goes_once_a_fixed_start_is_ready(lab: LabHandle, seed_unit) -> None:
    """It never cleared once the unit was fixed, and replaced the readiness reason in every later
    state (a stop here): the banner is drawn while the loop is true, and under the reason."""
    from cockpit.config import Config
    from cockpit.ui.app import CockpitApp
    from tests.conftest import until

    def crashes() -> int:
        return lab.ssh("journalctl", "-u", "sglang-demo", "-o", "cat").stdout.count("AssertionError")

    lab.wait_for(lambda: crashes() >= 3, 90, "three crashes of the seed's mistake")
    app = CockpitApp(Config(), Target(lab.name, "sglang-demo.service"))
    async with app.run_test(size=(150, 45)):
        pane = app.status_pane
        await until(lambda: "⟳ crash loop: " in str(pane.render()), 60, lambda: str(pane.render()))
        topk = "    --speculative-eagle-topk 4 \\\n"
        fixed = SEED.replace("--speculative-num-draft-tokens 3", "--speculative-num-draft-tokens 8")
        fixed = fixed.replace(topk, topk + "    --speculative-num-steps 3 \\\n")
        lab.ssh("tee", UNIT, input=fixed)
        lab.ssh("systemctl", "daemon-reload")
        lab.ssh("systemctl", "restart", "sglang-demo")
        await until(lambda: pane.status is not None and pane.status.readiness == "ready", 60, lambda: pane.status)
        assert "crash loop" not in str(pane.render())
        lab.ssh("systemctl", "stop", "sglang-demo")
        await until(lambda: pane.status.active_state in ("inactive", "failed"), 30, lambda: pane.status)
        shown = str(pane.render())
        assert "crash loop" not in shown and "✗ down: stopped by a stop job" in shown, shown  # the reason, shown
