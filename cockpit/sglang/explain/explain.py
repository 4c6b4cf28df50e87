"""The failing statement of a traceback, in terms of the server's flags.

From the failing frame's file and line: parse the source with `ast`, find the statement the
line belongs to (a multi-line `assert`, the test of an `if`, a `raise`), find which names the
function binds to the ServerArgs object (its parameters, `self` in ServerArgs, and anything
assigned from them, such as `cfg = resolving_view(server_args)` in 0.5.13 and later), and
collect the attributes of those names that the statement and its guarding `if` read. That
works across releases without a table of versions: only the flag catalog is consulted, to
map an attribute to its spelling on the command line.
"""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.catalog.pysource import parse
from cockpit.sglang.explain.hooks import Derivation, catalog_hooks, guards_at
from cockpit.sglang.explain.judge import field_values, holds
from cockpit.sglang.explain.model_reads import ModelRead, model_reads, modules_needed
from cockpit.sglang.explain.names import attributes, bound_names, env_reads, flag_of, strip_bound, unique
from cockpit.sglang.explain.stack import CallerStep, walk_callers
from cockpit.textlines import source_lines
from cockpit.traceback.frames import Frame
from cockpit.traceback.model import Traceback


@dataclass
class Explanation:
    file: str
    line: int  # the line the traceback named
    start_line: int  # the failing statement's range
    end_line: int
    statement: str
    kind: str  # "assert", "compare", "raise", "statement"
    guard: str | None = None  # the `if` tests of its function that led here, joined by `and`
    requirement: str | None = None  # what an assert demands
    none_flag: str | None = None  # the flag whose value was None in a `None > 1` TypeError
    flags: list[str] = field(default_factory=list)
    attributes: list[str] = field(default_factory=list)
    environment: list[str] = field(default_factory=list)  # variables the statement or its guards read
    callers: list[CallerStep] = field(default_factory=list)  # frames above that decided it
    resolved: list[Derivation] = field(default_factory=list)  # fields it reads that hooks fill from other flags
    model: list[ModelRead] = field(default_factory=list)  # values it takes from the model's config.json
    model_path: str | None = None  # the --model-path those values were read from
    statement_flags: list[str] = field(default_factory=list)  # those of the failing statement and its guards
    statement_environment: list[str] = field(default_factory=list)

    def sentence(
        self, values: Mapping[str, str | None] | None = None, environment: Mapping[str, str] | None = None
    ) -> str:
        """One paragraph for the user; `values` are the unit's current flags (None: a switch) and
        `environment` its Environment= variables, each said beside the name it gives a value."""
        if self.kind == "assert" and self.requirement:
            head = (
                f"This check failed: `{self.guard}` requires `{self.requirement}`."
                if self.guard
                else f"This check failed: `{self.requirement}`."
            )
        elif self.none_flag:
            attr = self.none_flag.lstrip("-").replace("-", "_")
            head = (
                f"`{self.statement.splitlines()[0].strip()}` failed because {attr} was None: "
                f"{self.none_flag} is not set."
            )
        elif self.guard:
            head = f"This statement ran because `{self.guard}`: `{_clipped(self.statement)}`."
        else:
            head = f"The failing statement: `{_clipped(self.statement)}`."
        for step in self.callers:
            said = []
            if step.passed:
                said.append(f"its caller {step.function} passed {', '.join(step.passed)}")
            if step.guard_flags or step.environment:
                said.append(f"{step.function} called it only when `{' and '.join(step.guards)}`")
            head += f" {'; '.join(said)[:1].upper()}{'; '.join(said)[1:]}."
        for d in self.resolved:
            when = f" when `{' and '.join(d.guards)}`" if d.guards else ""
            head += f" {d.field} is resolved from `{d.value}`{when} ({d.file}:{d.line})."
        for read in self.model:
            head += " " + read.said(self.model_path)
        if self.environment:
            said_env = [
                name
                if environment is None
                else f"{name}={environment[name]} in the unit"
                if name in environment
                else f"{name} (not set in the unit)"
                for name in self.environment
            ]
            head += f" Environment: {', '.join(said_env)}."
        if not self.flags:
            return head
        text = f"{head} Flags involved: {', '.join(self.flags)}"
        if values is not None:
            shown = [
                f"{f} {values[f]}" if values.get(f) is not None else (f if f in values else f"{f} unset")
                for f in self.flags
            ]
            text += f" (current values from the unit: {', '.join(shown)})"
        return text + "."

    def places(self) -> list[str]:
        """Each place in the release that contributes, one line each, with what it contributes: the
        failing statement, the callers above it, the hooks that filled its fields, the model."""
        own = [*self.statement_flags, *self.statement_environment, *(f"{m.name} (the model's)" for m in self.model)]
        out = [f"{_short(self.file)}:{self.start_line} the failing check: {', '.join(own) or 'no flag'}"]
        for step in self.callers:
            said = [f"passed {', '.join(step.passed)}"] if step.passed else []
            under = [*step.guard_flags, *step.environment]
            said += [f"called it under {', '.join(under)}"] if under else []
            out.append(f"{_short(step.file)}:{step.line} {step.function}: {'; '.join(said)}")
        for d in self.resolved:
            out.append(f"{d.file}:{d.line} {d.function}: {d.field} from {', '.join(d.flags)}")
        for m in self.model:
            has = ", ".join(f"{k}" for k in m.values) or "none of its keys"
            out.append(f"{m.module.replace('.', '/')}.py:{m.line} {m.function}: {m.name} from config.json's {has}")
        return out

    def to_json(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "statement": self.statement,
            "kind": self.kind,
            "guard": self.guard,
            "requirement": self.requirement,
            "none_flag": self.none_flag,
            "flags": self.flags,
            "environment": self.environment,
            "callers": [c.to_json() for c in self.callers],
            "resolved": [d.to_json() for d in self.resolved],
            "model": [m.to_json() for m in self.model],
            "sentence": self.sentence(),
        }


