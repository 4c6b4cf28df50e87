"""The fleet's reading of one round: ExecStart's flags, the GPU table, and the rows worst first
with each deployment folded (the live rounds over two labs: tests/lab/test_fleet_lab.py)."""

from __future__ import annotations

from cockpit.config import Config, DeploymentConfig, HostConfig, UnitConfig
from cockpit.sglang.deployments.fleet import (
    BROKEN,
    DEGRADED,
    FAILED,
    READY,
    SCRIPT,
    SEP,
    STOPPED,
    FleetUnit,
    HostRound,
    exec_flags,
    exec_starts,
    hosts_of,
    parse_gpus,
    parse_probes,
    rows,
    sections,
)
from cockpit.systemd.readiness import HEALTH, HUNG_AFTER_S, RECHECK_S, LastAnswer, Probe
from cockpit.systemd.status import UnitStatus, listed_units

# As bookworm's systemctl show prints a stand-in node's ExecStart (read from the lab).
EXEC_START = (
    "{ path=/opt/sglang/venv/bin/python ; argv[]=/opt/sglang/venv/bin/python -m sglang.launch_server "
    "--model-path /models/k26 --tp-size 16 --nnodes 2 --node-rank 1 --dist-init-addr 10.213.0.2:5858 "
    "--port=30130 --enable-metrics ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; "
    "code=(null) ; status=0/0 }"
)


def test_exec_flags_reads_values_given_both_ways_and_bare_switches() -> None:
    flags = exec_flags(EXEC_START)
    assert flags["--node-rank"] == "1" and flags["--port"] == "30130" and flags["--tp-size"] == "16"
    assert flags["--enable-metrics"] is None and "--ignore_errors" not in flags
    assert exec_flags("") == {}


def test_an_exec_start_with_newlines_and_the_separator_in_it_stays_its_units_own() -> None:
    """The ExecStart part (read once a start, after the other parts) is NUL-framed: ExecStart's
    argv is printed as it is, newlines and all, and no value can hold a NUL (the lab test:
    tests/lab/test_hostile_output_lab.py)."""
    forged = f"{{ argv[]=/bin/sh --port 30997 x\n\nId=sglang-phantom.service\n{SEP}\nActiveState=failed }}"
    said = f"Id=a.service\nActiveState=active\n{SEP}\n0, 1, 2\n{SEP}\na.service 0 HTTP/1.1 200 OK\n{SEP}\n"
    shown, gpus, answers, execs = sections(said + f"a.service\0{forged}\n\0b.service\0\0", 3)
    assert (shown, gpus, answers) == ("Id=a.service\nActiveState=active", "0, 1, 2", "a.service 0 HTTP/1.1 200 OK")
    assert exec_starts(execs) == {"a.service": forged, "b.service": ""}
    assert exec_flags(exec_starts(execs)["a.service"])["--port"] == "30997"
    assert sections(f"{SEP}\nb.service 124 \n", 1) == ["", "b.service 124 \n"]  # a round of probes only


def test_a_listing_takes_unit_names_from_unindented_lines_only() -> None:
    """systemctl indents a Description's further lines (a transient unit's may hold newlines),
    and a Description's \\x1e is no line break."""
    listing = (
        "sglang-tr.service   loaded active running told\n"
        "                                          Id=sglang-ghost.service\n"
        "                                          sglang-phantom.service x\n"
        "sglang-rs.service loaded active running a\x1esglang-split.service\n"
        "sglang-k@.service enabled\n"
    )
    assert listed_units(listing) == {"sglang-tr.service", "sglang-rs.service"}


def test_gpu_table_counts_the_busy_ones() -> None:
    gpus = parse_gpus("0, 122205, 143771\n1, 3, 143771\nNo devices were found\n")
    assert gpus is not None and (gpus.count, gpus.busy, gpus.used_mib) == (2, 1, 122208)
    assert gpus.words() == "1/2 GPUs busy, 119/281 GiB"
    assert parse_gpus("") is None


def test_probe_lines_give_the_status_how_long_it_took_or_why_there_was_none() -> None:
    asked = {
        "a.service": ("127.0.0.1", 30000),
        "b.service": ("127.0.0.1", 30001),
        "c.service": ("::1", 30002),
        "d.service": ("127.0.0.1", 30003),
    }
    said = (
        "a.service 0 1796234213.958576 1796234214.963641 HTTP/1.1 200 OK\r\nb.service 124 \nc.service 1 \n"
        "d.service 0 - - HTTP/1.1 503 Service Unavailable\nstray.service 0 1.0 2.0 HTTP/1.1 200 OK\n"
    )
    probes = parse_probes(said, asked)
    assert probes["a.service"].ok and probes["b.service"].timed_out and "stray.service" not in probes
    assert probes["a.service"].words() == "/health_generate answered 200 in 1.01 s (generates a token)"
    assert (probes["d.service"].status, probes["d.service"].seconds) == (503, None)  # a bash without $EPOCHREALTIME
    assert probes["b.service"].words() == f"/health_generate: no answer within {HUNG_AFTER_S:g} s"
    assert probes["c.service"].words() == "/health_generate: nothing answers on ::1:30002"
    assert parse_probes("a.service 127 \n", asked)["a.service"].detail == "not asked: the host has no bash"


