"""How many scheduler ranks (one process and one GPU each) SGLang runs on each node of a server."""

from __future__ import annotations

from collections.abc import Mapping


def number(flags: Mapping[str, str | None], name: str, default: float) -> float:
    value = flags.get(name)
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


def ranks_on_node(flags: Mapping[str, str | None]) -> int:
    """tp x pp (x dp without DP attention) over the nodes."""
    tp, pp, dp = (int(number(flags, f, 1)) for f in ("--tp-size", "--pp-size", "--dp-size"))
    nodes = max(int(number(flags, "--nnodes", 1)), 1)
    return max(tp * pp * (1 if "--enable-dp-attention" in flags else dp) // nodes, 1)


def node_rank(flags: Mapping[str, str | None]) -> int:
    """This node's `--node-rank` (0, the node that serves, where not given)."""
    return int(number(flags, "--node-rank", 0))