def _short(path: str) -> str:
    return re.split(r"(?:site|dist)-packages/", path, maxsplit=1)[-1]


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _clipped(statement: str, width: int = 100) -> str:
    """A statement on one line, clipped: the source pane shows it whole just above the sentence."""
    text = _one_line(statement)
    return text if len(text) <= width else text[: width - 1] + "…"


def _node_range(node: ast.AST) -> tuple[int, int]:
    return node.lineno, getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]


def _contains(node: ast.AST, line: int) -> bool:
    start, end = _node_range(node)
    return start <= line <= end


def _path_to(tree: ast.Module, line: int) -> list[ast.AST]:
    """Outermost to innermost nodes (statements and `if` tests) that contain the line."""
    path: list[ast.AST] = []
    body: list[ast.AST] = list(tree.body)
    while True:
        found = None
        for node in body:
            if isinstance(node, ast.stmt) and _contains(node, line):
                found = node
                break
        if found is None:
            return path
        path.append(found)
        header = _header(found)
        if header is not None and _contains(header, line):
            path.append(header)
            return path
        body = [n for name in ("body", "orelse", "finalbody") for n in getattr(found, name, []) or []]
        body += [n for h in getattr(found, "handlers", []) or [] for n in h.body]
        if isinstance(found, ast.Match):
            body += [n for case in found.cases for n in case.body]


def _header(node: ast.AST) -> ast.AST | None:
    """The expression in a compound statement's header line(s) (`if x:`, `while x:`...)."""
    if isinstance(node, (ast.If, ast.While)):
        return node.test
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return node.iter
    return None


def _defaults_to_none(attr: str, catalog: Catalog | None) -> bool:
    flag = catalog.by_dest(attr) if catalog is not None else None
    return flag is None or flag.default is None


