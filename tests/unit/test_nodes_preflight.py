"""What must agree between the nodes of one SGLang launch, judged on each node's flags as the
release's real 0.5.23 flag catalog reads them."""

from __future__ import annotations

import pytest

from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.preflight.nodes_preflight import NodeFacts, cross_node_findings, dist_init_addr

BASE = "--model-path /models/k26 --tp-size 16 --nnodes 2 --dist-init-addr 10.0.0.1:5757"


@pytest.fixture(scope="module")
def catalog(sglang_root):
    return load_catalog(sglang_root("0.5.23"))


def node(catalog, name: str, flags: str, **facts) -> NodeFacts:
    defaults = {"gpus": 8, "interfaces": frozenset({"lo", "eth0", "ib0"}), "addresses": frozenset({"10.0.0.1"})}
    return NodeFacts(name, f"{name}-host", flags.split(), catalog, **{**defaults, **facts})


def said(findings) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(f.severity, f.node, tuple(f.flags)) for f in findings]


def test_two_nodes_that_agree_say_nothing(catalog) -> None:
    nodes = [node(catalog, "n0", f"{BASE} --node-rank 0"), node(catalog, "n1", f"{BASE} --node-rank 1")]
    assert cross_node_findings(nodes) == []
    assert dist_init_addr(nodes[0].flags) == ("10.0.0.1", 5757)


def test_a_flag_node_1_has_otherwise_is_named_on_node_1(catalog) -> None:
    nodes = [
        node(catalog, "n0", f"{BASE} --node-rank 0 --speculative-num-steps 3"),
        node(catalog, "n1", f"{BASE} --node-rank 1 --speculative-num-steps 4"),
    ]
    [f] = cross_node_findings(nodes)
    assert said([f]) == [("error", "n1", ("--speculative-num-steps",))]
    assert "'4' on n1 and '3' on n0" in f.message and f.fix == "Give n1 the n0's --speculative-num-steps 3."


def test_ranks_each_once_and_in_order(catalog) -> None:
    twice = [node(catalog, "n0", f"{BASE} --node-rank 0"), node(catalog, "n1", f"{BASE}")]  # rank 0 by default
    assert said(cross_node_findings(twice)) == [("error", "n1", ("--node-rank",))]
    swapped = [node(catalog, "n0", f"{BASE} --node-rank 1"), node(catalog, "n1", f"{BASE} --node-rank 0")]
    assert said(cross_node_findings(swapped)) == [
        ("warning", "n0", ("--node-rank",)),
        ("warning", "n1", ("--node-rank",)),
    ]


def test_sizes_against_the_node_count_and_each_nodes_gpus(catalog) -> None:
    three = BASE.replace("--nnodes 2", "--nnodes 3")
    nodes = [node(catalog, "n0", f"{three} --node-rank 0"), node(catalog, "n1", f"{three} --node-rank 1")]
    assert said(cross_node_findings(nodes)) == [("error", "n0", ("--nnodes",)), ("error", "n1", ("--nnodes",))]
    small = [node(catalog, "n0", f"{BASE} --node-rank 0", gpus=4), node(catalog, "n1", f"{BASE} --node-rank 1")]
    [f] = cross_node_findings(small)
    assert f.node == "n0" and "8 GPUs on each; n0-host has 4" in f.message


def test_the_init_address_is_node_0s_and_the_interfaces_exist(catalog) -> None:
    elsewhere = BASE.replace("10.0.0.1", "10.0.9.9")
    nodes = [node(catalog, "n0", f"{elsewhere} --node-rank 0"), node(catalog, "n1", f"{elsewhere} --node-rank 1")]
    [f] = cross_node_findings(nodes)
    assert f.node == "n0" and "names 10.0.9.9, which is not node 0" in f.message
    env = {"NCCL_SOCKET_IFNAME": "eth", "GLOO_SOCKET_IFNAME": "=bond0"}
    nodes = [node(catalog, "n0", f"{BASE} --node-rank 0", env=env), node(catalog, "n1", f"{BASE} --node-rank 1")]
    [f] = cross_node_findings(nodes)  # eth matches eth0 as NCCL's prefix; =bond0 matches nothing
    assert f.node == "n0" and "GLOO_SOCKET_IFNAME==bond0" in f.message
