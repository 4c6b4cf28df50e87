"""The master directories of cockpits that are gone are swept (cockpit/remote/mux.py, `sweep`);
those of a running cockpit, of a master still up, and anything not the cockpit's are kept."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cockpit.remote import early_master
from cockpit.remote.mux import sweep


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _master_dir(root: Path, name: str, *files: str) -> Path:
    path = root / name
    path.mkdir()
    for file in files:
        (path / file).write_text("x")
    return path


def test_a_killed_cockpits_directory_goes_and_everything_else_stays(tmp_path: Path) -> None:
    dead = _dead_pid()
    gone = _master_dir(tmp_path, f"cockpit-mux-{dead}-ab12", "ssh_config", "stdout", "stderr")
    running = _master_dir(tmp_path, f"cockpit-mux-{os.getpid()}-cd34", "ssh_config")
    persisting = _master_dir(tmp_path, f"cockpit-mux-{dead}-ef56", "ssh_config", early_master.SOCKET)
    older_name = _master_dir(tmp_path, "cockpit-mux-q9z8", "ssh_config")  # before names held a PID
    elsewhere = _master_dir(tmp_path, "keep", "precious")
    (tmp_path / f"cockpit-mux-{dead}-link").symlink_to(elsewhere)
    (tmp_path / f"cockpit-mux-{dead}-file").write_text("not a directory")

    assert sweep(str(tmp_path)) == [str(gone)]
    assert not gone.exists()
    assert running.is_dir() and persisting.is_dir() and older_name.is_dir()
    assert (elsewhere / "precious").exists() and (tmp_path / f"cockpit-mux-{dead}-file").exists()


def test_a_new_directory_is_named_for_its_cockpit_and_kept_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    made = Path(early_master.new_dir())
    assert made.parent == tmp_path and made.name.startswith(f"cockpit-mux-{os.getpid()}-")
    assert made.stat().st_mode & 0o777 == 0o700
    assert sweep() == [] and made.is_dir()