def explain(
    source: str, path: str, line: int, *, exception: str = "", message: str = "", catalog: Catalog | None = None
) -> Explanation:
    """Explain the statement at `line` of `source`; raises ValueError when the line is outside it."""
    tree = parse(source, path)
    chain = _path_to(tree, line)
    if not chain:
        raise ValueError(f"{path}:{line} is not inside any statement of the file")
    lines = source_lines(source)
    func, tests = _failing_function(tree, chain, line)
    cls = next((n for n in reversed(chain) if isinstance(n, ast.ClassDef)), None)
    bound = bound_names(func, cls.name if cls else None)
    target = chain[-1]
    start, end = _node_range(target)
    guard_node = tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests) if tests else None
    statement = "\n".join(lines[start - 1 : end])
    kind = "statement"
    requirement = None
    none_flag = None
    focus: ast.AST = target
    if isinstance(target, ast.Assert):
        kind, requirement = "assert", _one_line(ast.unparse(target.test))
    elif isinstance(target, ast.Raise):
        kind = "raise"
    if exception == "TypeError" and "NoneType" in message:
        compares = [n for n in ast.walk(target) if isinstance(n, (ast.Compare, ast.BinOp)) and _contains(n, line)]
        op = re.search(r"'([^']+)' not supported", message)
        none_left = "instances of 'NoneType' and" in message  # else the right operand was None
        candidates = []
        for node in compares:
            ops = [_op_text(o) for o in (node.ops if isinstance(node, ast.Compare) else [node.op])]
            if op and op.group(1) not in ops:
                continue
            side = node.left if none_left or not isinstance(node, ast.Compare) else node.comparators[0]
            candidates += [(node, a) for a in attributes(side, bound)]
        # Several comparisons on the line: the one whose flag defaults to None is the culprit.
        candidates.sort(key=lambda c: not _defaults_to_none(c[1].attr, catalog))
        if candidates:
            node, attr = candidates[0]
            kind, focus = "compare", node
            none_flag = flag_of(attr.attr, catalog)
            start, end = _node_range(node)
            statement = _one_line(ast.unparse(node))
    used = [a.attr for a in attributes(focus, bound)]
    # The innermost guard decides most directly: its flags come before those of the `if`s around it.
    guard_used = [a.attr for t in reversed(tests) for a in attributes(t, bound)] if kind != "compare" else []
    attrs = unique(used + guard_used)
    environment = unique(env_reads(focus) + (env_reads(guard_node) if kind != "compare" else []))
    flags = unique(f for f in (flag_of(a, catalog) for a in attrs) if f)
    return Explanation(
        file=path,
        line=line,
        start_line=start,
        end_line=end,
        statement=statement.rstrip(),
        kind=kind,
        guard=_one_line(strip_bound(ast.unparse(guard_node), bound)) if guard_node is not None else None,
        requirement=strip_bound(requirement, bound) if requirement else None,
        none_flag=none_flag,
        flags=flags,
        statement_flags=list(flags),
        attributes=attrs,
        environment=environment,
        statement_environment=list(environment),
    )


_OPS = {
    ast.Gt: ">",
    ast.Lt: "<",
    ast.GtE: ">=",
    ast.LtE: "<=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.In: "in",
    ast.NotIn: "not in",
}


def _op_text(op: ast.AST) -> str:
    return _OPS.get(type(op), type(op).__name__)


def explain_traceback(
    source: str,
    tb: Traceback,
    catalog: Catalog | None = None,
    callers: Mapping[str, str] | None = None,
    derivations: Mapping[str, list[Derivation]] | None = None,
    values: Mapping[str, Any] | None = None,
    modules: Mapping[str, str] | None = None,
    model: tuple[str, Mapping[str, Any] | None] | None = None,
) -> Explanation:
    """`explain` for a traceback's failing frame; `source` is that frame's file. With `callers`
    (the other frames' files by path), the frames above are read too (stack.walk_callers); with
    `derivations` (hooks.catalog_hooks), the fields it reads that hooks fill from other flags;
    with `values` (judge.field_values of the unit's flags), also those filled by hooks off the
    failing path whose guards the unit's flags meet; with `modules` (read_model_modules' files, by
    dotted name) and `model` (the unit's --model-path and its config.json), the values it takes from the model."""
    frame = tb.failing_frame
    if frame is None or frame.line is None:
        raise ValueError("the traceback has no frame with a line to explain")
    found = explain(source, frame.file, frame.line, exception=tb.exception or "", message=tb.message, catalog=catalog)
    if callers and isinstance(frame, Frame) and tb.frames and tb.frames[-1] is frame:
        target = _path_to(parse(source, frame.file), frame.line)[-1]
        found.callers = walk_callers(tb.frames, {**callers, frame.file: source}, target, catalog)
        found.flags = unique([*found.flags, *(f for c in found.callers for f in [*c.passed, *c.guard_flags])])
        found.environment = unique([*found.environment, *(v for c in found.callers for v in c.environment)])
    if derivations:
        # Only what the failing path itself ran: a field set in one of the traceback's own functions,
        # before the line that function ran to (the failing statement's own declaration is not one).
        # A hook elsewhere may or may not have run before it (its guards name flags of their own).
        ran = {
            (re.split(r"(?:site|dist)-packages/", f.file, maxsplit=1)[-1], f.function): f.line or 0 for f in tb.frames
        }
        found.resolved = [
            d
            for a in found.attributes
            for d in derivations.get(a, [])
            if d.value_flags
            and (
                d.line < ran.get((d.file, d.function), 0)
                if (d.file, d.function) in ran
                else values is not None
                and any(all(holds(g, values) for g in (*path, *d.guards)) for path in d.runs_when)
            )
            and not found.start_line <= d.line <= found.end_line
        ]
        found.flags = unique([*found.flags, *(f for d in found.resolved for f in d.flags)])
    if modules is not None:
        tree = parse(source, frame.file)
        func, nodes = _failing_nodes(tree, frame.line)
        found.model = model_reads(tree, func, nodes, module_of(frame.file), modules, model[1] if model else None)
        found.model_path = model[0] if model else None
    return found


