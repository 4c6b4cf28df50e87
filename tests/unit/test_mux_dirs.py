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
    dead, here = _dead_pid(), early_master.where()
    gone = _master_dir(tmp_path, f"cockpit-mux-{dead}.{here}-ab12", "ssh_config", "stdout", "stderr")
    running = _master_dir(tmp_path, f"cockpit-mux-{os.getpid()}.{here}-cd34", "ssh_config")
    persisting = _master_dir(tmp_path, f"cockpit-mux-{dead}.{here}-ef56", "ssh_config", early_master.SOCKET)
    # made on another host or in another container sharing this directory: its PID is not ours to ask
    elsewhere_made = _master_dir(tmp_path, f"cockpit-mux-{dead}.0badf00d-gh78", "ssh_config")
    older_name = _master_dir(tmp_path, "cockpit-mux-q9z8", "ssh_config")  # before names held a PID
    odd = [_master_dir(tmp_path, f"cockpit-mux-{pid}.{here}-x") for pid in ("²", "9" * 40, "", "-1")]
    elsewhere = _master_dir(tmp_path, "keep", "precious")
    (tmp_path / f"cockpit-mux-{dead}.{here}-link").symlink_to(elsewhere)
    (tmp_path / f"cockpit-mux-{dead}.{here}-file").write_text("not a directory")

    assert sweep(str(tmp_path)) == [str(gone)]
    assert not gone.exists()
    assert running.is_dir() and persisting.is_dir() and elsewhere_made.is_dir() and older_name.is_dir()
    assert all(path.is_dir() for path in odd)
    assert (elsewhere / "precious").exists() and (tmp_path / f"cockpit-mux-{dead}.{here}-file").exists()


def test_a_new_directory_is_named_for_its_cockpit_and_kept_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In $TMPDIR, where the sweep (`tempfile.gettempdir()`) looks; where that cannot be
    written, where `tempfile` would make it."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read $TMPDIR again
    made = Path(early_master.new_dir())
    assert made.parent == tmp_path and made.name.startswith(f"cockpit-mux-{os.getpid()}.{early_master.where()}-")
    assert made.stat().st_mode & 0o777 == 0o700
    assert sweep() == [] and made.is_dir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "absent"))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    assert Path(early_master.new_dir()).parent == tmp_path / "elsewhere"
    # $TMP alone, as `tempfile` reads it after $TMPDIR and $TEMP: made there, swept there
    monkeypatch.delenv("TMPDIR")
    monkeypatch.delenv("TEMP", raising=False)
    monkeypatch.setenv("TMP", str(tmp_path / "tmp"))
    monkeypatch.setattr("tempfile.tempdir", None)
    (tmp_path / "tmp").mkdir()
    made = Path(early_master.new_dir())
    assert made.parent == tmp_path / "tmp" and len(made.name.rpartition("-")[2]) == 8
    dead = made.with_name(made.name.replace(f"-{os.getpid()}.", f"-{_dead_pid()}.", 1))
    made.rename(dead)
    assert sweep() == [str(dead)] and not dead.exists()
