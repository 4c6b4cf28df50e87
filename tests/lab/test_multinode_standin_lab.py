"""The stand-in's launch over two nodes, as SGLang runs one: node 0 in the test lab, node 1 in a
second lab. Node 0 waits on --dist-init-addr's port until node 1 joins, then serves; node 1 runs
ranks TP8..TP15 and SGLang's dummy health server; when node 1 goes, node 0 notices nothing until
its ranks' watchdogs end it; an address node 1 cannot reach holds it at "Init parallel begin."."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from cockpit.config import load
from cockpit.remote.pool import HostPool
from cockpit.sglang.deployments.fleet import FleetReader, FleetRow, hosts_of, rows
from tests.conftest import LabHandle
from tests.lab.standin_units import deployment_config, standin_unit
from tests.unit.test_preflight import COCKPIT

NODES = ("sglang-mn-node0.service", "sglang-mn-node1.service")
PORT, DIST = 30130, 5858


def launch(head: LabHandle, rank: int, addr: str | None = None) -> str:
    return (
        f"--tp-size 16 --nnodes 2 --node-rank {rank} --dist-init-addr {addr or f'{head.info.address}:{DIST}'} "
        "--watchdog-timeout 5 --dist-timeout 8"
    )


def journal(lab: LabHandle, unit: str) -> str:
    """The unit's current start's lines: the tests here start the same units one after another."""
    start = lab.ssh("systemctl", "show", "-p", "InvocationID", "--value", unit).stdout.strip()
    if not start:
        return ""
    return lab.ssh("journalctl", f"_SYSTEMD_INVOCATION_ID={start}", "-o", "cat", "--no-pager").stdout


def health(lab: LabHandle, port: int) -> str:
    probe = f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/health', timeout=5).status)"
    return lab.ssh("/opt/sglang/venv/bin/python", "-c", probe, check=False).stdout.strip()


@contextlib.contextmanager
def two_nodes(lab: LabHandle, node1: LabHandle, addr: str | None = None) -> Iterator[None]:
    with (
        standin_unit(lab, NODES[0], PORT, flags=launch(lab, 0, addr), restart=False),
        standin_unit(node1, NODES[1], PORT, flags=launch(lab, 1, addr), restart=False),
    ):
        yield


def test_node_0_serves_once_node_1_joined_and_ends_when_it_goes(lab: LabHandle, node1: LabHandle) -> None:
    with two_nodes(lab, node1):
        lab.wait_for(lambda: "ready to roll" in journal(lab, NODES[0]), 60, "node 0's ready line")
        head, other = journal(lab, NODES[0]), journal(node1, NODES[1])
        assert "TP7] Init parallel ends." in head and "TP8]" not in head
        assert "TP15] Init parallel ends." in other and "TP7]" not in other and "ready to roll" not in other
        node1.wait_for(lambda: health(node1, PORT) == "200", 30, "node 1's dummy health server")
        node1.ssh("systemctl", "kill", "--signal=SIGKILL", NODES[1])
        gone = time.monotonic()
        lab.wait_for(
            lambda: lab.ssh("systemctl", "is-active", NODES[0], check=False).stdout.strip() != "active",
            40,
            "node 0 to end after node 1 went",
        )
        ended = time.monotonic() - gone
        head = journal(lab, NODES[0])
        # Nothing at once: the ranks block, their watchdog (5 s) fires, then SGLang's sigquit 5 s later
        # (the running server's handler: its 5 s of crash diagnostics follow).
        assert "TP0] Scheduler watchdog timeout (self.watchdog_timeout=5.0" in head, head[-2000:]
        assert "SIGQUIT received. signum=None, frame=None." in head and ended >= 10, ended


def test_an_address_node_1_cannot_reach_holds_it_at_init(lab: LabHandle, node1: LabHandle) -> None:
    unit = "sglang-mn-far.service"
    with standin_unit(node1, unit, PORT, flags=launch(lab, 1, "10.213.254.1:5858"), restart=False):
        node1.wait_for(lambda: "TP8] Init parallel begin." in journal(node1, unit), 30, "the init line")
        time.sleep(2)
        assert "Init parallel ends" not in journal(node1, unit)  # held there, as torch's store holds it
        node1.wait_for(lambda: "DistNetworkError: The client socket has timed out" in journal(node1, unit), 30)
        assert "(10.213.254.1, 5858)" in journal(node1, unit)


def group_status(config: Path) -> tuple[int, dict]:
    out = subprocess.run(
        [COCKPIT, "--config", str(config), "status", "--deployment", "mn", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return out.returncode, json.loads(out.stdout)


def write_config(lab: LabHandle, node1: LabHandle, tmp_path: Path) -> Path:
    return deployment_config(tmp_path / "cockpit.toml", "mn", [("n0", lab, NODES[0]), ("n1", node1, NODES[1])])


def test_the_group_is_ready_as_one_and_broken_when_a_node_goes(
    lab: LabHandle, node1: LabHandle, tmp_path: Path
) -> None:
    config = write_config(lab, node1, tmp_path)
    with two_nodes(lab, node1):
        lab.wait_for(lambda: group_status(config)[1]["readiness"] == "ready", 60, "the group to be ready")
        rc, group = group_status(config)
        assert rc == 0 and [n["node"] for n in group["nodes"]] == ["n0", "n1"], group
        worker = group["nodes"][1]
        assert worker["readiness"] == "ready" and "its 8 schedulers run" in worker["readiness_reason"], worker
        assert "dummy and is not taken as readiness" in worker["readiness_reason"]
        node1.ssh("systemctl", "kill", "--signal=SIGKILL", NODES[1])
        gone = time.monotonic()
        rc, group = group_status(config)
        said = time.monotonic() - gone
        assert rc == 1 and group["readiness"] == "broken", group
        assert group["readiness_reason"].startswith(f"n1 ({NODES[1]} on {node1.name}) is down"), group
        assert "n0 still runs" in group["readiness_reason"] and said < 5, (said, group)


def test_a_node_systemd_restarted_alone_has_left_the_launch(lab: LabHandle, node1: LabHandle, tmp_path: Path) -> None:
    """Node 1 SIGKILLed and restarted by systemd alone: the group read `ready ✓` (rc 0) while
    node 0's ranks waited on peers gone under them. It is broken until the group restarts. Node
    0's watchdog is long here, so that it still runs when node 1 is back."""
    config = write_config(lab, node1, tmp_path)
    slow = "--watchdog-timeout 120"
    with (
        standin_unit(lab, NODES[0], PORT, flags=launch(lab, 0).replace("--watchdog-timeout 5", slow), restart=False),
        standin_unit(node1, NODES[1], PORT, flags=launch(lab, 1).replace("--watchdog-timeout 5", slow)),
    ):
        lab.wait_for(lambda: group_status(config)[1]["readiness"] == "ready", 60, "the group to be ready")
        before = node1.ssh("systemctl", "show", "-p", "InvocationID", "--value", NODES[1]).stdout.strip()
        node1.ssh("systemctl", "kill", "--signal=SIGKILL", NODES[1])

        def back() -> bool:
            shown = node1.ssh("systemctl", "show", "-p", "InvocationID", "-p", "ActiveState", NODES[1]).stdout
            return f"InvocationID={before}" not in shown and "ActiveState=active" in shown

        node1.wait_for(back, 30, "systemd's restart of node 1 alone")
        # Both while node 1 runs: alone, it fails to join in a few seconds and is down again. So at
        # once, side by side: each waits up to 10 s for hung node 0's answer.
        with concurrent.futures.ThreadPoolExecutor(1) as beside:
            said = beside.submit(group_status, config)
            group_row = asyncio.run(fleet_rows(config))[0]  # the fleet, opened after it: n0's ready line
            rc, group = said.result()
        assert rc == 1 and group["readiness"] == "broken", group
        reason = group["readiness_reason"]
        assert reason.startswith(f"n1 ({NODES[1]} on {node1.name}) started again alone at "), reason
        assert "after n0's start was ready at" in reason and "restart the group" in reason, reason
        assert (group_row.deployment, group_row.trouble, group_row.reason) == ("mn", "broken", reason), group_row


