"""Values a failing check takes from the model, followed to the keys of its config.json.

`if context_length > derived_context_len:` in 0.5.23's `_derive_context_length` compares the flag
with `derived_context_len = get_context_length(self.hf_text_config)`: a number from the model. The
local is found among those the failing statement and its guards read, assigned from a call that is
handed the model's config (`self.hf_text_config`, `hf_config`...); the called function is read in
the release (the failing file itself, or the module it is imported from) for the keys it reads off
that config: `getattr(config, "rope_scaling", None)`, `config.max_position_embeddings`, and
`for key in CONTEXT_LENGTH_KEYS: getattr(config, key, None)` over a module-level list of names. No
table of SGLang's helpers: each release's own is read. The model directory's config.json then
gives each key's value (model_files.ModelFiles.text, the language model's part).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from cockpit.sglang.catalog.pysource import parse
from cockpit.sglang.explain.names import assigned_values, names_reached

_CONFIG_WORDS = ("hf_config", "hf_text_config", "text_config", "model_config", "config")


@dataclass
class ModelRead:
    name: str  # the local the check reads: `derived_context_len`
    function: str  # the release's function that computed it from the model's config
    module: str  # that function's module, `sglang.srt.utils.hf_transformers.common`
    line: int
    keys: list[str]  # the config.json keys it reads, in its order
    values: dict[str, Any] = field(default_factory=dict)  # those the model's config.json has

    def to_json(self) -> dict:
        return asdict(self)

    def said(self, model_path: str | None) -> str:
        where = f"{model_path.rstrip('/')}/config.json" if model_path else "the model's config.json"
        has = ", ".join(f"{k} {_short(v)}" for k, v in self.values.items())
        found = f"{where} has {has}" if has else f"{where} has none of them"
        return (
            f"{self.name} comes from the model: {self.function} ({self.module}:{self.line}) reads "
            f"{', '.join(self.keys)}; {found}."
        )


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _handed_config(call: ast.Call) -> bool:
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        name = arg.attr if isinstance(arg, ast.Attribute) else arg.id if isinstance(arg, ast.Name) else ""
        if name in _CONFIG_WORDS:
            return True
    return False


def _locals_read(func: ast.AST, nodes: list[ast.AST]) -> dict[str, ast.Call]:
    """Locals the nodes read (through other locals) that were assigned from a call handed the model's
    config: name -> that call."""
    assigned = assigned_values(func)
    return {
        name: value
        for name in names_reached(nodes, assigned)
        for value in assigned.get(name, [])
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and _handed_config(value)
    }


def _imported_from(tree: ast.Module, name: str, module: str) -> tuple[str, list[str]] | None:
    """Where `name` is imported from in a module's tree: its own name there, and the dotted modules it
    may be (a relative import reads one way in a package's __init__, another in a plain module; a
    `from x import *` shim, such as 0.5.23's hf_transformers_utils, may hold any name)."""
    starred: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        parts = module.split(".")
        tail = [node.module] if node.module else []
        sources = (
            [node.module or ""]
            if node.level == 0
            else [
                ".".join(parts[: len(parts) - node.level + 1] + tail),
                ".".join(parts[: len(parts) - node.level] + tail),
            ]
        )
        for a in node.names:
            if a.name == "*":
                starred += sources
            elif (a.asname or a.name) == name:
                return a.name, sources
    return (name, starred) if starred else None


def locate(
    name: str, module: str, tree: ast.Module, modules: Mapping[str, str], depth: int = 4
) -> tuple[str, ast.Module, ast.FunctionDef] | list[str]:
    """The def of `name` as seen from `module` (whose tree is given), through the imports and
    re-exports (`from .common import get_context_length` in a package's __init__) of the modules
    read so far; else the modules still to read to find it (none: it cannot be found)."""
    found = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if found is not None:
        return module, tree, found
    source = _imported_from(tree, name, module)
    if source is None or depth == 0:
        return []
    needed: list[str] = []
    for candidate in source[1]:
        text = modules.get(candidate)
        if text is None:
            needed.append(candidate)
            continue
        if not text:  # read and not there
            continue
        result = locate(source[0], candidate, parse(text, candidate), modules, depth - 1)
        if not isinstance(result, list):
            return result
        needed += result
    return needed


def modules_needed(
    tree: ast.Module, func: ast.AST, nodes: list[ast.AST], package: str, modules: Mapping[str, str]
) -> list[str]:
    """The modules (dotted) still to read to find the functions the model-reading locals come from;
    `modules` holds those read so far ("" for one that is not there)."""
    needed: list[str] = []
    for call in _locals_read(func, nodes).values():
        result = locate(getattr(call.func, "id", ""), package, tree, modules)
        if isinstance(result, list):
            needed += result
    return list(dict.fromkeys(needed))


def module_files(module: str) -> list[str]:
    """Where a dotted module may lie, relative to site-packages: `a/b.py`, then `a/b/__init__.py`."""
    base = module.replace(".", "/")
    return [f"{base}.py", f"{base}/__init__.py"]


def _keys_read(func: ast.FunctionDef, tree: ast.Module) -> list[str]:
    params = [a.arg for a in func.args.args]
    if not params:
        return []
    config = params[0]
    constants = {
        t.id: [e.value for e in n.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, (ast.List, ast.Tuple))
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    aliases = {config}
    for n in ast.walk(func):  # `text_config = config`
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in aliases:
            aliases.update(t.id for t in n.targets if isinstance(t, ast.Name))
    loops = {
        n.target.id: constants[n.iter.id]
        for n in ast.walk(func)
        if isinstance(n, ast.For)
        and isinstance(n.target, ast.Name)
        and isinstance(n.iter, ast.Name)
        and n.iter.id in constants
    }
    keys: list[str] = []
    for n in ast.walk(func):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases:
            keys.append(n.attr)
        elif (
            isinstance(n, ast.Call)
            and getattr(n.func, "id", None) in ("getattr", "hasattr")
            and len(n.args) >= 2
            and isinstance(n.args[0], ast.Name)
            and n.args[0].id in aliases
        ):
            key = n.args[1]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                keys.append(key.value)
            elif isinstance(key, ast.Name) and key.id in loops:
                keys += loops[key.id]
    return list(dict.fromkeys(keys))


def model_reads(
    tree: ast.Module,
    func: ast.AST,
    nodes: list[ast.AST],
    package: str,
    modules: Mapping[str, str],
    config: Mapping[str, Any] | None,
) -> list[ModelRead]:
    """The model values the nodes (the failing statement and its guards) read. `modules` holds the
    release's files by module (dotted) name; `config` the model's config.json (its text part)."""
    out: list[ModelRead] = []
    for local, call in _locals_read(func, nodes).items():
        result = locate(getattr(call.func, "id", ""), package, tree, modules)
        if isinstance(result, list):
            continue
        module, where, found = result
        keys = _keys_read(found, where)
        if keys:
            values = {k: config[k] for k in keys if config is not None and k in config}
            out.append(ModelRead(local, found.name, module, found.lineno, keys, values))
    return out
