"""The CLI's contract: --version, --help with examples, exit status 2 with one sentence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cockpit import __version__
from cockpit.cli import main

COCKPIT = str(Path(sys.executable).with_name("cockpit"))


def test_version_and_help() -> None:
    out = subprocess.run([COCKPIT, "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"cockpit {__version__}"
    help_text = subprocess.run([COCKPIT, "--help"], capture_output=True, text=True).stdout
    assert "examples:" in help_text and "cockpit lab up" in help_text and "status" in help_text


def test_usage_errors_exit_2_with_one_sentence(capsys) -> None:
    assert main(["status", "--bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "cockpit: unrecognized arguments: --bogus (see `cockpit --help`)"
    assert main(["status", "--unit", "k26"]) == 2
    assert "unit 'k26' is not in the config" in capsys.readouterr().err
    assert main(["--config", "/nonexistent.toml", "status", "--host", "h", "--unit", "u"]) == 2
    assert capsys.readouterr().err.strip() == "cockpit: /nonexistent.toml: config file not found."


def test_bad_config_reaches_the_user_with_file_and_line(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "cockpit.toml"
    cfg.write_text("[hosts.gpu1]\nport = 'abc'\n")
    assert main(["--config", str(cfg), "status", "--host", "gpu1", "--unit", "x"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"cockpit: {cfg}:2: hosts.gpu1.port: expected a port number between 1 and 65535, got 'abc'"
    )


def test_lab_needs_a_valid_name(capsys) -> None:
    assert main(["lab", "status", "--name", "Bad_Name"]) == 2
    assert "lab name 'Bad_Name'" in capsys.readouterr().err


def test_a_finished_status_ends_at_once_with_its_output_and_exit_handlers() -> None:
    """`console` ends `cockpit status` with os._exit: what it printed (a pipe, so buffered) and
    what atexit handlers print still come out, and the exit status is the command's."""
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('exit handler ran'))\n"
        "print('printed before')\n"
        "sys.argv = ['cockpit', '--config', '/nonexistent.toml', 'status', '--host', 'h', '--unit', 'u']\n"
        "from cockpit.cli import console\n"
        "console()\n"
        "print('never reached')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stdout.splitlines() == ["printed before", "exit handler ran"]
    assert out.stderr.strip() == "cockpit: /nonexistent.toml: config file not found."
