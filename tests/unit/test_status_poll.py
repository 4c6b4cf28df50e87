"""The status poll on its own: the previous exit that an automatic restart would hide."""

from __future__ import annotations

from tests.ui.test_app_shell import recorded_status


def test_the_previous_exit_outlives_an_automatic_restart() -> None:
    from cockpit.session.feeds import StatusPoll

    poll = StatusPoll(
        None,
        "sglang-demo.service",
        ("127.0.0.1", 30000),  # type: ignore[arg-type]
        on_status=lambda s: None,
        on_problem=lambda k, s: None,
    )
    died = recorded_status(
        active_state="activating",
        sub_state="auto-restart",
        exec_main_code="exited",
        exec_main_status=1,
        exec_main_exit=1796032480.0,
        invocation_id="a" * 32,
    )
    assert poll._with_previous_exit(died) is died  # systemd still says how it ended
    again = recorded_status(invocation_id="b" * 32, exec_main_code=None, exec_main_exit=None)
    shown = poll._with_previous_exit(again)
    assert (shown.previous_exit, shown.previous_exit_at) == ("exited 1", 1796032480.0)
    poll.note_exit("killed 9/KILL", 1796032999.0)  # systemd's own journal line says it too
    assert poll._with_previous_exit(again).previous_exit == "killed 9/KILL"
