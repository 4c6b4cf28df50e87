"""Pre-flight across the nodes of one SGLang launch: what must agree between them before any write.

SGLang starts a multi-node server with the same command on every node: the total `--tp-size`,
`--nnodes N`, the node's own `--node-rank i` and `--dist-init-addr HEAD:PORT`, where node 0
listens and the others connect. Each node's unit checks alone cannot see a mismatch between
them (node 1 with other speculative flags, two nodes claiming rank 0, `--nnodes 3` on two nodes),
and SGLang sees it only after the restart, as a hang at "Init torch distributed begin" or a
crash on one node while the other waits (sglang #958, #3099, #4978). Each finding names its node.

`cross_node_findings` judges facts already read; `node_facts` and `reach_findings` read them
from each node over its own SSH connection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from cockpit.remote.base import Host, HostError
from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.preflight.preflight import ERROR, WARNING, Finding, given_flags
from cockpit.sglang.server.ranks import node_rank, number

RULE = "deployment-nodes"
PER_NODE = ("--node-rank",)  # the one flag that differs between the nodes of one launch
IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
PROBE_S = 3  # a TCP connect that has not answered by then is not going to: the address is unreachable


@dataclass(frozen=True)
class NodeFacts:
    """What one node's unit and host say, read before the cross-node checks."""

    node: str  # the [units] entry
    host: str
    argv: Sequence[str]
    catalog: Catalog | None
    env: Mapping[str, str] = field(default_factory=dict)
    gpus: int | None = None  # GPUs the host's nvidia-smi lists; None: unknown
    interfaces: frozenset[str] | None = None  # network interfaces; None: unknown
    addresses: frozenset[str] = frozenset()  # the host's IP addresses and names

    @cached_property
    def flags(self) -> dict[str, str | None]:
        """Read once: every cross-node check asks for them."""
        return given_flags(self.argv, self.catalog) if self.catalog is not None else {}

    @property
    def rank(self) -> int:
        return node_rank(self.flags)


def on_node(findings: Sequence[Finding], node: str) -> list[Finding]:
    """A unit's own findings, said of its node."""
    return [replace(f, node=node) for f in findings]


def _finding(severity: str, node: str, flags: list[str], message: str, fix: str | None, raises: str | None) -> Finding:
    return Finding(severity, RULE, flags, message, raises, fix, node=node)


def _shared(nodes: Sequence[NodeFacts]) -> list[Finding]:
    """The same release and the same flags on every node, --node-rank apart."""
    head, found = nodes[0], []
    for other in nodes[1:]:
        if head.catalog and other.catalog and head.catalog.version != other.catalog.version:
            found.append(
                _finding(
                    ERROR,
                    other.node,
                    [],
                    f"{other.node} runs SGLang {other.catalog.version}, {head.node} {head.catalog.version}: "
                    "the nodes of one launch exchange tensors and messages in their release's own format.",
                    f"Install SGLang {head.catalog.version} on {other.host}.",
                    None,
                )
            )
        mine = {k: v for k, v in head.flags.items() if k not in PER_NODE}
        theirs = {k: v for k, v in other.flags.items() if k not in PER_NODE}
        for name in sorted(mine.keys() | theirs.keys()):
            if mine.get(name, _ABSENT) == theirs.get(name, _ABSENT):
                continue
            found.append(
                _finding(
                    ERROR,
                    other.node,
                    [name],
                    f"{name} is {_said(theirs, name)} on {other.node} and {_said(mine, name)} on {head.node}: "
                    "every node of one launch runs the same command but for --node-rank.",
                    f"Give {other.node} the {head.node}'s {name}" + (f" {mine[name]}" if mine.get(name) else "") + ".",
                    None,
                )
            )
    return found


_ABSENT = object()


def _said(flags: Mapping[str, str | None], name: str) -> str:
    if name not in flags:
        return "not given"
    value = flags[name]
    return "on" if value is None else repr(value)


