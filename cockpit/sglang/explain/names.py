"""What a piece of the release's source reads: the names that hold the ServerArgs object, their
attributes (the flags), and the environment variables. Shared by the failing statement's reading
(explain.py) and the walk up its callers (stack.py)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping

from cockpit.sglang.catalog.flags import Catalog

_ARGS_NAMES = {"server_args", "args", "sa", "raw_args"}  # raw_args: prepare_server_args' argparse Namespace
_ENV_CALLS = {"get_bool_env_var", "get_int_env_var", "get_float_env_var", "get_str_env_var", "getenv"}


def bound_names(func: ast.AST | None, class_name: str | None) -> set[str]:
    """Names that hold the ServerArgs object (or a view of it) inside `func`."""
    if func is None or not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set(_ARGS_NAMES)
    bound = set()
    assigns = [n for n in ast.walk(func) if isinstance(n, ast.Assign)]  # walked once: a hook runs to 300 lines
    params = func.args.posonlyargs + func.args.args + func.args.kwonlyargs
    for i, arg in enumerate(params):
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        if "ServerArgs" in annotation or arg.arg in _ARGS_NAMES:
            bound.add(arg.arg)
        elif i == 0 and arg.arg == "self" and class_name and "ServerArgs" in class_name:
            bound.add("self")
    for node in assigns:  # `raw_args = parser.parse_args(argv)`: the usual names, assigned here
        if any(isinstance(t, ast.Name) and t.id in _ARGS_NAMES for t in node.targets):
            bound.update(t.id for t in node.targets if isinstance(t, ast.Name) and t.id in _ARGS_NAMES)
    changed = True
    while changed:  # names assigned from a bound name: `cfg = resolving_view(server_args)`, `x = self`
        changed = False
        for node in assigns:
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target, value = node.targets[0].id, node.value
                if target in bound:
                    continue
                derived = (isinstance(value, ast.Name) and value.id in bound) or (
                    isinstance(value, ast.Call) and any(isinstance(a, ast.Name) and a.id in bound for a in value.args)
                )
                if derived:
                    bound.add(target)
                    changed = True
    return bound


NAMED_READS = frozenset({"getattr", "resolution_result"})  # `resolution_result(server_args, "swa_full_tokens_ratio")`


def _holds_args(node: ast.expr, bound: set[str]) -> bool:
    """A bound name, `self.server_args` (a manager's or runner's own copy), or a view made of a bound
    name in place (`resolved_view(server_args).attention_backend`)."""
    if isinstance(node, ast.Name):
        return node.id in bound
    if isinstance(node, ast.Call):
        return any(isinstance(a, ast.Name) and a.id in bound for a in node.args)
    return isinstance(node, ast.Attribute) and node.attr == "server_args" and isinstance(node.value, ast.Name)


def attributes(node: ast.AST | None, bound: set[str]) -> list[ast.Attribute]:
    """The fields of the ServerArgs object an expression reads, as attribute nodes; a field read by
    name (`getattr(cfg, "x")`, `resolution_result(server_args, "x")`) comes as one too."""
    if node is None:
        return []
    called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    out: list[ast.Attribute] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and _holds_args(n.value, bound) and id(n) not in called:
            out.append(n)
        elif (
            isinstance(n, ast.Call)
            and getattr(n.func, "id", None) in NAMED_READS
            and len(n.args) >= 2
            and _holds_args(n.args[0], bound)
            and isinstance(n.args[1], ast.Constant)
            and isinstance(n.args[1].value, str)
        ):
            out.append(ast.copy_location(ast.Attribute(n.args[0], n.args[1].value, ast.Load()), n))
    return out


def assigned_values(func: ast.AST, keep: Callable[[str], bool] = lambda _: True) -> dict[str, list[ast.expr]]:
    """name -> each expression the function assigns to it (`x = ...`, `x: T = ...`, `x += ...`), for
    the names `keep` takes."""
    out: dict[str, list[ast.expr]] = {}
    for n in ast.walk(func):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Name) and keep(t.id):
                    out.setdefault(t.id, []).append(n.value)
    return out


def names_reached(nodes: Iterable[ast.AST], assigned: Mapping[str, list[ast.expr]]) -> list[str]:
    """The names the nodes read, and through each local the names read by what was assigned to it
    (`msg = f"... {context_length} ..."; raise ValueError(msg)` reaches `context_length`)."""
    read: dict[str, None] = {}
    todo = [x.id for node in nodes for x in ast.walk(node) if isinstance(x, ast.Name)]
    while todo:
        name = todo.pop()
        if name in read:
            continue
        read[name] = None
        todo += [x.id for value in assigned.get(name, []) for x in ast.walk(value) if isinstance(x, ast.Name)]
    return list(read)


def env_reads(node: ast.AST | None) -> list[str]:
    """Environment variables an expression reads: SGLang's `envs.NAME.get()`, `os.environ["X"]`,
    `os.environ.get("X")`, `os.getenv("X")`, `get_bool_env_var("X")` and its kin."""
    if node is None:
        return []
    out: list[str] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "envs":
            out.append(n.attr)
        elif isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            environ_get = (
                name == "get" and isinstance(n.func, ast.Attribute) and ast.unparse(n.func.value) == "os.environ"
            )
            if (name in _ENV_CALLS or environ_get) and isinstance(n.args[0].value, str):
                out.append(n.args[0].value)
        elif (
            isinstance(n, ast.Subscript) and ast.unparse(n.value) == "os.environ" and isinstance(n.slice, ast.Constant)
        ):
            out.append(str(n.slice.value))
    return unique(out)


def flag_of(attr: str, catalog: Catalog | None) -> str | None:
    if catalog is None:
        return "--" + attr.replace("_", "-")
    flag = catalog.by_dest(attr) or catalog.get("--" + attr.replace("_", "-"))
    return flag.name if flag is not None else None


def unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def strip_bound(text: str, bound: set[str]) -> str:
    """`cfg.speculative_num_steps is None` -> `speculative_num_steps is None`: the flag's own name."""
    for name in sorted(bound, key=len, reverse=True):
        text = re.sub(rf"\b{re.escape(name)}\.", "", text)
    return text


_INVERSE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
}


def negated(test: ast.expr) -> ast.expr:
    """`not test`, said the way a person would: `not x not in y` is `x in y`, `not not x` is `x`, and
    a single comparison is turned round (`x <= 1` for `not x > 1`)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _INVERSE:
        return ast.Compare(test.left, [_INVERSE[type(test.ops[0])]()], test.comparators)
    return ast.UnaryOp(ast.Not(), test)
