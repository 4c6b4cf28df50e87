"""Up the stack from the failing statement: the flags its callers decided it with.

The failing statement's own flags are often not the ones that decide it: `raise ValueError(f"Unknown
speculative algorithm name: {name}")` reads a parameter, bound one frame up to
`cfg.speculative_algorithm`; a check runs only under its caller's `if cfg.pp_size > 1:`. For each
frame above the failing one (each in its own file of the release), the call on the frame's line is
found, the parameters the frame below needed are followed to the arguments that call passed (by
position or keyword), and the `if` tests the call sits under are read; the ServerArgs attributes
those read become flags, each with the frame that contributed it. The walk ends where the files
it was given end; frames that contributed nothing are left out.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from cockpit.sglang.catalog.flags import Catalog
from cockpit.sglang.catalog.pysource import parse
from cockpit.sglang.explain.hooks import guards_at
from cockpit.sglang.explain.names import (
    assigned_values,
    attributes,
    bound_names,
    env_reads,
    flag_of,
    names_reached,
    strip_bound,
    unique,
)
from cockpit.traceback.frames import Frame

MAX_CALLERS = 12  # SGLang's deepest resolution path is 8 frames from the launch to the hook


@dataclass
class CallerStep:
    """What one frame above the failing one contributed: flags through the arguments it passed or
    the guards it called under."""

    file: str
    line: int
    function: str
    passed: list[str]  # flags of the arguments bound to the parameters the frame below read
    guards: list[str]  # the `if` tests the call sits under, as written
    guard_flags: list[str]
    environment: list[str]  # variables those tests read

    def to_json(self) -> dict:
        return asdict(self)


def _function_at(tree: ast.Module, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = getattr(node, "end_lineno", None) or node.lineno
            if node.lineno <= line <= end and (best is None or node.lineno >= best.lineno):
                best = node
    return best


def _class_of(tree: ast.Module, func: ast.AST) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and func in node.body:
            return node.name
    return None


def _call_at(func: ast.AST, line: int, callee: set[str]) -> ast.Call | None:
    """The call of one of the `callee` names whose span holds `line` (the frame's line is its first)."""
    calls = [
        n
        for n in ast.walk(func)
        if isinstance(n, ast.Call)
        and n.lineno <= line <= (getattr(n, "end_lineno", None) or n.lineno)
        and _called_name(n) in callee
    ]
    return min(calls, key=lambda n: getattr(n, "end_lineno", n.lineno) - n.lineno, default=None)


def _called_name(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def parameters_read(func: ast.FunctionDef | ast.AsyncFunctionDef, *nodes: ast.AST) -> list[str]:
    """Which of `func`'s parameters the expressions or statements read, through the locals they read
    (`msg = f"... {context_length} ..."; raise ValueError(msg)` reads `context_length`)."""
    params = {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}
    reached = names_reached(nodes, assigned_values(func, lambda name: name not in params))
    return [name for name in reached if name in params]


def _bound_arguments(
    callee: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, wanted: list[str]
) -> list[ast.expr]:
    """The argument expressions the call passed for the wanted parameters of `callee`."""
    params = [a.arg for a in callee.args.posonlyargs + callee.args.args]
    through_object = isinstance(call.func, ast.Attribute) or _called_name(call) != callee.name  # or `Class(...)`
    if params and params[0] in ("self", "cls") and through_object:
        params = params[1:]  # a method called through its object, or __init__ through its class
    out: list[ast.expr] = []
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break  # `*args`: where the rest lands is not known from here
        if i < len(params) and params[i] in wanted:
            out.append(arg)
    out += [k.value for k in call.keywords if k.arg in wanted]
    return out


def walk_callers(
    frames: list[Frame],
    sources: Mapping[str, str],
    failing: ast.AST,
    catalog: Catalog | None,
) -> list[CallerStep]:
    """The steps up from the failing frame (`frames[-1]`, whose failing statement is `failing`)."""

    steps: list[CallerStep] = []
    below = frames[-1]
    text = sources.get(below.file)
    if text is None or below.line is None:
        return steps
    below_tree = parse(text, below.file)
    below_func = _function_at(below_tree, below.line)
    if below_func is None:
        return steps
    below_class = _class_of(below_tree, below_func)
    wanted = parameters_read(below_func, failing, *guards_at(below_func, below.line, exits=()))
    for frame in reversed(frames[:-1][-MAX_CALLERS:]):
        text = sources.get(frame.file)
        if text is None or frame.line is None:
            break
        try:
            tree = parse(text, frame.file)
        except (SyntaxError, ValueError):  # a file that does not parse (or holds a NUL): the walk ends here
            break
        func = _function_at(tree, frame.line)
        if func is None:
            break
        bound = bound_names(func, _class_of(tree, func))
        names = {below.function} | ({below_class} if below.function == "__init__" and below_class else set())
        call = _call_at(func, frame.line, names)  # `ModelConfig(...)` runs the frame `__init__`
        passed_exprs = _bound_arguments(below_func, call, wanted) if call is not None and wanted else []
        passed = [a.attr for e in passed_exprs for a in attributes(e, bound)]
        tests = guards_at(func, frame.line, exits=())
        guard_attrs = [a.attr for t in tests for a in attributes(t, bound)]
        steps.append(
            CallerStep(
                frame.file,
                frame.line,
                frame.function,
                unique(f for f in (flag_of(a, catalog) for a in passed) if f),
                [strip_bound(ast.unparse(t), bound) for t in tests],
                unique(f for f in (flag_of(a, catalog) for a in guard_attrs) if f),
                unique(v for t in tests for v in env_reads(t)),
            )
        )
        wanted = parameters_read(func, *passed_exprs) if passed_exprs else []
        below, below_func, below_class = frame, func, _class_of(tree, func)
    return [s for s in steps if s.passed or s.guard_flags or s.environment]
