"""One edit written to every node of a launch over nodes: all of them, or none.

The nodes of one SGLang launch must run the same flags but `--node-rank`; a change written to
node 0 and refused on node 1 (a read-only unit directory, a full disk, an edit someone made
there) would leave the next restart with two different launches. So the nodes are written in
order, each by the single-unit write contract (cockpit.systemd.deploy: a backup, a temp file
and an atomic rename), and when one node's write fails every node that holds the new text gets
its old text back, by the same contract, before anything restarts. Which nodes those are is read
from the hosts, not inferred from which write raised: a node whose write failed after a rename
(its unit renamed, a drop-in refused) holds new text too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from cockpit.config import HostConfig
from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.remote.replace import FileChanged, current, replace_file
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
    """A node's write failed: every node that held the new text was put back (or it says why not)."""

    def __init__(self, sentence: str, unchanged: bool) -> None:
        super().__init__(sentence)
        self.unchanged = unchanged  # every node's files as they were, as read from the hosts


async def write_group(writes: Sequence[NodeWrite]) -> dict[str, list[str]]:
    """Each node's changed files, node 0 first; returns each node's backups. When a node's write
    fails, every node tried so far is read and put back where it holds new text, and
    GroupWriteFailed names the node. A read-only node refuses before any node is written."""
    for w in writes:
        w.host.refuse_changes("nothing was written on any node")
    backups: dict[str, list[str]] = {}
    for i, w in enumerate(writes):
        try:
            backups[w.node] = await write_files(w.host, w.cfg, w.edited.name, w.new, w.old)
        except CockpitError as e:
            said, unchanged = await _put_back(writes[: i + 1])
            raise GroupWriteFailed(f"{w.node}: {e}. {said}", unchanged) from None
    return backups


async def _put_back(tried: Sequence[NodeWrite]) -> tuple[str, bool]:
    """Each file of the nodes tried that holds its new text gets its old text back (refused if
    someone changed it since); what was done, and whether every file is now as it was."""
    back, stuck = [], []
    for w in reversed(tried):
        wrote = False
        try:
            for path, text in w.old.items():
                if await current(w.host, path) == encode(w.new[path]):
                    wrote = True
                    await replace_file(w.host, path, encode(text), sudo=w.cfg.sudo, expect=encode(w.new[path]))
        except (FileChanged, HostError) as e:
            stuck.append(f"{w.node} may keep new text ({e}; its backup holds the old one)")
            continue
        if wrote:
            back.append(w.node)
    if not back and not stuck:
        return "Nothing was written on any node.", True
    said = f"Put back as they were: {', '.join(reversed(back))}." if back else ""
    return " ".join(p for p in (said, *(s + "." for s in stuck)) if p), not stuck
