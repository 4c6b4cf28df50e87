"""Which flags a ServerArgs field is resolved from, read off the release's own resolution hooks.

Since 0.5.13 SGLang resolves its arguments in hooks (`sglang/srt/arg_groups/*.py`) that fill fields
from other flags: `declare_resolution(server_args, "_handle_deprecated_dp_attention",
attn_dp_size=cfg.dp_size)` under `if not cfg.enable_dp_attention: return`. A failing check that
reads `attn_dp_size` then depends on `--dp-size` and `--enable-dp-attention`, which the user wrote,
more than on `--attn-dp-size`, which they did not. Each `declare_resolution(...)` keyword and each
assignment to a field of the bound object is a derivation: the field, the flags its value reads,
the flags of the guards it sits under (enclosing `if`s and earlier `if ...: return`s), and where.
No table: the hooks of the release at hand are read.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.catalog.pysource import parse
from cockpit.sglang.explain.names import attributes, bound_names, flag_of, negated, strip_bound, unique

HOOK_DIR = "sglang/srt/arg_groups"


@dataclass(frozen=True)
class Derivation:
    field: str
    file: str
    line: int
    function: str
    value: str  # the expression, the bound name stripped: `dp_size`
    value_flags: tuple[str, ...]
    guards: tuple[str, ...]
    guard_flags: tuple[str, ...]
    # The guards (each path's, call sites' `if`s) under which the pipeline runs this function:
    # `run_hook(handle_deprecated_dp_attention, server_args)` in pipeline.py, or a call from such a
    # function. Empty: it was not seen run from the hooks (`_handle_ngram` is dispatched by the
    # algorithm object in speculative/spec_info.py), so only the failing path can show it ran.
    runs_when: tuple[tuple[str, ...], ...] = ()

    @property
    def flags(self) -> list[str]:
        return unique([*self.value_flags, *self.guard_flags])

    def to_json(self) -> dict:
        found = asdict(self)
        found.pop("runs_when")
        return {k: list(v) if isinstance(v, tuple) else v for k, v in found.items()}


@dataclass(frozen=True)
class CallSite:
    callee: str
    caller: str | None  # None: run by the pipeline itself, `run_hook(callee, server_args)`
    guards: tuple[str, ...]


def guards_at(func: ast.AST, line: int, exits: tuple[type[ast.stmt], ...] = (ast.Return, ast.Raise)) -> list[ast.expr]:
    """The conditions under which `line` of `func` runs: the tests of the `if`s whose branch holds it
    (a branch not taken negated), and `not X` for each earlier `if X: <exit>` beside it whose last
    statement is one of `exits` (`if cfg.dwdp_size <= 1: return` guards what follows it)."""
    out: list[ast.expr] = []
    body: list[ast.stmt] = list(getattr(func, "body", []))
    while True:
        here = next((n for n in body if n.lineno <= line <= (n.end_lineno or n.lineno)), None)
        if here is None:
            return out
        for before in body[: body.index(here)] if exits else []:
            if isinstance(before, ast.If) and not before.orelse and isinstance(before.body[-1], exits):
                out.append(negated(before.test))
        if isinstance(here, ast.If) and not (here.test.lineno <= line <= (here.test.end_lineno or here.test.lineno)):
            inside = any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in here.body)
            out.append(here.test if inside else negated(here.test))
            body = here.body if inside else here.orelse
            continue
        children = [n for name in ("body", "orelse", "finalbody") for n in getattr(here, name, []) or []]
        children += [n for h in getattr(here, "handlers", []) or [] for n in h.body]
        if not children:
            return out
        body = children


def derivations_in(text: str, path: str, catalog: Catalog | None) -> list[Derivation]:
    """Every field a file's functions resolve from other flags."""
    tree = parse(text, path)
    out: list[Derivation] = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        bound = bound_names(func, None)
        for node in ast.walk(func):
            pairs: list[tuple[str, ast.expr, int]] = []
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == (
                "declare_resolution"
            ):
                pairs = [(k.arg, k.value, node.lineno) for k in node.keywords if k.arg]
            elif isinstance(node, ast.Assign):
                pairs = [
                    (t.attr, node.value, node.lineno)
                    for t in node.targets
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in bound
                ]
            for field, value, line in pairs:
                tests = guards_at(func, line)
                value_attrs = [a.attr for a in attributes(value, bound) if a.attr != field]
                guard_attrs = [a.attr for t in tests for a in attributes(t, bound)]
                out.append(
                    Derivation(
                        field,
                        path,
                        line,
                        func.name,
                        strip_bound(ast.unparse(value), bound),
                        tuple(unique(f for f in (flag_of(a, catalog) for a in value_attrs) if f)),
                        tuple(strip_bound(ast.unparse(t), bound) for t in tests),
                        tuple(unique(f for f in (flag_of(a, catalog) for a in guard_attrs) if f)),
                    )
                )
    return out


def call_sites_in(text: str, path: str) -> list[CallSite]:
    """Where a hook file's functions call others by name, each with the guards of the call."""
    tree = parse(text, path)
    out: list[CallSite] = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        bound = bound_names(func, None)
        for node in ast.walk(func):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            guards = tuple(strip_bound(ast.unparse(t), bound) for t in guards_at(func, node.lineno, (ast.Return,)))
            if node.func.id == "run_hook" and node.args and isinstance(node.args[0], ast.Name):
                out.append(CallSite(node.args[0].id, None, guards))
            else:
                out.append(CallSite(node.func.id, func.name, guards))
    return out


def _run_paths(function: str, sites: Mapping[str, list[CallSite]], depth: int = 3) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for site in sites.get(function, []):
        if site.caller is None:
            out.append(site.guards)
        elif depth and site.caller != function:
            out += [(*path, *site.guards) for path in _run_paths(site.caller, sites, depth - 1)]
    return out


def read_hooks(files: Mapping[str, str], catalog: Catalog | None) -> dict[str, list[Derivation]]:
    """field -> its derivations, from the hook files (name -> text) of one release, each with the
    paths by which the pipeline runs its function."""
    found: dict[str, list[Derivation]] = {}
    sites: dict[str, list[CallSite]] = {}
    for name, text in sorted(files.items()):
        path = f"{HOOK_DIR}/{name}"
        for site in call_sites_in(text, path):
            sites.setdefault(site.callee, []).append(site)
        for d in derivations_in(text, path, catalog):
            found.setdefault(d.field, []).append(d)
    paths = {f: tuple(_run_paths(f, sites)) for f in {d.function for ds in found.values() for d in ds}}
    return {k: [replace(d, runs_when=paths[d.function]) for d in ds] for k, ds in found.items()}


_cache: dict[tuple[str, float], dict[str, list[Derivation]]] = {}


def release_derivations(root: Path, catalog: Catalog | None) -> dict[str, list[Derivation]]:
    """field -> its derivations, from every hook file of the release under `root` (none before
    0.5.13, which resolved in ServerArgs' own methods: those read as the failing frame's source)."""
    hooks = root / HOOK_DIR
    if not hooks.is_dir():
        return {}
    key = (str(hooks.resolve()), hooks.stat().st_mtime)
    if key not in _cache:
        _cache[key] = read_hooks({p.name: p.read_text(errors="replace") for p in hooks.glob("*.py")}, catalog)
    return _cache[key]