def _ranks(nodes: Sequence[NodeFacts]) -> list[Finding]:
    found: list[Finding] = []
    seen: dict[int, str] = {}
    for position, n in enumerate(nodes):
        if n.rank in seen:
            found.append(
                _finding(
                    ERROR,
                    n.node,
                    ["--node-rank"],
                    f"{n.node} and {seen[n.rank]} both say --node-rank {n.rank}: each node of {len(nodes)} "
                    f"must have its own rank, 0 to {len(nodes) - 1}; the launch waits for a rank nobody has.",
                    f"Give the nodes ranks 0 to {len(nodes) - 1}, in the deployment's order.",
                    None,
                )
            )
        elif not 0 <= n.rank < len(nodes):
            found.append(
                _finding(
                    ERROR,
                    n.node,
                    ["--node-rank"],
                    f"{n.node} says --node-rank {n.rank}, outside 0 to {len(nodes) - 1} for {len(nodes)} nodes.",
                    f"Give the nodes ranks 0 to {len(nodes) - 1}, in the deployment's order.",
                    None,
                )
            )
        elif n.rank != position:
            found.append(
                _finding(
                    WARNING,
                    n.node,
                    ["--node-rank"],
                    f"{n.node} is node {position} of the deployment but says --node-rank {n.rank}: the "
                    "deployment lists its nodes in node-rank order, and node 0 is the one that serves.",
                    "List the deployment's nodes in node-rank order, or swap their --node-rank.",
                    None,
                )
            )
        seen.setdefault(n.rank, n.node)
    return found


def _sizes(nodes: Sequence[NodeFacts]) -> list[Finding]:
    """--nnodes equal to the node count; tp x pp over the nodes within each node's GPUs."""
    found = []
    for n in nodes:
        flags = n.flags
        nnodes = int(number(flags, "--nnodes", 1))
        if nnodes != len(nodes):
            found.append(
                _finding(
                    ERROR,
                    n.node,
                    ["--nnodes"],
                    f"{n.node} says --nnodes {nnodes}; the deployment has {len(nodes)} nodes. Node 0 waits for "
                    f'{nnodes} to join (a hang at "Init torch distributed begin").',
                    f"Give every node --nnodes {len(nodes)}.",
                    None,
                )
            )
            continue
        tp, pp = int(number(flags, "--tp-size", 1)), int(number(flags, "--pp-size", 1))
        # tp x pp not divisible by --nnodes is each node's own rule (rule_families), said per node.
        if (tp * pp) % nnodes == 0 and n.gpus is not None and (tp * pp) // nnodes > n.gpus:
            found.append(
                _finding(
                    ERROR,
                    n.node,
                    ["--tp-size", "--pp-size"],
                    f"tp {tp} x pp {pp} over {nnodes} nodes is {(tp * pp) // nnodes} GPUs on each; "
                    f"{n.host} has {n.gpus}.",
                    f"Use --tp-size {n.gpus * nnodes // pp} or more nodes.",
                    "RuntimeError",
                )
            )
    return found


def dist_init_addr(flags: Mapping[str, str | None]) -> tuple[str, int] | None:
    """--dist-init-addr as (host, port); None where it is not given or not HOST:PORT."""
    value = flags.get("--dist-init-addr") or ""
    host, _, port = value.rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else None


def _head_address(nodes: Sequence[NodeFacts]) -> list[Finding]:
    head = next((n for n in nodes if n.rank == 0), nodes[0])
    addr = dist_init_addr(head.flags)
    if addr is None:
        if len(nodes) > 1:
            return [
                _finding(
                    ERROR,
                    head.node,
                    ["--dist-init-addr"],
                    f"{head.node} gives no --dist-init-addr HOST:PORT: the other nodes have nowhere to join.",
                    f"Give every node --dist-init-addr {head.host}:5000 (node 0's address and a free port).",
                    None,
                )
            ]
        return []
    if head.addresses and addr[0] not in head.addresses:
        return [
            _finding(
                ERROR,
                head.node,
                ["--dist-init-addr"],
                f"--dist-init-addr names {addr[0]}, which is not node 0 ({head.node} on {head.host}: "
                f"{', '.join(sorted(head.addresses))}); node 0 listens on its own address.",
                f"Give every node --dist-init-addr with one of {head.node}'s addresses.",
                None,
            )
        ]
    return []


