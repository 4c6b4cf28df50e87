"""The release's own start-up checks, decided from the flags without running SGLang.

The static pre-flight's hand-written rules cover the families someone wrote a rule for. SGLang's
resolution hooks and ServerArgs' methods hold many more checks, each an `assert` or a `raise`
under `if`s: `if cfg.attn_dp_size < 1: raise ValueError(...)`, `assert cfg.dwdp_size ==
cfg.tp_size` below `if cfg.dwdp_size <= 1: return`. Each is read off the release the catalog came
from (no table), with the guards it sits under and the ways the pipeline runs its function
(explain.hooks: `run_hook(f, ...)`, ServerArgs' `__post_init__` and `check_server_args`, and the
calls from those). A check is called failing only where everything it depends on is decided by
the unit's flags and the release's defaults (explain.judge), so a wrong guess cannot come from it:

- its function is run by the pipeline along a path whose guards hold;
- every guard holds and the assert's test is false (a `raise` is reached);
- it sits in no loop and no `try` (an empty loop or a caught exception would not stop the server);
- every field it reads is one the unit's flags give (a default may be resolved by means the
  hooks do not show), and none may be filled by resolution first: a field some derivation in the
  release sets, unless that derivation's own guards are false for these flags.

Anything that calls a function, reads a local, the model or the environment is undecided and says
nothing. The dry run stays the verdict where SGLang imports; this is the layer for where it does not.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.explain.hooks import (
    Derivation,
    ReleaseFile,
    guards_at,
    release_derivations,
    release_files,
    release_sites,
    run_paths,
)
from cockpit.sglang.explain.judge import field_values, holds
from cockpit.sglang.explain.names import attributes, flag_of, strip_bound, unique


@dataclass(frozen=True)
class ReleaseCheck:
    file: str  # from sglang/: sglang/srt/arg_groups/parallel_hook.py
    line: int
    function: str
    exception: str  # what it raises: AssertionError, ValueError...
    requirement: str | None  # an assert's test, as the flags' names read it; None for a raise
    guards: tuple[str, ...]
    reads: tuple[str, ...]  # the fields its test and guards read
    says: str  # its message where it is a plain string, else ""
    runs_when: tuple[tuple[str, ...], ...] = ()


def _says(node: ast.expr | None) -> str:
    """The literal text of a message: a string, or an f-string's constant parts with `…` between."""
    if isinstance(node, ast.Call) and node.args:
        node = node.args[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "…" for v in node.values)
    return ""


_TRY_STAR = getattr(ast, "TryStar", ast.Try)  # `try: ... except* ...`, Python 3.11 and later


