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


class _Answers:
    """A host whose /health_generate answers 503 once it is asked, then waits to be let go."""

    name = "cockpit-lab"

    def __init__(self) -> None:
        import asyncio

        self.asked = asyncio.Event()
        self.go = asyncio.Event()

    async def http_request(self, method, host, port, path, *, body=None, timeout=5.0):
        self.asked.set()
        await self.go.wait()
        return 503, b""

    async def run(self, argv, *, input=None, timeout=30.0):
        from cockpit.remote.base import RunResult

        return RunResult(tuple(argv), 1, b"", b"no cgroup.procs")


def test_a_503_from_before_the_ready_line_is_dropped_not_read_as_degraded() -> None:
    """The lab's two-node start showed node 0 `degraded` for a poll: a /health_generate asked
    while it loaded answered 503, and the ready line came in between."""
    import asyncio

    from cockpit.session.feeds import StatusPoll
    from cockpit.sglang.server.health import STARTING, Signals, assess

    async def run() -> None:
        host = _Answers()
        shown = []
        poll = StatusPoll(host, "sglang-demo.service", ("127.0.0.1", 30000), on_status=shown.append, on_problem=print)  # type: ignore[arg-type]
        status = recorded_status(invocation_id="c" * 32, ready=None)
        poll._with_health(status)  # asks, as the start has not answered 200 yet
        await host.asked.wait()
        poll._last = status
        poll.forget_health("c" * 32)  # the ready line arrives while the answer is on its way
        host.go.set()
        await asyncio.sleep(0.05)
        now = poll._with_health(status, ask=False)
        assert now.health is None and now.ready is None  # the 503 was dropped
        told = assess(now, Signals(ready_at=1.0), now.health, None)
        assert told.state == STARTING and told.reason == "health not asked yet"

    asyncio.run(run())
