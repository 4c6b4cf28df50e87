"""Units of a test's own that run the lab's stand-in: the demo unit's text on another port, with
flags and COCKPIT_STANDIN_* settings added, installed for the test and removed after it (the demo
unit's journal stays what the other tests read)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT, LabHandle

DEMO = (ROOT / "cockpit" / "lab" / "guest" / "sglang-demo.service").read_text()


@contextlib.contextmanager
def standin_unit(
    lab: LabHandle, name: str, port: int, *, flags: str = "", env: str = "", restart: bool = True, start: bool = True
) -> Iterator[str]:
    text = DEMO.replace("--port 30000", f"--port {port}{' ' + flags if flags else ''}")
    text = text.replace("COCKPIT_STANDIN_CAPACITY=1200", f"COCKPIT_STANDIN_CAPACITY=1200{' ' + env if env else ''}")
    if not restart:
        text = text.replace("Restart=on-failure", "Restart=no")
    lab.ssh("tee", f"/etc/systemd/system/{name}", input=text.replace("[Install]\nWantedBy=multi-user.target\n", ""))
    lab.ssh("systemctl", "daemon-reload")
    if start:
        lab.ssh("systemctl", "start", name)
    try:
        yield name
    finally:
        lab.ssh("systemctl", "stop", name, check=False)
        lab.ssh("rm", "-rf", f"/etc/systemd/system/{name}", f"/etc/systemd/system/{name}.d", check=False)
        lab.ssh("systemctl", "daemon-reload", check=False)


def deployment_config(path: Path, name: str, nodes: list[tuple[str, LabHandle, str]]) -> Path:
    """A config file whose [deployments.NAME] is `nodes`, each (its [units] entry, its lab, its
    unit), node 0 first."""
    hosts = "".join(f'[hosts."{name}"]\n' for name in dict.fromkeys(lab.name for _, lab, _ in nodes))
    units = "".join(f'[units.{node}]\nhost = "{lab.name}"\nunit = "{unit}"\n' for node, lab, unit in nodes)
    path.write_text(f"{hosts}{units}[deployments.{name}]\nnodes = {json.dumps([node for node, _, _ in nodes])}\n")
    return path
