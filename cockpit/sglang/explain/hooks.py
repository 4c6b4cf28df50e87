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
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.catalog.pysource import parse
from cockpit.sglang.explain.names import attributes, bound_names, flag_of, negated, strip_bound, unique


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


@dataclass(frozen=True)
class ReleaseFile:
    """One file of the release, parsed once: each function with the names that hold the flags in it."""

    path: str  # from sglang/: sglang/srt/arg_groups/parallel_hook.py
    functions: tuple[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None, frozenset[str]], ...]


def read_file(text: str, path: str) -> ReleaseFile:
    tree = parse(text, path)
    owner = {id(f): c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
    funcs = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    # A ServerArgs method's `self` is read as the flags.
    return ReleaseFile(path, tuple((f, owner.get(id(f)), frozenset(bound_names(f, owner.get(id(f))))) for f in funcs))


def derivations_in(file: ReleaseFile, catalog: Catalog | None) -> list[Derivation]:
    """Every field a file's functions resolve from other flags."""
    path = file.path
    out: list[Derivation] = []
    for func, _, frozen in file.functions:
        bound = set(frozen)
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


# Where the release runs its checks from: ServerArgs' own, before and after the pipeline's hooks.
ROOT_METHODS = ("__post_init__", "check_server_args")


def call_sites_in(file: ReleaseFile) -> list[CallSite]:
    """Where a file's functions call others by name (`f(...)`, `self.f(...)`), each with the guards
    of the call; `run_hook(f, ...)` and ServerArgs' ROOT_METHODS are the pipeline's own runs."""
    out: list[CallSite] = []
    for func, cls, frozen in file.functions:
        bound = set(frozen)
        if cls is not None and "ServerArgs" in cls and func.name in ROOT_METHODS:
            out.append(CallSite(func.name, None, ()))
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name):
                callee = node.func.id
            elif (
                isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and (node.func.value.id == "self")
            ):
                callee = node.func.attr
            else:
                continue
            guards = tuple(strip_bound(ast.unparse(t), bound) for t in guards_at(func, node.lineno, (ast.Return,)))
            if callee == "run_hook" and node.args and isinstance(node.args[0], ast.Name):
                out.append(CallSite(node.args[0].id, None, guards))
            else:
                out.append(CallSite(callee, func.name, guards))
    return out


def run_paths(function: str, sites: Mapping[str, list[CallSite]], depth: int = 3) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for site in sites.get(function, []):
        if site.caller is None:
            out.append(site.guards)
        elif depth and site.caller != function:
            out += [(*path, *site.guards) for path in run_paths(site.caller, sites, depth - 1)]
    return out


def call_sites(files: Sequence[ReleaseFile]) -> dict[str, list[CallSite]]:
    """callee -> where the files call it."""
    sites: dict[str, list[CallSite]] = {}
    for file in files:
        for site in call_sites_in(file):
            sites.setdefault(site.callee, []).append(site)
    return sites


def read_hooks(
    files: Sequence[ReleaseFile], catalog: Catalog | None, sites: Mapping[str, list[CallSite]]
) -> dict[str, list[Derivation]]:
    """field -> its derivations in the files, each with the paths by which the pipeline runs its
    function (`sites`: call_sites of the whole release)."""
    found: dict[str, list[Derivation]] = {}
    for file in files:
        for d in derivations_in(file, catalog):
            found.setdefault(d.field, []).append(d)
    paths = {f: tuple(run_paths(f, sites)) for f in {d.function for ds in found.values() for d in ds}}
    return {k: [replace(d, runs_when=paths[d.function]) for d in ds] for k, ds in found.items()}


def release_files(catalog: Catalog) -> list[ReleaseFile]:
    """The release's hook files and server_args.py among the catalog's sources, each parsed once per
    catalog, by their path from `sglang/`: `sglang/srt/arg_groups/parallel_hook.py`."""
    if "files" not in catalog.memo:
        catalog.memo["files"] = [
            read_file(text, "sglang/srt/" + path.rsplit("/sglang/srt/", 1)[1])
            for path, text in sorted(catalog.sources.items())
            if "/sglang/srt/" in path and ("/arg_groups/" in path or path.endswith("/server_args.py"))
        ]
    return catalog.memo["files"]


def release_sites(catalog: Catalog) -> dict[str, list[CallSite]]:
    if "sites" not in catalog.memo:
        catalog.memo["sites"] = call_sites(release_files(catalog))
    return catalog.memo["sites"]


def release_derivations(catalog: Catalog) -> dict[str, list[Derivation]]:
    """field -> its derivations in the hook files and ServerArgs' own methods, once per catalog."""
    if "derivations" not in catalog.memo:
        catalog.memo["derivations"] = read_hooks(release_files(catalog), catalog, release_sites(catalog))
    return catalog.memo["derivations"]


def catalog_hooks(catalog: Catalog) -> dict[str, list[Derivation]]:
    """field -> its derivations in the release's hook files, once per catalog (none before 0.5.13,
    which resolved in ServerArgs' own methods: those read as the failing frame's source)."""
    if "hooks" not in catalog.memo:
        found = {f: [d for d in ds if "/arg_groups/" in d.file] for f, ds in release_derivations(catalog).items()}
        catalog.memo["hooks"] = {f: ds for f, ds in found.items() if ds}
    return catalog.memo["hooks"]