def _interfaces(nodes: Sequence[NodeFacts]) -> list[Finding]:
    found = []
    for n in nodes:
        for var in IFNAME_VARS:
            wanted = n.env.get(var)
            if not wanted or n.interfaces is None:
                continue
            # NCCL's syntax: a prefix list, `^` to exclude, `=` for an exact name.
            names = [w.lstrip("=") for w in wanted.lstrip("^").split(",") if w]
            if wanted.startswith("^"):
                continue
            exact = wanted.startswith("=")
            if not any((i == w if exact else i.startswith(w)) for w in names for i in n.interfaces):
                found.append(
                    _finding(
                        ERROR,
                        n.node,
                        [],
                        f"{var}={wanted} on {n.node}, but {n.host} has no such interface "
                        f"({', '.join(sorted(n.interfaces))}).",
                        f"Set {var} to one of {n.host}'s interfaces.",
                        None,
                    )
                )
    return found


def cross_node_findings(nodes: Sequence[NodeFacts]) -> list[Finding]:
    """Everything that must agree between the nodes, from facts read on each (in node-rank order)."""
    if len(nodes) < 2:
        return []
    return _shared(nodes) + _ranks(nodes) + _sizes(nodes) + _head_address(nodes) + _interfaces(nodes)


async def host_network(host: Host) -> tuple[frozenset[str] | None, frozenset[str]]:
    """The host's interfaces and addresses (with its names), from `ip -o addr` and `hostname`."""
    try:
        result = await host.run(["sh", "-c", "ip -o addr show; echo; hostname; hostname -f"], timeout=10)
    except HostError:
        return None, frozenset()
    interfaces, addresses = set(), {host.name}
    for line in result.text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].endswith(":") and parts[2] in ("inet", "inet6"):
            interfaces.add(parts[1].split("@")[0])
            addresses.add(parts[3].split("/")[0])
        elif len(parts) == 1:
            addresses.add(parts[0])
    return (frozenset(interfaces) or None), frozenset(addresses)


async def reach_findings(host: Host, node: str, address: tuple[str, int], head: str) -> list[Finding]:
    """Whether `node` reaches node 0's --dist-init-addr: a TCP connect from the node itself, over
    its own connection, bounded in time. A refusal is an answer (nothing listens yet, the host is
    there); no answer within PROBE_S, or no route, is what the launch would hang on."""
    ip, port = address
    probe = ["timeout", str(PROBE_S), "bash", "-c", 'exec 3<>"/dev/tcp/$0/$1"', ip, str(port)]
    try:
        result = await host.run(probe, timeout=PROBE_S + 10)
    except HostError as e:
        return [Finding(WARNING, RULE, ["--dist-init-addr"], f"could not probe from {node}: {e}", node=node)]
    said = (result.error_text or "").strip().splitlines()
    if result.returncode == 0 or any("refused" in line for line in said):
        return []
    why = "no answer within 3 s" if result.returncode == 124 else (said[-1] if said else f"exit {result.returncode}")
    return [
        _finding(
            ERROR,
            node,
            ["--dist-init-addr"],
            f"{node} ({host.name}) cannot reach --dist-init-addr {ip}:{port} ({why}): it would hang at "
            f'"Init torch distributed begin" waiting for {head}.',
            f"Give --dist-init-addr an address of {head} that {host.name} routes to, or open port {port}.",
            None,
        )
    ]
