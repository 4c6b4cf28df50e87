"""Units of a test's own that run the lab's stand-in: the demo unit's text on another port, with
flags and COCKPIT_STANDIN_* settings added, installed for the test and removed after it (the demo
unit's journal stays what the other tests read)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from cockpit.lab.nodes import deployment_config as write_deployment_config
from cockpit.lab.nodes import standin_unit_text
from tests.conftest import LabHandle


@contextlib.contextmanager
def standin_unit(
    lab: LabHandle, name: str, port: int, *, flags: str = "", env: str = "", restart: bool = True, start: bool = True
) -> Iterator[str]:
    lab.ssh("tee", f"/etc/systemd/system/{name}", input=standin_unit_text(port, flags, env, restart))
    lab.ssh("systemctl", "daemon-reload")
    if start:
        lab.ssh("systemctl", "start", name)
    try:
        yield name
    finally:
        # Killed, not stopped: the stand-in's stop is SGLang's (up to 6 s, and failed under the default
        # KillMode), which a test that is done with its unit need not wait for, nor leave behind failed.
        lab.ssh("systemctl", "kill", "--signal=SIGKILL", name, check=False)
        lab.ssh("systemctl", "stop", name, check=False)
        lab.ssh("systemctl", "reset-failed", name, check=False)
        lab.ssh("rm", "-rf", f"/etc/systemd/system/{name}", f"/etc/systemd/system/{name}.d", check=False)
        lab.ssh("systemctl", "daemon-reload", check=False)


def deployment_config(path: Path, name: str, nodes: list[tuple[str, LabHandle, str]]) -> Path:
    """A config file whose [deployments.NAME] is `nodes`, each (its [units] entry, its lab, its
    unit), node 0 first."""
    return write_deployment_config(path, name, [(node, lab.name, unit) for node, lab, unit in nodes])