async def fleet_rows(path: Path) -> list[FleetRow]:
    """The fleet view's lines of the config at `path`, from one round."""
    config = load(str(path))
    pool = HostPool(config)
    try:
        return rows(config, await FleetReader(pool.get).round(hosts_of(config)))
    finally:
        await pool.close()


async def test_the_group_restarts_as_one_attempt(lab: LabHandle, node1: LabHandle) -> None:
    """Stop both, both cgroups empty, node 0 then node 1 started, watched to the group's ready:
    one attempt in the deployment's timeline. Then node 1 made to die in its start-up: the
    attempt says the group crashed and names node 1."""
    from cockpit.config import HostConfig
    from cockpit.remote.ssh import SSHHost
    from cockpit.rollout.group import GroupNode, attempt_log, restart_group
    from cockpit.sglang.catalog.catalogs import CatalogCache
    from cockpit.targets import Target

    hosts = [SSHHost(HostConfig(name=lab.name)), SSHHost(HostConfig(name=node1.name))]
    nodes = [
        GroupNode(node, Target(host.name, unit), host, host.config)
        for node, host, unit in zip(("n0", "n1"), hosts, NODES, strict=True)
    ]
    log = attempt_log("mn", [n.target for n in nodes])
    try:
        with two_nodes(lab, node1):
            lab.wait_for(lambda: "ready to roll" in journal(lab, NODES[0]), 60, "node 0's first start")
            first = lab.ssh("systemctl", "show", "-p", "InvocationID", "--value", NODES[0]).stdout.strip()
            attempt = await restart_group(nodes, log, CatalogCache(), timeout=120)
            assert attempt.outcome == "ready", attempt
            assert "n0 is ready and every node's schedulers run" in attempt.detail
            again = lab.ssh("systemctl", "show", "-p", "InvocationID", "--value", NODES[0]).stdout.strip()
            assert again != first  # a new start of node 0, not the old one seen ready
            dropin = f"/etc/systemd/system/{NODES[1]}.d"
            node1.ssh("mkdir", "-p", dropin)
            node1.ssh(
                "tee",
                f"{dropin}/fail.conf",
                input="[Service]\nEnvironment=COCKPIT_STANDIN_FAIL_IN=load_weight COCKPIT_STANDIN_FAIL_RANK=9\n",
            )
            crashed = await restart_group(nodes, log, CatalogCache(), timeout=120)
        assert crashed.outcome == "crashed" and crashed.detail.startswith("n1 ("), crashed
        assert [a.outcome for a in log.load()] == ["ready", "crashed"]  # one attempt for the group, each time
    finally:
        for host in hosts:
            await host.close()


