"""A launch over several nodes, as SGLang runs one: every node gets the same flags but its
`--node-rank`; node 0 listens on `--dist-init-addr`'s port and waits for the others, which
connect to it; each node runs the ranks of its share (`TP8`..`TP15` on node 1 of TP 16).

The ranks wait for the meeting between "Init parallel begin." and its end, so a node that cannot
reach node 0 hangs there until the distributed timeout, as torch's store does. Once met, the
nodes keep their connections: when one node goes, the others notice nothing until their ranks
block in the next collective, and each rank's watchdog ends its node (sglang #3099).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DIST_TIMEOUT_S = 600.0  # torch's default store timeout where --dist-timeout is not given
RETRY_S = 1.0  # a node that cannot connect yet tries again after this


@dataclass(frozen=True)
class Layout:
    nnodes: int
    node_rank: int
    tp_size: int
    addr: tuple[str, int] | None  # --dist-init-addr
    timeout: float

    @classmethod
    def of(cls, args: Any) -> Layout:
        value = getattr(args, "dist_init_addr", None) or ""
        host, _, port = value.rpartition(":")
        return cls(
            nnodes=int(getattr(args, "nnodes", None) or 1),
            node_rank=int(getattr(args, "node_rank", None) or 0),
            tp_size=int(getattr(args, "tp_size", None) or 1),
            addr=(host.strip("[]"), int(port)) if host and port.isdigit() else None,
            timeout=float(getattr(args, "dist_timeout", None) or DIST_TIMEOUT_S),
        )

    @property
    def several(self) -> bool:
        return self.nnodes > 1

    @property
    def ranks(self) -> range:
        """The tensor-parallel ranks this node runs."""
        share = max(self.tp_size // self.nnodes, 1)
        return range(self.node_rank * share, (self.node_rank + 1) * share)


class MeetingFailed(Exception):
    """What torch raises when the nodes do not all meet in time (its own words)."""


async def meet(layout: Layout, on_lost: Callable[[], None]) -> None:
    """Node 0 waits for every other node; another node joins node 0. Returns once all met; later,
    `on_lost` is called once when a node's connection ends."""
    if layout.addr is None:
        raise MeetingFailed("ValueError: --dist-init-addr is required with --nnodes > 1")
    if layout.node_rank == 0:
        await _gather(layout, on_lost)
    else:
        await _join(layout, on_lost)


async def _gather(layout: Layout, on_lost: Callable[[], None]) -> None:
    assert layout.addr is not None
    joined: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
    everyone = asyncio.Event()

    async def arrive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        if line.startswith(b"node "):
            joined[int(line.split()[1])] = (reader, writer)
            if len(joined) == layout.nnodes - 1:
                everyone.set()

    server = await asyncio.start_server(arrive, "0.0.0.0", layout.addr[1])
    try:
        await asyncio.wait_for(everyone.wait(), layout.timeout)
    except asyncio.TimeoutError:
        raise MeetingFailed(
            f"torch.distributed.DistStoreError: Timed out after {int(layout.timeout)} seconds waiting for "
            f"clients. {len(joined) + 1}/{layout.nnodes} clients joined."
        ) from None
    for _, writer in joined.values():
        writer.write(b"go\n")
    for reader, writer in joined.values():
        _watch(reader, writer, on_lost)
    server.close()  # the meeting is over; the connections stay


async def _join(layout: Layout, on_lost: Callable[[], None]) -> None:
    assert layout.addr is not None
    host, port = layout.addr
    deadline = time.monotonic() + layout.timeout
    while True:
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), RETRY_S * 2)
            writer.write(f"node {layout.node_rank}\n".encode())
            if await reader.readline() == b"go\n":
                _watch(reader, writer, on_lost)
                return
        if time.monotonic() > deadline:
            raise MeetingFailed(
                f"torch.distributed.DistNetworkError: The client socket has timed out after "
                f"{int(layout.timeout * 1000)}ms while trying to connect to ({host}, {port})."
            )
        await asyncio.sleep(RETRY_S)


_WATCHING: set[asyncio.Task[None]] = set()  # the loop holds its tasks weakly


def _watch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, on_lost: Callable[[], None]) -> None:
    """Calls `on_lost` once the connection ends. The writer is held as long as the watch: from
    Python 3.13 a StreamWriter closes its connection when it is collected, and the joining node
    (whose writer nothing else holds) lost node 0 as soon as it had met it."""

    async def until_closed() -> None:
        with contextlib.suppress(OSError):
            await reader.read()
        writer.close()
        on_lost()

    task = asyncio.get_running_loop().create_task(until_closed())
    _WATCHING.add(task)
    task.add_done_callback(_WATCHING.discard)
