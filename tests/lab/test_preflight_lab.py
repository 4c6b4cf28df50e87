"""Preflight against the lab: paths checked on the host, and the CLI when the host cannot import SGLang."""

from __future__ import annotations

import asyncio
import subprocess

from cockpit.config import HostConfig
from cockpit.remote.ssh import SSHHost
from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.preflight.preflight import check_paths
from tests.conftest import LabHandle
from tests.unit.test_preflight import COCKPIT


async def test_paths_and_dry_run_in_the_lab(lab: LabHandle, sglang_root) -> None:
    host = SSHHost(HostConfig(name=lab.name))
    try:
        catalog = load_catalog(sglang_root("0.5.23"))
        ok = await check_paths(host, ["--model-path", "/models/Llama-3.1-8B-Instruct"], catalog)
        assert ok == []
        [missing] = await check_paths(
            host,
            ["--model-path", "/models/nope", "--speculative-draft-model-path", "/models/Llama-3.1-8B-Instruct"],
            catalog,
        )
        assert missing.flags == ["--model-path"] and f"/models/nope does not exist on {lab.name}" in missing.message
        # A relative path is the unit's WorkingDirectory's, not the SSH login's home: a missing
        # `./eagle3` passed, read from there.
        relative = ["--model-path", "./Llama-3.1-8B-Instruct", "--speculative-draft-model-path", "./eagle3"]
        [draft] = await check_paths(host, relative, catalog, cwd="/models")
        assert draft.flags == ["--speculative-draft-model-path"], draft
        assert "./eagle3 (/models/eagle3, from the unit's WorkingDirectory /models) does not exist" in draft.message
        [both] = await check_paths(host, relative[:2], catalog)  # systemd's default WorkingDirectory, /
        assert "(/Llama-3.1-8B-Instruct, from the unit's WorkingDirectory /) does not exist" in both.message
    finally:
        await host.close()
    out = await asyncio.to_thread(
        subprocess.run,
        [COCKPIT, "preflight", "--host", lab.name, "--unit", "sglang-demo"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cannot import SGLang" in out.stdout and "only the static checks ran" in out.stdout