def test_one_flag_set_on_every_node_then_the_group_restarted(lab: LabHandle, node1: LabHandle, tmp_path: Path) -> None:
    config = write_config(lab, node1, tmp_path)

    def deployment(*words: str) -> tuple[int, dict]:
        argv = [COCKPIT, "--config", str(config), "deployment", *words, "mn", "--json", "--timeout", "120"]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=240)
        assert out.returncode in (0, 1), out.stdout + out.stderr
        return out.returncode, json.loads(out.stdout)

    with two_nodes(lab, node1):
        lab.wait_for(lambda: "ready to roll" in journal(lab, NODES[0]), 60, "node 0's first start")
        rc, said = deployment("set", "--flag", "nnodes=3")  # the same change on both: wrong for two nodes
        assert rc == 1 and said["written"] is False, said
        assert {(f["node"], f["rule"]) for f in said["findings"]} >= {
            ("n0", "deployment-nodes"),
            ("n1", "deployment-nodes"),
        }
        rc, said = deployment("set", "--flag", "mem-fraction-static=0.8", "--restart")
        assert rc == 0 and said["written"] is True and said["attempt"]["outcome"] == "ready", said
        for handle, unit, rank in ((lab, NODES[0], 0), (node1, NODES[1], 1)):
            text = handle.ssh("systemctl", "cat", unit).stdout
            assert "--mem-fraction-static 0.8 " in text and f"--node-rank {rank}" in text
        rc, said = deployment("restart")
        assert rc == 0 and said["attempt"]["number"] == 2 and said["attempt"]["outcome"] == "ready", said


