"""Tab completion of a path flag's value (cockpit.sglang.preflight.path_completion), on a real directory
listed through LocalHost: relative values from the unit's WorkingDirectory, links to
directories, names a hostile host could choose, and the values that are not paths."""

from __future__ import annotations

import os
from pathlib import Path

from cockpit.remote.local import LocalHost
from cockpit.sglang.preflight.path_completion import complete_path, shared_start


def tree(root: Path) -> None:
    for d in ("models/Llama-3.1-8B", "models/qwen", "work/eagle3", "models/a*b"):
        (root / d).mkdir(parents=True)
    (root / "models" / "readme.txt").write_text("")
    (root / "models" / "odd\nname").write_text("")
    os.symlink(root / "models" / "qwen", root / "models" / "link-qwen")


async def test_names_complete_from_the_hosts_directory(tmp_path: Path) -> None:
    tree(tmp_path)
    host = LocalHost()
    models = f"{tmp_path}/models"
    assert await complete_path(host, f"{models}/L") == [f"{models}/Llama-3.1-8B/"]
    assert await complete_path(host, f"{models}/") == [
        f"{models}/Llama-3.1-8B/",
        f"{models}/a*b/",
        f"{models}/link-qwen/",  # a link to a directory completes as one
        f"{models}/odd\nname",  # a newline in a name stays one name (NUL-separated)
        f"{models}/qwen/",
        f"{models}/readme.txt",
    ]
    assert await complete_path(host, f"{models}/a*") == [f"{models}/a*b/"]  # `*` typed is a `*`, no glob
    assert await complete_path(host, f"{models}/*") == []
    assert shared_start([f"{models}/Llama-3.1-8B/", f"{models}/Llama-3.2-1B/"]) == f"{models}/Llama-3."


async def test_a_relative_value_completes_from_the_working_directory(tmp_path: Path) -> None:
    """Where the server looks (systemd's WorkingDirectory), not the SSH login's home."""
    tree(tmp_path)
    host = LocalHost()
    assert await complete_path(host, "./ea", f"{tmp_path}/work") == ["./eagle3/"]
    assert await complete_path(host, "../models/q", f"{tmp_path}/work") == ["../models/qwen/"]
    assert await complete_path(host, "./ea", f"-{tmp_path}/work") == ["./eagle3/"]  # systemd's `-` prefix
    assert await complete_path(host, "./ea", "/") == []


async def test_what_is_not_a_path_on_the_host_is_not_completed(tmp_path: Path) -> None:
    tree(tmp_path)
    host = LocalHost()
    assert await complete_path(host, "meta-llama/Llama-3.1-8B", str(tmp_path)) == []  # an id on the Hub
    assert await complete_path(host, "~/models", str(tmp_path)) == []  # SGLang does not expand ~
    assert await complete_path(host, f"{tmp_path}/nothere/x") == []
