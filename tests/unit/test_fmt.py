"""The words numbers are said in."""

from __future__ import annotations

from cockpit.fmt import count


def test_a_count_says_its_noun_in_the_singular_for_one() -> None:
    """The fleet's footer said `1 hosts`."""
    assert (count(1, "host"), count(2, "host"), count(0, "unit")) == ("1 host", "2 hosts", "0 units")


def test_a_printed_command_line_is_the_one_that_runs_here(tmp_path, monkeypatch) -> None:
    """The lab printed `cockpit --host ...`, which does not run with the README's install (the
    venv is not on PATH): it says `.venv/bin/cockpit` where that is how it was started."""
    import sys

    from cockpit.fmt import cockpit_command

    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "cockpit").write_text("#!/bin/sh\n")
    (venv / "cockpit").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [".venv/bin/cockpit", "lab", "up"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert cockpit_command() == ".venv/bin/cockpit"
    monkeypatch.setenv("PATH", f"{venv}:/usr/bin:/bin")  # activated: the name alone runs it
    assert cockpit_command() == "cockpit"
    monkeypatch.setattr(sys, "argv", ["/x/cockpit/__main__.py"])
    assert cockpit_command() == f"{sys.executable} -m cockpit"
