"""The port check's reading of `ss -Hltnp` as the lab's iproute2 printed it (tests/data/), with
each PID's facts, and the findings it gives."""

from __future__ import annotations

from pathlib import Path

from cockpit.sglang.preflight.host_preflight import PORT_RULE, port_findings, ports_of
from cockpit.systemd import listeners
from cockpit.systemd.process_facts import SEP, Viewpoint

SS = (Path(__file__).parents[1] / "data" / "ss-ltnp-lab.txt").read_text()
FACTS = (
    "12345.67\n100\n"
    "\x1f62\n62 (python) S 1 62 62 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 3 0 1200000 0 0\n"
    "0::/system.slice/sglang-demo.service\n"
    "\x1f432\n432 (python) S 1 432 432 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1230000 0 0\n"
    "0::/system.slice/port-squatter.service\n"
    "\x1d\n/proc/62/environ:INVOCATION_ID=aaaa\0/proc/432/environ:INVOCATION_ID=bbbb\0"
)
VIEW = Viewpoint("sglang-demo.service", "aaaa")


def test_each_listener_is_read_with_its_pid_and_unit() -> None:
    holders = listeners.parse(SS + SEP + "\n" + FACTS)
    on_30000 = sorted((h.address, h.pid, h.unit) for h in holders if h.port == 30000)
    assert on_30000 == [("127.0.0.1", 62, "sglang-demo.service"), ("127.0.0.2", 432, "port-squatter.service")]
    assert {(h.address, h.port, h.pid) for h in holders if h.name == "sshd"} == {("0.0.0.0", 22, 64), ("[::]", 22, 64)}
    squatter = next(h for h in holders if h.pid == 432)
    assert squatter.age_s == 12345.67 - 12300.0 and squatter.outside(VIEW)


def test_only_a_listener_that_is_not_the_units_running_start_is_an_error() -> None:
    holders = listeners.parse(SS + SEP + "\n" + FACTS)
    found = port_findings(holders, {"--port": "30000"}, VIEW, "lab")
    assert [(f.rule, f.pid, f.severity) for f in found] == [(PORT_RULE, 432, "error")]
    assert "127.0.0.2:30000 on lab, sglang-demo.service's --port; owner: unit port-squatter.service" in found[0].message
    assert port_findings(holders, {"--port": "30001"}, VIEW, "lab") == []


def test_a_listener_ss_names_without_a_pid_is_still_named() -> None:
    """Without root, ss shows another user's listener with no users:(...) column."""
    holders = listeners.parse("LISTEN 0      5      127.0.0.2:30000 0.0.0.0:*\n")
    [f] = port_findings(holders, {}, VIEW, "lab")  # --port defaults to 30000
    assert f.pid is None and "a process listens on 127.0.0.2:30000" in f.message and "sudo ss -ltnp" in f.fix


def test_the_ports_a_node_binds() -> None:
    assert ports_of({}) == {30000: "--port"}
    assert ports_of({"--port": "31000", "--dist-init-addr": "10.0.0.1:5000"}) == {
        31000: "--port",
        5000: "--dist-init-addr",
    }
    assert ports_of({"--dist-init-addr": "10.0.0.1:5000", "--node-rank": "1"}) == {30000: "--port"}


DATA = Path(__file__).parents[1] / "data"
# `ss -Hltnp --cgroup` with the facts, as root and as the lab's operator read it, the demo's
# stand-in on 127.0.0.1:30000 (PID 65) and a squatter on 127.0.0.2:30000 (PID 112).
AS_ROOT = listeners.parse((DATA / "listeners-cgroup-root-lab.txt").read_text())
AS_OPERATOR = listeners.parse((DATA / "listeners-cgroup-operator-lab.txt").read_text())


def test_ss_cgroup_says_whose_a_listener_is_where_its_pid_is_not_shown() -> None:
    demo = next(h for h in AS_OPERATOR if h.address == "127.0.0.1" and h.port == 30000)
    assert demo.pid is None and demo.unit == "sglang-demo.service"
    assert demo.owner(VIEW) == "a process of sglang-demo.service this login may not see"
    # The unit's own server, seen by a login that is not root, is not a port held by another.
    found = port_findings(AS_OPERATOR, {}, VIEW, "lab")
    assert [(f.pid, "port-squatter.service" in f.message) for f in found] == [(None, True)]


def test_a_unit_is_asked_its_health_only_where_its_own_cgroup_listens() -> None:
    from cockpit.systemd.readiness import port_check

    for seen in (AS_ROOT, AS_OPERATOR):
        assert port_check(seen, "sglang-demo.service", "127.0.0.1", 30000).ask
        sleeper = port_check(seen, "sleeper.service", "127.0.0.1", 30000)
        assert not sleeper.ask and sleeper.note.endswith(
            "of sglang-demo.service listens on 127.0.0.1:30000, not sleeper.service"
        )
        squatted = port_check(seen, "sglang-demo.service", "127.0.0.2", 30000)  # the squatter's address
        assert not squatted.ask and "port-squatter.service listens on 127.0.0.2:30000" in squatted.note
        assert port_check(seen, "x.service", "127.0.0.1", 30001).note == "nothing listens on 127.0.0.1:30001"
    assert port_check(AS_ROOT, "sleeper.service", "127.0.0.1", 30000).note.startswith("PID 65 (python) of sglang-demo")
    assert port_check(AS_ROOT, "a.service", "127.0.0.3", 22).ask is False  # [::] and 0.0.0.0 take any address


def test_where_whose_a_port_is_cannot_be_read_the_answer_says_so() -> None:
    from cockpit.systemd.readiness import HEALTH, Probe, port_check

    old_ss = listeners.parse("LISTEN 0      5      127.0.0.1:30000 0.0.0.0:*\n")  # no --cgroup, no PID: not root
    for check in (
        port_check(old_ss, "a.service", "127.0.0.1", 30000),
        port_check(None, "a.service", "127.0.0.1", 30000),
    ):
        assert check.ask
        said = check.said(Probe(HEALTH, 200))
        assert said is not None and said.ok
        assert said.words().startswith(
            "/health answered 200 (whose listener on 127.0.0.1:30000 answered could not be read"
        )
    refused = port_check(AS_ROOT, "sleeper.service", "127.0.0.1", 30000).said(Probe(HEALTH, 200))
    assert refused is not None and refused.status is None and "not sleeper.service" in refused.words()
