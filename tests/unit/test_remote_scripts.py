"""The shell scripts the cockpit sends to a host: sshd refuses an exec request whose command
holds a NUL byte ("session_exec_req: parse packet: invalid format"), so a `\\0` meant for
printf and written in a plain Python string broke every cgroup census on the lab once."""

from __future__ import annotations

import importlib
import pkgutil

import cockpit


def _scripts() -> dict[str, str]:
    found = {}
    for info in pkgutil.walk_packages(cockpit.__path__, "cockpit."):
        if info.name.endswith("__main__") or info.name.startswith(("cockpit.ui", "cockpit.lab.standin")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, str) and name.isupper() and ("SCRIPT" in name or name == "MEMBERS"):
                found[f"{info.name}.{name}"] = value
    return found


def test_no_script_sent_to_a_host_holds_a_nul_byte() -> None:
    scripts = _scripts()
    assert {
        "cockpit.systemd.processes.SCRIPT",
        "cockpit.sglang.deployments.fleet.SCRIPT",
        "cockpit.systemd.gpu_use.SCRIPT",
    } <= set(scripts)
    assert [name for name, text in scripts.items() if "\0" in text] == []
