"""What a model directory on the host says about itself: its config.json, and how many bytes of
weights it stores.

The pre-flight's model checks (will it fit, does the draft fit its target, is the architecture
one the release knows) all start from these facts, read once per directory. The byte count is
the real one where the directory says it: `model.safetensors.index.json`'s `metadata.total_size`
(what the shards hold, in the dtype they are stored in, so an fp8 or AWQ checkpoint counts as
what it is), else the sum of the `*.safetensors` files' sizes. A directory that says neither
(weights elsewhere, `*.bin` only) has an unknown size, never a guessed one.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cockpit.remote.base import Host, HostError

INDEX = "model.safetensors.index.json"


@dataclass(frozen=True)
class ModelFiles:
    path: str
    config: Mapping[str, Any] | None  # None: no readable config.json (check_paths says why)
    weight_bytes: int | None = None  # None: the directory does not say
    weight_source: str = ""  # where weight_bytes came from, for the message

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/")) or self.path

    @property
    def text(self) -> Mapping[str, Any]:
        """The language model's part of the config: a multimodal config nests it in `text_config`
        (SGLang's `hf_text_config`), a plain one is it."""
        config = self.config or {}
        nested = config.get("text_config")
        return {**config, **nested} if isinstance(nested, dict) else config

    @property
    def architecture(self) -> str | None:
        """`architectures[0]`, the class SGLang looks up first."""
        archs = (self.config or {}).get("architectures")
        return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def config_of(text: str | bytes) -> dict[str, Any] | None:
    """A config.json's object; None where it is not one, nested deeper than the decoder recurses
    (a host's file nested 100,000 deep) included."""
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


INDEX_HEAD = 64 << 10  # an index's metadata comes first; its weight_map runs to megabytes (DeepSeek-V3: 9 MB)
_TOTAL_SIZE = re.compile(rb'"total_size"\s*:\s*(\d+)')


def total_size_of(index_head: bytes) -> int | None:
    """`metadata.total_size` of a safetensors index (the bytes of every tensor in every shard),
    from the start of the file: the whole is not read over SSH for one number. A tensor's name
    in the weight_map never is the bare key `"total_size"`."""
    found = _TOTAL_SIZE.search(index_head)
    return int(found.group(1)) or None if found else None


async def read_model_files(host: Host, path: str, *, sizes: bool = True) -> ModelFiles:
    """The directory's config.json and (with `sizes`) its stored weight bytes, read on the host."""
    try:
        config = config_of(await host.read_file(posixpath.join(path, "config.json")))
    except HostError:
        return ModelFiles(path, None)
    if not sizes:
        return ModelFiles(path, config)
    try:
        total = total_size_of(await host.read_file(posixpath.join(path, INDEX), limit=INDEX_HEAD))
        if total is not None:
            return ModelFiles(path, config, total, f"{INDEX} total_size")
    except HostError:
        pass
    listed = await host.run(
        ["find", path + "/", "-maxdepth", "1", "-name", "*.safetensors", "-printf", "%s\\n"], timeout=30
    )
    shard_sizes = [int(s) for s in listed.text.split() if s.isdigit()] if listed.ok else []
    if shard_sizes:
        return ModelFiles(path, config, sum(shard_sizes), f"{len(shard_sizes)} *.safetensors files")
    return ModelFiles(path, config)