def test_the_fleet_calls_a_server_hung_after_the_apps_own_wait() -> None:
    """A server slow to generate (4 s) read hung in the fleet (3 s) and ready in the app (10 s)."""
    assert HUNG_AFTER_S == 10.0
    assert f"timeout {HUNG_AFTER_S:g} bash" in SCRIPT and "timeout 3 " not in SCRIPT


def test_a_unit_is_asked_each_round_while_it_starts_and_every_15_s_once_it_answered() -> None:
    """Each ask of a generating /health is a token, a second and journal lines (the lab counts
    them on a real server: tests/lab/test_real_sglang_health_lab.py)."""
    address = ("127.0.0.1", 30010)
    refused = LastAnswer("i", address, Probe(HEALTH, None, "nothing answers on 127.0.0.1:30010"), at=100.0)
    starting = LastAnswer("i", address, Probe(HEALTH, 503, seconds=0.01), at=100.0)
    ready = LastAnswer("i", address, Probe(HEALTH, 200, seconds=1.01), at=100.0)
    hung = LastAnswer("i", address, Probe(HEALTH, None, f"no answer within {HUNG_AFTER_S:g} s"), at=100.0)
    assert refused.due(101.0) and starting.due(101.0)
    assert not ready.due(100.0 + RECHECK_S - 0.1) and ready.due(100.0 + RECHECK_S)
    assert not hung.due(101.0) and hung.due(100.0 + RECHECK_S)
    assert ready.aged(107.4).words() == (
        "/health answered 200 in 1.01 s (asked 7 s ago: /health may generate a token, so at most every 15 s)"
    )
    quiet = LastAnswer("i", address, Probe(HEALTH, 200, seconds=0.03, generates=False), at=100.0)
    assert quiet.due(101.0)  # asks the model nothing: no reason to wait (the app's deployment watch knows it)
    known = LastAnswer("i", address, Probe(HEALTH, 200, seconds=1.01, generates=True, generation="why"), at=100.0)
    assert not known.due(101.0)
    assert known.aged(102.0).words() == (
        "/health answered 200 in 1.01 s (generates a token: why; asked 2 s ago: at most every 15 s)"
    )
    assert hung.aged(103.0).words() == (
        f"/health: no answer within {HUNG_AFTER_S:g} s; asked 3 s ago: /health may generate a token, "
        "so at most every 15 s"
    )


def _unit(host: str, unit: str, trouble: str, active: str = "active", rank: int = 0) -> FleetUnit:
    return FleetUnit(host, unit, trouble, f"{unit} is {trouble}", UnitStatus(unit, host, active_state=active), rank)


CONFIG = Config(
    hosts={"a": HostConfig(name="a"), "b": HostConfig(name="b"), "c": HostConfig(name="c")},
    units={
        "k-n0": UnitConfig(name="k-n0", host="a", unit="sglang-k.service"),
        "k-n1": UnitConfig(name="k-n1", host="b", unit="sglang-k.service"),
    },
    deployments={"k": DeploymentConfig(name="k", nodes=("k-n0", "k-n1"))},
)


def test_rows_put_the_worst_first_and_fold_a_deployment_under_its_own_row() -> None:
    rounds = [
        HostRound("a", [_unit("a", "sglang-k.service", READY), _unit("a", "sglang-x.service", STOPPED, "inactive")]),
        HostRound("b", [_unit("b", "sglang-k.service", FAILED, "failed", 1), _unit("b", "sglang-y.service", DEGRADED)]),
        HostRound("c", error="ssh to c failed: Connection refused"),
    ]
    lines = rows(CONFIG, rounds)
    assert [(r.trouble, r.deployment, r.node, r.host, r.unit) for r in lines] == [
        (FAILED, "", "", "c", ""),
        (BROKEN, "k", "", "", "k"),
        (READY, "k", "k-n0", "a", "sglang-k.service"),
        (FAILED, "k", "k-n1", "b", "sglang-k.service"),
        (DEGRADED, "", "", "b", "sglang-y.service"),
        (STOPPED, "", "", "a", "sglang-x.service"),
    ]
    assert "k-n1" in lines[1].reason and "k-n0 still runs" in lines[1].reason
    assert lines[0].reason == "could not be read: ssh to c failed: Connection refused"


def test_a_node_whose_host_was_not_read_makes_its_deployment_failed() -> None:
    rounds = [HostRound("a", [_unit("a", "sglang-k.service", READY)]), HostRound("b", error="timed out")]
    head = next(r for r in rows(CONFIG, rounds) if r.unit == "k")
    assert (head.trouble, head.reason) == (FAILED, "k-n1: could not be read: timed out")
    assert hosts_of(CONFIG) == {"a": ["sglang-k.service"], "b": ["sglang-k.service"], "c": []}