def test_stacks_bench_and_snapshot_take_the_deployment(lab: LabHandle, node1: LabHandle, tmp_path: Path) -> None:
    """A hang over nodes is on every node at once: `stacks --deployment` dumps them all; the load
    goes to node 0, the one that serves; the incident notes are one per node."""
    config = write_config(lab, node1, tmp_path)

    def cockpit(*words: str) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([COCKPIT, "--config", str(config), *words], capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stdout + out.stderr
        return out

    with two_nodes(lab, node1):
        lab.wait_for(lambda: "ready to roll" in journal(lab, NODES[0]), 60, "node 0's ready line")
        dumped = json.loads(cockpit("stacks", "--deployment", "mn", "--json").stdout)["nodes"]
        ranks = {d["node"]: sorted(p["rank"] for p in d["processes"] if p["rank"]) for d in dumped}
        assert ranks == {"n0": sorted(f"TP{r}" for r in range(8)), "n1": sorted(f"TP{r}" for r in range(8, 16))}
        run = tmp_path / "run.json"
        small = ("--concurrency", "1", "--requests", "2", "--warmup", "0", "--input-len", "8", "--output-len", "4")
        cockpit("bench", "--deployment", "mn", *small, "--json", str(run))
        assert json.loads(run.read_text())["unit"] == NODES[0]  # node 0 serves
        notes = json.loads(
            cockpit("snapshot", "--deployment", "mn", "--out", str(tmp_path / "notes"), "--no-source", "--json").stdout
        )
        assert [(n["node"], n["note"]) for n in notes["nodes"]] == [
            (node, str(tmp_path / "notes" / node / "incident.md")) for node in ("n0", "n1")
        ]
        assert all(Path(n["note"]).is_file() for n in notes["nodes"])


def test_lab_up_nodes_gives_each_flag_once_and_stops_the_demo_unit(lab: LabHandle, node1: LabHandle) -> None:
    """`cockpit lab up --nodes 2` on the two labs (already up, so used as they are): each node's unit
    gave --tp-size twice (8, then the launch's 16) and the demo unit ran beside it, holding the
    node's GPUs (8 warnings). Each flag is given once now, the demo unit is stopped, and the
    deployment the printed config names is ready."""
    from cockpit.lab import nodes

    # the labs' own release: a lab up on another is refused (`lab up --nodes --release` passes it)
    infos, config = nodes.up(lab.name, 2, progress=lambda m: None, release=lab.info.release)
    try:
        assert [info.name for info in infos] == [lab.name, node1.name]
        for rank, handle in enumerate((lab, node1)):
            argv = handle.ssh("systemctl", "show", "-p", "ExecStart", "--value", nodes.node_unit(rank)).stdout
            words = argv.split()
            for flag in ("--tp-size", "--nnodes", "--node-rank", "--dist-init-addr", "--port"):
                assert words.count(flag) == 1, (flag, argv)
            assert words[words.index("--tp-size") + 1] == "16" and words[words.index("--node-rank") + 1] == str(rank)
            state = handle.ssh("systemctl", "is-active", "sglang-demo.service", check=False).stdout.strip()
            assert state == "inactive", state  # stopped, and not left failed: the fleet read "2 failed"
        status = [COCKPIT, "--config", str(config), "status", "--deployment", nodes.DEPLOYMENT, "--json"]

        def ready() -> bool:
            said = subprocess.run(status, capture_output=True, text=True, timeout=60).stdout
            return said.startswith("{") and json.loads(said)["readiness"] == "ready"

        lab.wait_for(ready, 60, "the deployment of the printed config ready")
    finally:
        for rank, handle in enumerate((lab, node1)):
            unit = nodes.node_unit(rank)
            handle.ssh("systemctl", "kill", "--signal=SIGKILL", unit, check=False)
            handle.ssh("systemctl", "stop", unit, check=False)
            handle.ssh("systemctl", "reset-failed", unit, check=False)
            handle.ssh("rm", "-f", f"/etc/systemd/system/{unit}", check=False)
            handle.ssh("systemctl", "daemon-reload", check=False)
            handle.ssh("systemctl", "start", "sglang-demo.service", check=False)
        for handle in (lab, node1):  # serving again, as the tests after this one expect to find it
            handle.wait_for(lambda h=handle: health(h, 30000) == "200", 90, "the demo unit serving again")


def test_an_experiment_on_the_deployment_writes_every_node_and_puts_every_node_back(
    lab: LabHandle, node1: LabHandle, tmp_path: Path
) -> None:
    """Issue 30 on a launch over nodes: a variant whose command lines would not agree between the
    nodes is skipped, never written; one (a flag and a variable) is carried to both nodes (each
    keeps its --node-rank),
    restarted as a group and measured on node 0; both nodes' files are back at the end."""
    config = write_config(lab, node1, tmp_path)
    plan = tmp_path / "mn.toml"
    plan.write_text(
        'name = "mn"\ndeployment = "mn"\n\n[workload]\nconcurrency = [1]\nrequests = 4\nwarmup = 0\n'
        "input_len = 16\noutput_len = 16\n\n[slo]\nitl_p95_ms = 1000\n\n"
        '[[variants]]\nname = "three-nodes"\nset.nnodes = 3\n\n'
        '[[variants]]\nname = "static-0.8"\nset.mem-fraction-static = 0.8\nenvironment.SGLANG_MARK = "static"\n'
    )
    with two_nodes(lab, node1):
        lab.wait_for(lambda: "ready to roll" in journal(lab, NODES[0]), 60, "node 0's first start")
        before = [h.ssh("systemctl", "cat", unit).stdout for h, unit in ((lab, NODES[0]), (node1, NODES[1]))]
        out = subprocess.run(
            [COCKPIT, "--config", str(config), "experiment", "run", str(plan), "--json"],
            capture_output=True,
            text=True,
            timeout=400,
            env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
        )
        assert out.returncode == 0, out.stderr[-3000:]
        record = json.loads(out.stdout)
        three, static = record["variants"]
        assert three["outcome"] == "skipped" and "--nnodes 3" in three["reason"], three
        assert {(f["node"], f["rule"]) for f in three["findings"]} >= {
            ("n0", "deployment-nodes"),
            ("n1", "deployment-nodes"),
        }
        assert static["outcome"] == "measured" and static["levels"][0]["level"]["errors"] == 0, static
        assert set(record["original_nodes"]) == {"n0", "n1"}
        assert record["end"]["unit_as_asked"] is True and record["end"]["outcome"] == "ready", record["end"]
        after = [h.ssh("systemctl", "cat", unit).stdout for h, unit in ((lab, NODES[0]), (node1, NODES[1]))]
        assert after == before
