"""`cockpit experiment run` against the lab's demo unit (issue 30): a variant the pre-flight
refuses is skipped and never written, one that dies loading its weights is recorded with its
traceback folded, one runs and is measured with the server's own counters beside the client's,
and at the end the unit file is back byte for byte and serving. Cut off by Ctrl-C or SIGTERM, a
run puts the unit back too, and its record says where it stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import LabHandle

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
UNIT = "sglang-demo.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"


def plan(lab: LabHandle, name: str, variants: str, concurrency: str = "[1, 4]") -> str:
    return f"""\
name = "{name}"
host = "{lab.name}"
unit = "{UNIT}"

[workload]
concurrency = {concurrency}
requests = 8
warmup = 1
input_len = [16, 32]
output_len = 24

[slo]
ttft_p95_ms = 3000
itl_p95_ms = 500

{variants}
"""


THREE = """\
[[variants]]
name = "typo"
set.speculative-num-stpes = 3

[[variants]]
name = "dies-loading"
environment = { COCKPIT_STANDIN_FAIL_IN = "load_weight" }

[[variants]]
name = "eight-running"
set.max-running-requests = 8
set.enable-metrics = true
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}


def _unit_text(lab: LabHandle) -> str:
    return lab.ssh("cat", UNIT_PATH).stdout


def test_three_variants_skipped_crashed_and_measured_and_the_unit_back_byte_for_byte(
    lab: LabHandle, tmp_path: Path
) -> None:
    lab.wait_ready()
    before = _unit_text(lab)
    path = tmp_path / "three.toml"
    path.write_text(plan(lab, "three", THREE))
    out = subprocess.run(
        [COCKPIT, "experiment", "run", str(path), "--json", "--note", str(tmp_path / "note")],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    typo, dies, eight = record["variants"]
    assert typo["outcome"] == "skipped" and "--speculative-num-stpes" in typo["reason"], typo
    assert "attempt" not in typo  # never written
    assert dies["outcome"] == "crashed on start", dies
    assert dies["traceback"] is not None and dies["traceback"]["exception"], dies["traceback"]
    assert eight["outcome"] == "measured" and [lv["load"] for lv in eight["levels"]] == ["c1", "c4"]
    assert "--max-running-requests 8" in eight["unit_text"][UNIT_PATH]
    for lv in eight["levels"]:
        level, server = lv["level"], lv["server"]
        assert level["errors"] == 0 and lv["slo_met"], lv
        # the server's own count of what it generated for the level, warm-up included, against the client's
        assert server["generation_tokens_total"] == level["output_tokens"] + level["warmup_output_tokens"]
        assert server["num_requests_total"] == level["requests"] + level["warmup_requests"]
    assert record["answer"]["winner"] == "eight-running"
    assert record["end"] == {**record["end"], "left_on": "original", "unit_as_asked": True, "outcome": "ready"}
    assert _unit_text(lab) == before  # byte for byte
    lab.wait_ready(timeout=30)
    note = (tmp_path / "note" / "three.md").read_text()
    assert "| eight-running | --max-running-requests 8, --enable-metrics | measured | c4 |" in note
    assert (tmp_path / "note" / "three.svg").read_text().count("<polyline") == 2
    saved = json.loads((tmp_path / "state" / "cockpit" / "experiments" / lab.name / UNIT / "three.json").read_text())
    assert saved["state"] == "finished" and saved["original"][UNIT_PATH] == before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_mid_run_puts_the_unit_back_and_the_record_says_where_it_stopped(
    lab: LabHandle, tmp_path: Path, sig: signal.Signals
) -> None:
    """The command handles the signal itself: started from a script without job control (as CI
    starts the suite) it inherits SIGINT ignored, and Ctrl-C's signal did nothing (ci26)."""
    lab.wait_ready()
    before = _unit_text(lab)
    variants = '[[variants]]\nname = "two-running"\nset.max-running-requests = 2\n'
    path = tmp_path / "cut.toml"
    path.write_text(plan(lab, "cut", variants, concurrency="[1, 2, 4, 8, 16]"))
    record_path = tmp_path / "state" / "cockpit" / "experiments" / lab.name / UNIT / "cut.json"
    proc = subprocess.Popen(
        [COCKPIT, "experiment", "run", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as a background job gets it
    )
    try:
        deadline = time.monotonic() + 240
        while not (record_path.exists() and json.loads(record_path.read_text())["variants"][0].get("levels")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        assert "--max-running-requests 2" in _unit_text(lab)  # on the variant now
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and f"{sig.name}: cancelling" in err, err
    assert _unit_text(lab) == before, err
    record = json.loads(record_path.read_text())
    assert record["cancelled"] is True and record["state"] == "finished", record
    assert record["end"]["unit_as_asked"] is True and record["variants"][0]["outcome"] == "measuring"
    assert "putting the unit back as it was" in err
    lab.wait_ready(timeout=30)