def _outside_loops_and_trys(func: ast.AST) -> Iterator[ast.stmt]:
    """The statements of a function that no loop, `try` or nested function holds."""
    todo: list[ast.stmt] = list(getattr(func, "body", []))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.Try, _TRY_STAR, ast.FunctionDef)):
            continue
        if isinstance(node, (ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield node
        for name in ("body", "orelse"):  # an `if`'s branches, a `with`'s body
            todo += [n for n in getattr(node, name, []) or [] if isinstance(n, ast.stmt)]
        if isinstance(node, ast.Match):
            todo += [n for case in node.cases for n in case.body]


class _Locals(ast.NodeTransformer):
    """A local read in a check, put back to the one expression it was assigned (`prefix_tails =
    resolved_view(server_args).swa_prefix_tails` before `if prefix_tails is not None and prefix_tails
    < 0: raise`), where the function assigns it once, earlier, with a plain `name = expr`. Read once
    a function; `put_back` for each check in it."""

    def __init__(self, func: ast.AST, bound: set[str]) -> None:
        stores: dict[str, int] = {}
        assigned: dict[str, tuple[int, ast.expr]] = {}
        for n in ast.walk(func):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                stores[n.id] = stores.get(n.id, 0) + 1
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                assigned[n.targets[0].id] = (n.lineno, n.value)
        # The names that hold the flags (`cfg = resolving_view(server_args)`) stay as they are.
        self.assigned = {k: v for k, v in assigned.items() if stores.get(k) == 1 and k not in bound}
        self.values: dict[str, ast.expr] = {}

    def visit_Name(self, node: ast.Name) -> ast.AST:
        value = self.values.get(node.id) if isinstance(node.ctx, ast.Load) else None
        return copy.deepcopy(value) if value is not None else node

    def put_back(self, expr: ast.expr, line: int) -> ast.expr:
        """`expr`, of the check at `line`, with the locals assigned before that line put back."""
        self.values = {k: value for k, (at, value) in self.assigned.items() if at < line}
        return self.visit(copy.deepcopy(expr)) if self.values else expr


def checks_in(file: ReleaseFile) -> list[ReleaseCheck]:
    """Every assert and raise of a file's functions, with its guards (their locals put back)."""
    path = file.path
    out: list[ReleaseCheck] = []
    for func, _, frozen in file.functions:
        bound = set(frozen)
        local = _Locals(func, bound)
        for node in _outside_loops_and_trys(func):
            if isinstance(node, ast.Assert):
                exception, requirement, message = "AssertionError", node.test, node.msg
            elif isinstance(node, ast.Raise) and node.exc is not None:
                call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                exception = call.id if isinstance(call, ast.Name) else getattr(call, "attr", "Exception")
                requirement, message = None, node.exc
            else:
                continue
            tests = [local.put_back(t, node.lineno) for t in guards_at(func, node.lineno, (ast.Return,))]
            requirement = local.put_back(requirement, node.lineno) if requirement is not None else None
            read = [
                a.attr
                for e in [*tests, *([requirement] if requirement is not None else [])]
                for a in attributes(e, bound)
            ]
            out.append(
                ReleaseCheck(
                    path,
                    node.lineno,
                    func.name,
                    exception,
                    strip_bound(ast.unparse(requirement), bound) if requirement is not None else None,
                    tuple(strip_bound(ast.unparse(t), bound) for t in tests),
                    tuple(unique(read)),
                    _says(message),
                )
            )
    return out


def release_checks(catalog: Catalog) -> tuple[list[ReleaseCheck], dict[str, list[Derivation]]]:
    """The release's checks that the pipeline runs, and every derivation (hooks and ServerArgs'
    own methods) that may fill a field before them; read once per catalog."""
    if "checks" not in catalog.memo:
        files, sites = release_files(catalog), release_sites(catalog)
        checks = []
        for file in files:
            for check in checks_in(file):
                paths = tuple(run_paths(check.function, sites))
                if paths:
                    checks.append(replace(check, runs_when=paths))
        catalog.memo["checks"] = (checks, release_derivations(catalog))
    return catalog.memo["checks"]


def _may_run(d: Derivation, values: Mapping[str, object]) -> bool:
    """Whether a derivation may have filled its field for these flags: unless every way the pipeline
    runs it, or its own guards, is decided false."""
    if not d.runs_when:
        return True  # run from somewhere the hooks do not show (an algorithm's own dispatch)
    return any(all(holds(g, values) is not False for g in (*path, *d.guards)) for path in d.runs_when)


def failing_checks(given: Mapping[str, str | None], catalog: Catalog) -> list[tuple[ReleaseCheck, list[str]]]:
    """The release's checks that these flags fail, each with the flags it reads."""
    checks, derivations = release_checks(catalog)
    values = field_values(given, catalog)
    filled = {field for field, ds in derivations.items() if any(_may_run(d, values) for d in ds)}
    written = {flag.dest for name in given if (flag := catalog.get(name)) is not None}
    out: list[tuple[ReleaseCheck, list[str]]] = []
    for check in checks:
        # Every field the check reads is one the unit gives: a release default may be resolved by
        # means no hook shows (0.5.23 defaults hicache_ratio where `validate_hicache_host_memory_mode`
        # would otherwise refuse `--enable-hierarchical-cache` alone).
        if not check.reads or filled & set(check.reads) or not set(check.reads) <= written:
            continue
        if not any(all(holds(g, values) is True for g in path) for path in check.runs_when):
            continue
        if not all(holds(g, values) is True for g in check.guards):
            continue
        if check.requirement is not None and holds(check.requirement, values) is not False:
            continue
        out.append((check, unique(f for f in (flag_of(a, catalog) for a in check.reads) if f)))
    return out