def module_of(path: str) -> str:
    """A frame's file as a dotted module: `.../site-packages/sglang/srt/x.py` -> `sglang.srt.x`."""
    tail = re.split(r"(?:site|dist)-packages/", path, maxsplit=1)[-1]
    return tail.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _failing_function(tree: ast.Module, chain: list[ast.AST], line: int) -> tuple[ast.AST | None, list[ast.expr]]:
    """The failing statement's function (None: it has none) and its guards: every `if` of the function
    the statement sits under, and each earlier `if X: return` beside them (`raise ValueError("--enable-
    lmcache requires radix cache")` under `if cfg.enable_lmcache:` then `if cfg.disable_radix_cache:`
    depends on both). An earlier `if X: raise` is a check of its own, not a guard of this one."""
    func = next((n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    start = _node_range(chain[-1])[0] if chain else line
    return func, guards_at(func if func is not None else tree, start, exits=(ast.Return,))


def _failing_nodes(tree: ast.Module, line: int) -> tuple[ast.AST, list[ast.AST]]:
    """The failing statement's function (the module where it has none) and the statement with its guards."""
    chain = _path_to(tree, line)
    func, tests = _failing_function(tree, chain, line)
    return func if func is not None else tree, [chain[-1] if chain else tree, *tests]


async def read_model_modules(
    source: str, tb: Traceback, read_one: Callable[[str], Awaitable[str | None]]
) -> dict[str, str]:
    """The release's modules (dotted) explain_traceback needs to follow the failing check's model
    values, each read by `read_one` (a dotted name -> its text, None where it is not there), round
    after round as re-exports lead on ("" for one that is not there)."""
    frame = tb.failing_frame
    read: dict[str, str] = {}
    if frame is None or frame.line is None:
        return read
    tree = parse(source, frame.file)
    func, nodes = _failing_nodes(tree, frame.line)
    for _ in range(4):
        wanted = [m for m in modules_needed(tree, func, nodes, module_of(frame.file), read) if m not in read]
        if not wanted:
            break
        texts = await asyncio.gather(*(read_one(m) for m in wanted))
        read.update({m: t or "" for m, t in zip(wanted, texts, strict=True)})
    return read


async def explain_for_unit(
    source: str,
    tb: Traceback,
    catalog: Catalog | None,
    callers: Awaitable[Mapping[str, str]],
    given: Mapping[str, str | None] | None,
    read_module: Callable[[str], Awaitable[str | None]],
    read_config: Callable[[str], Awaitable[Mapping[str, Any] | None]],
) -> Explanation:
    """explain_traceback with all a unit and its release give: the callers' files (`callers`, read
    meanwhile), the release's resolution hooks (the catalog's), the modules the failing check takes
    model values from (`read_module`), the unit's flags (`given`: which hooks ran, and --model-path,
    whose config.json's language-model part `read_config` gives). The app and `cockpit explain`
    (--host or a local --source-root) differ only in how they read."""
    model_path = given.get("--model-path") if given else None

    async def config_of_model() -> Mapping[str, Any] | None:
        return await read_config(model_path) if model_path else None

    found_callers, modules, config = await asyncio.gather(
        callers, read_model_modules(source, tb, read_module), config_of_model()
    )
    return explain_traceback(
        source,
        tb,
        catalog,
        found_callers,
        catalog_hooks(catalog) if catalog is not None else None,
        field_values(given, catalog) if given is not None and catalog is not None else None,
        modules,
        (model_path, config) if model_path else None,
    )
