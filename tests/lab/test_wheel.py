"""The package as a user installs it: a wheel built from the checkout, installed into a clean
venv (no editable install, no checkout on the path), boots a lab and opens the demo on it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from tests.conftest import ROOT, TEST_LAB

NAME = f"{TEST_LAB}-w"


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def test_a_wheel_in_a_clean_venv_boots_the_lab_and_opens_the_demo(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)], tmp_path)
    assert built.returncode == 0, built.stderr
    [wheel] = wheels.glob("sglang_cockpit-*.whl")
    with zipfile.ZipFile(wheel) as carried:  # cockpit/ui/theme_files, which the top-level themes/ links to
        themes = {Path(n).name: carried.read(n) for n in carried.namelist() if n.startswith("cockpit/ui/theme_files/")}
    assert themes == {p.name: p.read_bytes() for p in (ROOT / "themes").glob("*.toml")} and len(themes) == 3
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)], tmp_path).returncode == 0
    installed = _run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "-q",
            "--disable-pip-version-check",
            "-c",
            str(ROOT / "constraints.txt"),
            str(wheel),
        ],
        tmp_path,
    )
    assert installed.returncode == 0, installed.stderr
    cockpit = str(venv / "bin" / "cockpit")
    where = _run([str(venv / "bin" / "python"), "-c", "import cockpit; print(cockpit.__file__)"], tmp_path)
    assert str(venv) in where.stdout and str(ROOT) not in where.stdout  # the wheel's copy, not the checkout
    socket = f"cockpit-wheel-{os.getpid()}"
    try:
        up = _run([cockpit, "lab", "up", "--name", NAME], tmp_path)
        assert up.returncode == 0, up.stderr
        deadline = time.monotonic() + 60
        while True:
            status = _run([cockpit, "status", "--host", NAME, "--unit", "sglang-demo", "--json"], tmp_path, 60)
            if status.returncode == 0 and json.loads(status.stdout)["ready"]:
                break
            assert time.monotonic() < deadline, status.stdout + status.stderr
            time.sleep(1)
        # The demo, as a person opens it: in a terminal (tmux), from the installed package.
        subprocess.run(
            [
                "tmux",
                "-L",
                socket,
                "new-session",
                "-d",
                "-x",
                "160",
                "-y",
                "40",
                f"cd {tmp_path} && env -u COLUMNS -u LINES {cockpit} lab demo --name {NAME}",
            ],
            check=True,
        )
        deadline = time.monotonic() + 60
        while True:
            screen = subprocess.run(["tmux", "-L", socket, "capture-pane", "-p"], capture_output=True, text=True).stdout
            if "ready ✓" in screen and "sglang-demo.service" in screen:
                break
            assert time.monotonic() < deadline, screen
            time.sleep(0.5)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
        _run([cockpit, "lab", "down", "--name", NAME], tmp_path) if shutil.which(cockpit) else None
    assert not (Path("/var/lib/cockpit-lab") / NAME).exists()  # down leaves nothing of the lab behind
