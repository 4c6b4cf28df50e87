"""One edit written to every node of a launch over nodes: all of them, or none.

The nodes of one SGLang launch must run the same flags but `--node-rank`; a change written to
node 0 and refused on node 1 (a read-only unit directory, a full disk, an edit someone made
there) would leave the next restart with two different launches. So the nodes are written in
order, each by the single-unit write contract (cockpit.systemd.deploy: a backup, a temp file
and an atomic rename), and when one node's write fails the nodes already written get their old
text back, by the same contract, before anything restarts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.remote.replace import FileChanged, replace_file
from cockpit.systemd.deploy import write_files
from cockpit.systemd.unit import Unit, encode


@dataclass(frozen=True)
class NodeWrite:
    node: str  # the deployment's [units] entry
    host: Host
    cfg: HostConfig
    loaded: Unit  # as read from the node
    edited: Unit  # with the deployment's edit

    @cached_property
    def new(self) -> dict[str, str]:
        """Rendered once: the write, and a put-back, read it file by file."""
        return self.edited.changed()

    @cached_property
    def old(self) -> dict[str, str]:
        return {path: self.loaded.texts[path] for path in self.new}


class GroupWriteFailed(CockpitError):
    """A node's write failed: the nodes written before it were put back (or say why not)."""


async def write_group(writes: Sequence[NodeWrite]) -> dict[str, list[str]]:
    """Each node's changed files, node 0 first; returns each node's backups. When a node's write
    fails, the nodes before it get their old texts back and GroupWriteFailed names the node. A
    read-only node refuses before any node is written."""
    for w in writes:
        w.host.refuse_changes("nothing was written on any node")
    done: list[NodeWrite] = []
    backups: dict[str, list[str]] = {}
    for w in writes:
        try:
            backups[w.node] = await write_files(w.host, w.cfg, w.edited.name, w.new, w.old)
        except CockpitError as e:
            put_back = await _put_back(done)
            raise GroupWriteFailed(f"{w.node}: {e}. {put_back}") from None
        done.append(w)
    return backups


async def _put_back(done: Sequence[NodeWrite]) -> str:
    """The old texts onto the nodes already written, each refused if someone changed it since."""
    if not done:
        return "Nothing was written on any node."
    back, stuck = [], []
    for w in reversed(done):
        try:
            for path, text in w.old.items():
                await replace_file(w.host, path, encode(text), sudo=w.cfg.sudo, expect=encode(w.new[path]))
            back.append(w.node)
        except (FileChanged, HostError) as e:
            stuck.append(f"{w.node} keeps the new text ({e}; its backup holds the old one)")
    said = f"Put back as they were: {', '.join(reversed(back))}." if back else ""
    return " ".join(p for p in (said, *(s + "." for s in stuck)) if p)
