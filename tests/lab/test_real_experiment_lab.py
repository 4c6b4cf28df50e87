"""A two-variant experiment on the real-SGLang lab (issue 30): SGLang 0.5.23's tp 1 as found
against the same with `--max-running-requests 1`, each written, started to ready, measured at 1
and 2 streams with the real server's own counters beside the client's, and the unit back byte
for byte and stopped, as it was before (the lab's tp 1 is installed stopped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LabHandle

pytestmark = pytest.mark.real_sglang

COCKPIT = str(Path(sys.executable).with_name("cockpit"))
TP1 = "sglang-real-tp1.service"
TP1_FILE = f"/etc/systemd/system/{TP1}"


@pytest.mark.timeout(900)
def test_two_variants_of_the_real_server_measured_and_the_unit_back(real_lab: LabHandle, tmp_path: Path) -> None:
    lab = real_lab
    lab.ssh("systemctl", "stop", TP1, check=False, timeout=120)
    before = lab.ssh("cat", TP1_FILE).stdout
    path = tmp_path / "real.toml"
    path.write_text(f"""\
name = "real-two"
host = "{lab.name}"
unit = "{TP1}"

[workload]
concurrency = [1, 2]
requests = 4
warmup = 1
input_len = 8
output_len = 8

[slo]
e2e_p95_ms = 120000

[[variants]]
name = "as-found"

[[variants]]
name = "one-running"
set.max-running-requests = 1
""")
    out = subprocess.run(
        [COCKPIT, "experiment", "run", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=840,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads(out.stdout)
    assert record["release"] == "0.5.23" and record["was_active"] == "inactive"
    found, one = record["variants"]
    assert (found["outcome"], one["outcome"]) == ("measured", "measured"), record["variants"]
    assert found["server_version"] == one["server_version"] == "0.5.23"
    for variant in (found, one):
        assert [lv["load"] for lv in variant["levels"]] == ["c1", "c2"]
        for lv in variant["levels"]:
            level, server = lv["level"], lv["server"]
            assert level["errors"] == 0 and level["token_count_source"] == "usage", lv
            # the real server's own count of the level, warm-up included, is the client's
            assert server["generation_tokens_total"] == level["output_tokens"] + level["warmup_output_tokens"]
            assert server["num_requests_total"] == level["requests"] + level["warmup_requests"]
    assert "--max-running-requests 1" in one["unit_text"][TP1_FILE]
    assert record["end"]["unit_as_asked"] is True and record["end"]["stopped"] is True
    assert lab.ssh("cat", TP1_FILE).stdout == before
    # stopped again, as it was: 0.5.23 takes a stop for a crash and ends `failed` without KillMode=mixed
    assert lab.ssh("systemctl", "is-active", TP1, check=False).stdout.strip() in ("inactive", "failed")
    said = record["answer"]
    assert set(said["variants"]) == {"as-found", "one-running"} and said["why"]
