"""Labs that run one SGLang launch over several nodes (`cockpit lab up --nodes N`).

Node 0 is the named lab, node i the lab NAME-n{i}; the labs' addresses route to each other. Each
gets `sglang-k26-node{i}.service`: the demo unit's stand-in started as a launch over nodes is
(the same command on every node, the total `--tp-size`, `--nnodes N`, its own `--node-rank`,
`--dist-init-addr` naming node 0), and a config file with the `[deployments.k26]` entry that
`cockpit --deployment k26` opens.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from cockpit.lab.lab import GUEST_DIR, Lab, LabInfo

DEPLOYMENT = "k26"
PORT, DIST_PORT = 30100, 5858
GPUS_PER_NODE = 8
DEMO_UNIT = (GUEST_DIR / "sglang-demo.service").read_text()


def standin_unit_text(port: int, flags: str = "", env: str = "", restart: bool = True) -> str:
    """The demo unit's stand-in on `port`, with `flags` added to its command (in place of the
    demo's own, so each flag is given once) and `env` (words of COCKPIT_STANDIN_*=V) to its
    settings; with no [Install] section, so nothing starts it at boot."""
    text = DEMO_UNIT
    for name in {word.partition("=")[0] for word in shlex.split(flags) if word.startswith("--")}:
        text = re.sub(rf"\n    {re.escape(name)}( [^ \\\n]+)? \\(?=\n)", "", text)  # one line each: given once
    text = text.replace("--port 30000", f"--port {port}{' ' + flags if flags else ''}")
    text = text.replace("COCKPIT_STANDIN_CAPACITY=1200", f"COCKPIT_STANDIN_CAPACITY=1200{' ' + env if env else ''}")
    if not restart:
        text = text.replace("Restart=on-failure", "Restart=no")
    return text.replace("[Install]\nWantedBy=multi-user.target\n", "")


def launch_flags(head_address: str, nodes: int, rank: int, extra: str = "") -> str:
    """One node's part of a launch over `nodes` nodes of GPUS_PER_NODE GPUs each."""
    flags = (
        f"--tp-size {GPUS_PER_NODE * nodes} --nnodes {nodes} --node-rank {rank} "
        f"--dist-init-addr {head_address}:{DIST_PORT}"
    )
    return f"{flags} {extra}".strip()


def node_unit(rank: int) -> str:
    return f"sglang-{DEPLOYMENT}-node{rank}.service"


def deployment_config(path: Path, name: str, nodes: Sequence[tuple[str, str, str]]) -> Path:
    """A config file whose [deployments.NAME] is `nodes`, each (its [units] entry, its host, its
    unit), node 0 first."""
    hosts = "".join(f'[hosts."{host}"]\n' for host in dict.fromkeys(host for _, host, _ in nodes))
    units = "".join(f'[units.{node}]\nhost = "{host}"\nunit = "{unit}"\n' for node, host, unit in nodes)
    path.write_text(f"{hosts}{units}[deployments.{name}]\nnodes = {json.dumps([node for node, _, _ in nodes])}\n")
    return path


def _ssh(lab: Lab, *argv: str, input: str | None = None) -> None:
    proc = subprocess.run(lab.ssh_argv("root", list(argv)), input=input, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} on {lab.name} failed: {proc.stderr.strip()}")


def up(name: str, count: int, progress: Callable[[str], None], **up_args: object) -> tuple[list[LabInfo], Path]:
    """`count` labs, each with its node's unit started (node 0 first, as it waits for the
    others), and the config file naming them; the labs already up are used as they are."""
    labs = [Lab(name if rank == 0 else f"{name}-n{rank}") for rank in range(count)]
    infos = [lab.up(progress=progress, **up_args) for lab in labs]  # type: ignore[arg-type]
    head = infos[0].address
    for rank, lab in enumerate(labs):
        unit = node_unit(rank)
        # the demo unit would hold the node's GPUs beside the launch (and warn of it on every node)
        _ssh(lab, "systemctl", "stop", "sglang-demo.service")
        _ssh(lab, "systemctl", "reset-failed", "sglang-demo.service")  # a stop ends it failed, as SGLang's does
        _ssh(lab, "tee", f"/etc/systemd/system/{unit}", input=standin_unit_text(PORT, launch_flags(head, count, rank)))
        _ssh(lab, "systemctl", "daemon-reload")
        _ssh(lab, "systemctl", "restart", unit)
    nodes = [(f"{DEPLOYMENT}-node{rank}", lab.name, node_unit(rank)) for rank, lab in enumerate(labs)]
    return infos, deployment_config(labs[0].state_dir / "deployment.toml", DEPLOYMENT, nodes)
