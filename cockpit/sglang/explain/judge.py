"""Whether a resolution hook's guards hold for a unit's flags, without running SGLang.

A hook away from the failing path (`_handle_deprecated_dp_attention` turning `--dp-size 3
--enable-dp-attention` into `attn_dp_size = 3`) may or may not have run before the failing check:
it did if its guards hold for the flags the unit gives, each field at its release default where
the unit says nothing. Only what can be decided from those values is decided: a guard that calls
a function, reads a local (`gpu_mem`) or the model is unknown, and an unknown guard never counts as
held, so a hook is named only when the unit's own flags show it ran.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

from cockpit.sglang.catalog.flags import CONVERTERS, Catalog
from cockpit.sglang.explain.names import NAMED_READS

_UNKNOWN = object()

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


# Pure methods of a string a guard may call on a flag's text: `model_path.lower() not in [...]`.
_STRING_METHODS = frozenset({"lower", "upper", "strip", "startswith", "endswith"})


def field_values(given: Mapping[str, str | None], catalog: Catalog) -> dict[str, Any]:
    """ServerArgs field -> value: each flag's release default, the unit's flags over them, typed the
    way argparse would (a switch the unit gives is True; a number that does not parse stays text)."""
    values: dict[str, Any] = {f.dest: f.default for f in catalog.flags}
    for name, text in given.items():
        flag = catalog.get(name)
        if flag is None:
            continue
        if not flag.takes_value or text is None:
            values[flag.dest] = True
            continue
        kind = CONVERTERS.get(flag.type or "")
        try:
            values[flag.dest] = kind(text) if kind is not None else text
        except ValueError:
            values[flag.dest] = text
    return values


def holds(guard: str, values: Mapping[str, Any]) -> bool | None:
    """True or False where the guard (a hook's test, its ServerArgs name stripped: `enable_dp_attention`,
    `attn_dp_size == 1`) is decided by the field values alone; None where it is not."""
    try:
        tree = ast.parse(guard, mode="eval")
    except SyntaxError:
        return None
    found = _value(tree.body, values)
    return None if found is _UNKNOWN else bool(found)


def _value(node: ast.expr, values: Mapping[str, Any]) -> Any:  # noqa: PLR0911 - one case a node kind
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call):
        return values.get(node.attr, _UNKNOWN)  # `resolved_view(server_args).attention_backend`
    if (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", None) in NAMED_READS
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return values.get(node.args[1].value, _UNKNOWN)  # `resolution_result(server_args, "x")`
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_value(e, values) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else tuple(items)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _value(node.operand, values)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(node, ast.BoolOp):
        parts = [_value(v, values) for v in node.values]
        decided = [bool(p) for p in parts if p is not _UNKNOWN]
        if isinstance(node.op, ast.And):
            return False if False in decided else _UNKNOWN if len(decided) < len(parts) else True
        return True if True in decided else _UNKNOWN if len(decided) < len(parts) else False
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _value(node.left, values), _value(node.right, values)
        try:
            return _UNKNOWN if _UNKNOWN in (left, right) else _ARITHMETIC[type(node.op)](left, right)
        except (TypeError, ArithmeticError):
            return _UNKNOWN
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _STRING_METHODS
        and not node.keywords
    ):
        receiver = _value(node.func.value, values)
        args = [_value(a, values) for a in node.args]
        if not isinstance(receiver, str) or any(a is _UNKNOWN for a in args):
            return _UNKNOWN
        try:
            return getattr(receiver, node.func.attr)(*args)
        except TypeError:
            return _UNKNOWN
    if isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
        left = _value(node.left, values)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _value(right_node, values)
            if _UNKNOWN in (left, right):
                return _UNKNOWN
            try:
                if not _COMPARE[type(op)](left, right):
                    return False
            except TypeError:
                return _UNKNOWN
            left = right
        return True
    return _UNKNOWN
