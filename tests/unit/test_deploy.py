"""Writing unit files: bytes that are not UTF-8 survive the re-read check, the write and the backup."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cockpit.config import HostConfig
from cockpit.remote.local import LocalHost
from cockpit.systemd.deploy import write_files
from cockpit.systemd.unit import decode


def test_a_latin1_drop_in_is_rewritten_byte_for_byte(tmp_path: Path) -> None:
    drop_in = tmp_path / "sglang-demo.service.d" / "flags.conf"
    drop_in.parent.mkdir()
    original = b"# caf\xe9 (Latin-1)\n[Service]\nEnvironment=A=1\n"
    drop_in.write_bytes(original)
    loaded = decode(original)
    changed = loaded.replace("A=1", "A=2")
    backups = asyncio.run(
        write_files(
            LocalHost(),
            HostConfig(name="localhost"),
            "sglang-demo.service",
            {str(drop_in): changed},
            {str(drop_in): loaded},
        )
    )
    assert drop_in.read_bytes() == original.replace(b"A=1", b"A=2")
    assert [Path(b).read_bytes() for b in backups] == [original]
