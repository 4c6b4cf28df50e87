"""Supported architecture: the model's `architectures[0]` against the model classes the
installed release has.

SGLang's registry (`sglang/srt/models/registry.py:import_model_classes`) is the `EntryClass`
of every module `sglang/srt/models/*.py` (a class or a list of them, keyed by class name;
packages under models/ are skipped). It is read here from the host's files with one grep, never
an import, and kept per host and release.

What 0.5.23 does with a class it lacks (seen: tests/data/sglang-0.5.23/unknown-architecture.txt):
the dry run passes; at model load `model_loader/utils.py:get_model_architecture` tries the
Transformers backend, and `resolve_transformers_arch` raises `ValueError: Cannot find model
module. 'X' is not a registered model in the Transformers library ...` unless transformers has
that class or config.json's `auto_map` names an `AutoModel`; then SGLang runs it through
transformers (slower, and refused if that class is not backend-compatible). The registry's own
`Model architectures [...] are not supported for now` (`_ModelRegistry._raise_for_unsupported`)
is reached only when that fallback class is missing too. So: an error where neither the registry
nor transformers has the class and no `auto_map` offers one; a warning where transformers or
remote code would stand in; a warning where transformers could not be looked at.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Iterable

from cockpit.errors import CockpitError
from cockpit.remote.base import Host, HostError
from cockpit.sglang.catalog.pysource import parse
from cockpit.sglang.preflight.model_files import ModelFiles
from cockpit.sglang.preflight.preflight import ERROR, WARNING, Finding

RULE = "model-architecture"
CONTEXT_LINES = 40  # enough for the longest EntryClass list in 0.5.23 (12 classes)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def entry_classes(text: str) -> frozenset[str]:
    """The class names of `EntryClass = X` and `EntryClass = [X, Y,\\n Z]` statements in
    `grep -h -A N '^EntryClass'` output (or whole module sources)."""
    names: set[str] = set()
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith("EntryClass") or "=" not in line:
            continue
        value = line.split("=", 1)[1].split("#", 1)[0].strip()
        if value[:1] in ("[", "("):
            close = "]" if value[0] == "[" else ")"
            body = [value[1:]]
            while close not in body[-1] and i < len(lines):
                body.append(lines[i].split("#", 1)[0])
                i += 1
            names.update(_NAME.findall(" ".join(body).split(close, 1)[0]))
        else:
            names.update(_NAME.findall(value)[:1])
    return frozenset(names)


MODEL_CONFIG = "sglang/srt/configs/model_config.py"


def chunked_prefill_unsupported(source: str) -> frozenset[str] | None:
    """The architectures whose chunked prefill the release turns off (the list in its
    `is_multimodal_chunked_prefill_supported`, every release the catalog holds); None where the
    source holds no such list."""
    try:
        tree = parse(source, MODEL_CONFIG)
    except (SyntaxError, ValueError, RecursionError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "is_multimodal_chunked_prefill_supported":
            for statement in node.body:
                if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.List):
                    names = [e.value for e in statement.value.elts if isinstance(e, ast.Constant)]
                    texts = [n for n in names if isinstance(n, str)]
                    if texts and len(texts) == len(statement.value.elts):
                        return frozenset(texts)
    return None


class ArchitectureCache:
    """The registry of each (host, release), and its list of architectures without chunked
    prefill, each read once."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str, str | None], frozenset[str]] = {}
        self._unchunked: dict[tuple[str, str, str | None], frozenset[str] | None] = {}

    async def get(self, host: Host, root: str, version: str | None) -> frozenset[str]:
        key = (host.name, root, version)
        if key not in self._known:
            self._known[key] = await read_registry(host, root)
        return self._known[key]

    async def without_chunked_prefill(self, host: Host, root: str, version: str | None) -> frozenset[str] | None:
        """chunked_prefill_unsupported of the release under `root` (None: not readable)."""
        key = (host.name, root, version)
        if key not in self._unchunked:
            try:
                source = (await host.read_file(posixpath.join(root, MODEL_CONFIG))).decode("utf-8", "replace")
            except HostError:
                source = ""
            self._unchunked[key] = chunked_prefill_unsupported(source)
        return self._unchunked[key]


async def read_registry(host: Host, root: str) -> frozenset[str]:
    """The EntryClass names of the SGLang under `root` (a site-packages directory) on the host."""
    script = f'grep -h -A {CONTEXT_LINES} "^EntryClass" "$1"/sglang/srt/models/*.py'
    result = await host.run(["sh", "-c", script, "sh", root], timeout=30)
    found = entry_classes(result.text)
    if not found:
        said = (result.error_text or result.text).strip().splitlines()[-1:] or ["no EntryClass found"]
        raise CockpitError(f"SGLang's model classes under {root} on {host.name}: {said[0]}")
    return found


async def in_transformers(host: Host, root: str, name: str) -> bool | None:
    """Whether the transformers package under `root` defines class `name` (None: not known)."""
    folder = posixpath.join(root, "transformers", "models")
    result = await host.run(["grep", "-rqF", "--include=modeling_*.py", "-e", f"class {name}(", folder], timeout=30)
    return {0: True, 1: False}.get(result.returncode)


def architecture_findings(
    model: ModelFiles, flag: str, supported: Iterable[str], version: str, transformers_has: bool | None
) -> list[Finding]:
    """The model's architecture (read from `flag`'s directory) against the registry."""
    arch = model.architecture
    if model.config is None or arch is None or arch in set(supported):
        return []
    release = f"SGLang {version or '(unknown release)'}"
    has_auto_model = "AutoModel" in ((model.config or {}).get("auto_map") or {})
    if transformers_has or has_auto_model:
        through = "transformers" if transformers_has else "its auto_map's remote code"
        return [
            Finding(
                WARNING,
                RULE,
                [flag],
                f"{release} has no model class {arch} ({model.name}): it falls back to the Transformers "
                f"backend through {through} (slower; refused if that class is not backend-compatible).",
                None,
                "Check that this release is the one meant for this model.",
            )
        ]
    if transformers_has is None:
        return [
            Finding(
                WARNING,
                RULE,
                [flag],
                f"{release} has no model class {arch} ({model.name}); whether transformers has one "
                "could not be read, so the start may stop with `Cannot find model module`.",
                None,
                "Check the architecture against this release.",
            )
        ]
    return [
        Finding(
            ERROR,
            RULE,
            [flag],
            f"{release} will stop loading {model.name}: neither it nor transformers has a model class "
            f"{arch} (ValueError in get_model_architecture: `Cannot find model module. '{arch}' is not a "
            "registered model in the Transformers library`). The dry run does not see it.",
            "ValueError",
            "Upgrade SGLang to a release that supports this architecture, or check config.json's architectures.",
        )
    ]
