"""`cockpit preflight --deployment`: one SGLang launch over two lab hosts (node 0 in the test lab,
node 1 in a second lab that routes to it), each node's unit as a two-node launch would be, and what
the cross-node pre-flight says before any write. Each finding names its node."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LabHandle
from tests.lab.standin_units import deployment_config, standin_unit
from tests.unit.test_preflight import COCKPIT

NODES = ("sglang-k26-node0.service", "sglang-k26-node1.service")
PORT = 5757


@pytest.fixture
def config(lab: LabHandle, node1: LabHandle, tmp_path: Path) -> Path:
    return deployment_config(tmp_path / "cockpit.toml", "k26", [("n0", lab, NODES[0]), ("n1", node1, NODES[1])])


@contextlib.contextmanager
def deployment(lab: LabHandle, node1: LabHandle, flags0: str, flags1: str) -> Iterator[None]:
    with (
        standin_unit(lab, NODES[0], 30120, flags=flags0, start=False),
        standin_unit(node1, NODES[1], 30120, flags=flags1, start=False),
    ):
        yield


def preflight(config: Path) -> list[dict]:
    out = subprocess.run(
        [COCKPIT, "--config", str(config), "preflight", "--deployment", "k26", "--json", "--static-only"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return [f for f in json.loads(out.stdout) if f["rule"] == "deployment-nodes"]


def launch(lab: LabHandle, extra: str = "", rank: int | None = None, address: str | None = None) -> str:
    addr = address or f"{lab.info.address}:{PORT}"
    return (
        f"--tp-size 16 --nnodes 2 --dist-init-addr {addr}{f' --node-rank {rank}' if rank is not None else ''} {extra}"
    )


def test_two_nodes_launched_alike_pass(lab: LabHandle, node1: LabHandle, config: Path) -> None:
    """Nothing listens on node 0's port yet: node 1's connect is refused, which is an answer."""
    with deployment(lab, node1, launch(lab, rank=0), launch(lab, rank=1)):
        assert preflight(config) == []


def test_what_differs_between_the_nodes_is_named_on_its_node(lab: LabHandle, node1: LabHandle, config: Path) -> None:
    steps = "--speculative-algorithm EAGLE3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8"
    with deployment(
        lab,
        node1,
        launch(lab, f"{steps} --speculative-num-steps 3", rank=0),
        launch(lab, f"{steps} --speculative-num-steps 4", rank=1),
    ):
        [found] = preflight(config)
    assert (found["node"], found["flags"]) == ("n1", ["--speculative-num-steps"]), found


def test_a_rank_twice_and_a_wrong_node_count(lab: LabHandle, node1: LabHandle, config: Path) -> None:
    with deployment(lab, node1, launch(lab, rank=0), launch(lab, rank=0)):
        [twice] = preflight(config)
    assert (twice["node"], twice["flags"]) == ("n1", ["--node-rank"]) and "both say --node-rank 0" in twice["message"]
    three = launch(lab, rank=0).replace("--nnodes 2", "--nnodes 3")
    with deployment(lab, node1, three, three.replace("--node-rank 0", "--node-rank 1")):
        found = preflight(config)
    assert sorted((f["node"], tuple(f["flags"])) for f in found) == [("n0", ("--nnodes",)), ("n1", ("--nnodes",))]


def test_an_init_address_node_1_cannot_reach(lab: LabHandle, node1: LabHandle, config: Path) -> None:
    nowhere = "10.213.254.1:5757"  # in the labs' range, a lab nobody has booted
    with deployment(lab, node1, launch(lab, rank=0, address=nowhere), launch(lab, rank=1, address=nowhere)):
        found = preflight(config)
    [reach] = [f for f in found if "cannot reach" in f["message"]]
    assert reach["node"] == "n1" and reach["severity"] == "error" and reach["flags"] == ["--dist-init-addr"], reach
    [named] = [f for f in found if f is not reach]
    assert named["node"] == "n0" and "which is not node 0" in named["message"], named
