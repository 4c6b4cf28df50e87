"""The flag catalog of an SGLang release, read from its own source with `ast`.

Importing SGLang needs torch and a GPU-ready environment, and takes seconds; the source is
enough to know every `launch_server` flag. Two styles exist:

- up to 0.5.18, `ServerArgs.add_cli_args` calls `parser.add_argument(...)` for each flag;
- from 0.5.19, most flags are annotated fields `name: A[T, "help" | Arg(...)] = default` of
  namespace classes under `sglang/srt/arg_groups/`, registered by
  `add_cli_args_from_dataclass`, plus a few manual `add_argument` calls.

Both are read here the way argparse would see them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.sglang.catalog.pysource import parse, parse_expression
from cockpit.suggest import closest

# argparse actions that never take a value.
_NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version", "append_const"}


@dataclass(frozen=True)
class Flag:
    """One command-line flag as argparse registers it."""

    name: str  # the canonical spelling, e.g. "--tp-size"
    dest: str  # the ServerArgs attribute it sets
    aliases: tuple[str, ...] = ()
    takes_value: bool = True
    nargs: str | int | None = None
    type: str | None = None  # "int", "float", "str", "bool", or the parser's name
    choices: tuple[Any, ...] | None = None
    default: Any = None
    help: str = ""
    required: bool = False
    deprecated: bool = False
    option_strings: tuple[str, ...] = ()  # every spelling, in the order the release registers them

    @property
    def names(self) -> tuple[str, ...]:
        return self.option_strings or (self.name,) + self.aliases


# A flag's `type` name -> what argparse converts its value with, where that is a builtin (a
# JSONDecodeError is a ValueError, which argparse turns into `invalid loads value`, exit 2).
CONVERTERS: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "json.loads": json.loads}


@dataclass
class Catalog:
    """Every flag of one release, looked up by any of its spellings."""

    version: str | None
    flags: list[Flag] = field(default_factory=list)
    # The source texts it was read from, by path: explain and the pre-flight read the release's
    # resolution hooks and checks off them, with no second trip to the host.
    sources: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # what was read off them

    def __post_init__(self) -> None:
        self._by_name = {n: f for f in self.flags for n in f.names}
        self._by_dest = {f.dest: f for f in self.flags}

    def get(self, name: str) -> Flag | None:
        """A flag by its spelling (`--tp-size`, `tp-size` or `tp_size`)."""
        return self._by_name.get(normalize(name)) or self._by_dest.get(name.lstrip("-").replace("-", "_"))

    def by_dest(self, dest: str) -> Flag | None:
        return self._by_dest.get(dest)

    def suggest(self, name: str, n: int = 1) -> list[str]:
        """Did-you-mean candidates for a spelling that is not a flag of this release."""
        return closest(normalize(name), self._by_name, n=n)


def on_cuda(argv: Sequence[str]) -> list[str]:
    """The argv with `--device cuda` unless it names a device: a GPU host's SGLang resolves for
    CUDA, and a machine without one would pick another device and run other checks."""
    if any(a == "--device" or a.startswith("--device=") for a in argv):
        return list(argv)
    return [*argv, "--device", "cuda"]


def normalize(name: str) -> str:
    """`tp-size`, `--tp-size` and `tp_size` all spell `--tp-size`."""
    return (
        "--" + name.lstrip("-").replace("_", "-")
        if "_" in name and not name.startswith("--")
        else (name if name.startswith("-") else "--" + name)
    )


# --- locating the source -------------------------------------------------------------------


def source_files(package_root: Path) -> list[Path]:
    """The files that define flags, given the directory that holds the `sglang` package."""
    srt = package_root / "sglang" / "srt"
    files = [srt / "server_args.py"]
    arg_groups = srt / "arg_groups"
    if arg_groups.is_dir():
        files += sorted(p for p in arg_groups.rglob("*.py"))
    return [f for f in files if f.is_file()]


_VERSION_RE = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.M)
_METADATA_RE = re.compile(r"^Version:\s*(\S+)", re.M)
VERSION_MODULES = ("sglang/_version.py", "sglang/version.py")


def version_from(metadata: str | None = None, module: str | None = None) -> str | None:
    """The release from a dist-info METADATA text, else from a `__version__ = "..."` module."""
    for text, pattern in ((metadata, _METADATA_RE), (module, _VERSION_RE)):
        m = pattern.search(text) if text else None
        if m:
            return m.group(1)
    return None


def read_version(package_root: Path) -> str | None:
    """The release of the `sglang` package under `package_root`, from its files, not an import."""
    for dist in sorted(package_root.glob("sglang-*.dist-info")):
        meta = dist / "METADATA"
        if meta.is_file():
            found = version_from(metadata=meta.read_text(errors="replace"))
            if found:
                return found
    for candidate in VERSION_MODULES:
        p = package_root / candidate
        if p.is_file():
            found = version_from(module=p.read_text(errors="replace"))
            if found:
                return found
    return None


def load_catalog(package_root: Path) -> Catalog:
    """Build the catalog of the release whose `sglang` package lies under `package_root`."""
    files = source_files(package_root)
    if not files:
        raise FileNotFoundError(f"no sglang/srt/server_args.py under {package_root}")
    return catalog_from_sources(
        {str(p): p.read_text(encoding="utf-8", errors="replace") for p in files}, read_version(package_root)
    )


def catalog_from_sources(sources: dict[str, str], version: str | None) -> Catalog:
    """The catalog from source texts keyed by path; a path ending in server_args.py is the root."""
    modules = {path: parse(text, path) for path, text in sources.items()}
    env = _Env(modules.values())
    flags: dict[str, Flag] = {}
    for tree in modules.values():
        for f in _dataclass_flags(tree, env):
            flags.setdefault(f.name, f)
    for tree in modules.values():
        for f in _add_argument_flags(tree, env):
            flags.setdefault(f.name, f)
    return Catalog(version=version, flags=list(flags.values()), sources=dict(sources))


# --- shared evaluation of constants -------------------------------------------------------


class _Env:
    """Module-level constants, dataclass defaults and Action classes across the scanned files."""

    def __init__(self, trees: Iterable[ast.Module]) -> None:
        self.constants: dict[str, Any] = {}
        self.class_defaults: dict[tuple[str, str], Any] = {}
        self.action_nargs: dict[str, Any] = {}
        for tree in trees:
            for node in tree.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    value = self.literal(node.value)
                    if value is not _UNKNOWN:
                        self.constants[node.targets[0].id] = value
                elif isinstance(node, ast.ClassDef):
                    self._read_class(node)

    def _read_class(self, node: ast.ClassDef) -> None:
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                self.class_defaults[(node.name, item.target.id)] = self.literal(item.value)
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                args = item.args
                positional = args.posonlyargs + args.args
                # The defaults belong to the last positional parameters; kw_defaults holds one entry
                # (None for no default) per keyword-only parameter: both zips pair equal lengths.
                with_default = positional[len(positional) - len(args.defaults) :]
                defaults = dict(zip([a.arg for a in with_default], args.defaults, strict=True))
                defaults.update(
                    {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
                )
                if "nargs" in defaults:
                    self.action_nargs[node.name] = self.literal(defaults["nargs"])

    def literal(self, node: ast.AST | None) -> Any:
        if node is None:
            return None
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self.constants[node.id]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            key = (node.value.id, node.attr)
            if key in self.class_defaults:
                return self.class_defaults[key]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("list", "tuple", "sorted", "set")
            and len(node.args) == 1
        ):
            inner = self.literal(node.args[0])
            if isinstance(inner, (list, tuple, set, dict)):
                return sorted(inner) if node.func.id == "sorted" else list(inner)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.literal(node.left), self.literal(node.right)
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(left, str) and isinstance(right, str):
                return left + right
        return _UNKNOWN

    def text(self, node: ast.AST | None) -> str:
        """A help string: constants joined, f-string fields shown as `{expr}`, save a docstring pulled
        in from elsewhere (0.5.23's `f"...{human_readable_int.__doc__}"`), which is left out."""
        if node is None:
            return ""
        value = self.literal(node)
        if isinstance(value, str):
            return value
        if isinstance(node, ast.JoinedStr):
            out = []
            for part in node.values:
                if isinstance(part, ast.Constant):
                    out.append(str(part.value))
                elif isinstance(part, ast.FormattedValue):
                    if isinstance(part.value, ast.Attribute) and part.value.attr == "__doc__":
                        continue
                    inner = self.literal(part.value)
                    out.append(str(inner) if inner is not _UNKNOWN else "{" + ast.unparse(part.value) + "}")
            return "".join(out).rstrip()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.text(node.left) + self.text(node.right)
        if isinstance(node, (ast.Tuple,)):  # help=("a" "b") written as a parenthesised tuple by mistake
            return " ".join(self.text(e) for e in node.elts)
        return ""


_UNKNOWN = object()


def _known(value: Any) -> Any:
    return None if value is _UNKNOWN else value


def _type_name(node: ast.AST | None) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Name):
        return node.id
    return ast.unparse(node)


# --- style 1: parser.add_argument(...) -----------------------------------------------------


def _add_argument_flags(tree: ast.Module, env: _Env) -> Iterable[Flag]:
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
        ):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        options = [n for n in names if n.startswith("-")]
        if not options:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        long_names = [n for n in options if n.startswith("--")] or options
        # `--tensor-parallel-size --tp-size` sets ServerArgs.tp_size: show the field's spelling.
        long_names.sort(key=lambda n: ("ServerArgs", n.lstrip("-").replace("-", "_")) not in env.class_defaults)
        dest = env.literal(kw.get("dest")) if "dest" in kw else long_names[0].lstrip("-").replace("-", "_")
        action = kw.get("action")
        action_name: str | None = None
        nargs: Any = env.literal(kw["nargs"]) if "nargs" in kw else None
        if isinstance(action, ast.Constant):
            action_name = action.value if isinstance(action.value, str) else None
        elif action is not None:
            action_name = _type_name(action)
            if "nargs" not in kw and action_name in env.action_nargs:
                nargs = env.action_nargs[action_name]
        takes_value = action_name not in _NO_VALUE_ACTIONS and nargs != 0
        choices = env.literal(kw.get("choices")) if "choices" in kw else None
        default = env.literal(kw.get("default")) if "default" in kw else None
        yield Flag(
            name=long_names[0],
            dest=str(dest),
            aliases=tuple(n for n in options if n != long_names[0]),
            takes_value=takes_value,
            nargs=_known(nargs),
            type=_type_name(kw.get("type")) if takes_value else "bool",
            choices=tuple(choices) if isinstance(choices, (list, tuple, set)) else None,
            default=_known(default),
            help=env.text(kw.get("help")),
            required=env.literal(kw.get("required")) is True,
            deprecated=bool(action_name and "Deprecated" in action_name),
            option_strings=tuple(options),
        )


# --- style 2: annotated namespace fields (0.5.19 on) ------------------------------------------


def _annotated_parts(node: ast.AST) -> list[ast.expr] | None:
    """The elements of an `Annotated[type, meta, ...]` (or `A[...]`) annotation; None for any other."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("A", "Annotated")
        and isinstance(node.slice, ast.Tuple)
        and len(node.slice.elts) >= 2
    ):
        return node.slice.elts
    return None


def _dict_entries(node: ast.AST | None, env: Any) -> dict[str, Any] | None:
    """The literal entries of a `{...}` keyword, those whose value is no literal left out:
    0.5.23's `action_kwargs={"type": str, "nargs": "*"}` (for --lora-paths) has a `str` that
    `literal` cannot read, which lost its nargs."""
    if node is None:
        return {}
    if not isinstance(node, ast.Dict):
        value = env.literal(node)
        return value if isinstance(value, dict) else None
    out: dict[str, Any] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found = env.literal(value)
            if found is not None:
                out[key.value] = found
    return out


def _unwrap_type(node: ast.AST, env: _Env) -> tuple[str | None, tuple[Any, ...] | None, bool]:
    """(scalar type name, literal choices, is a list) of an annotation's type part."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        head = node.value.id
        if head == "Optional":
            return _unwrap_type(node.slice, env)
        if head == "Literal":
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            values = tuple(env.literal(e) for e in elts)
            kind = type(values[0]).__name__ if values else "str"
            return kind, values, False
        if head in ("List", "list"):
            inner, _, _ = _unwrap_type(node.slice, env)
            return inner, None, True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for side in (node.left, node.right):
            if not (isinstance(side, ast.Constant) and side.value is None):
                return _unwrap_type(side, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # string annotation
        try:
            return _unwrap_type(parse_expression(node.value).body, env)
        except SyntaxError:
            return None, None, False
    return _type_name(node), None, False


def _dataclass_flags(tree: ast.Module, env: _Env) -> Iterable[Flag]:
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for item in cls.body:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            parts = _annotated_parts(item.annotation)
            if parts is None:
                continue
            type_node, meta = parts[0], parts[1]
            flag = _field_flag(item.target.id, type_node, meta, item.value, env)
            if flag is not None:
                yield flag


def _field_flag(dest: str, type_node: ast.AST, meta: ast.AST, value: ast.AST | None, env: _Env) -> Flag | None:
    if isinstance(meta, ast.Call) and isinstance(meta.func, ast.Name) and meta.func.id == "Arg":
        kw = {k.arg: k.value for k in meta.keywords if k.arg}
        if env.literal(kw.get("no_cli")) is True:
            return None
        help_text = env.text(kw.get("help", meta.args[0] if meta.args else None))
    else:
        help_text = env.text(meta)
        if not help_text and not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
            return None  # Derived(...) and other metadata are not CLI inputs
        kw = {}
    cli_name = env.literal(kw["cli_name"]) if "cli_name" in kw else "--" + dest.replace("_", "-")
    aliases = env.literal(kw["aliases"]) if "aliases" in kw else []
    type_name, literal_choices, is_list = _unwrap_type(type_node, env)
    default = env.literal(value) if value is not None else None
    if isinstance(value, ast.Call):  # msgspec.field(default_factory=...)
        default = None
    action = kw.get("action")
    if action is not None:
        action_name = _type_name(action)
        action_kwargs = _dict_entries(kw.get("action_kwargs"), env)
        nargs = (
            action_kwargs.get("nargs", env.action_nargs.get(action_name or "", None))
            if isinstance(action_kwargs, dict)
            else None
        )
        takes_value = action_name not in _NO_VALUE_ACTIONS and nargs != 0
    elif type_name == "bool" and not is_list:
        takes_value, nargs = False, None
    else:
        takes_value = True
        nargs = env.literal(kw["nargs"]) if "nargs" in kw else ("+" if is_list and "type_parser" not in kw else None)
    choices = env.literal(kw["choices"]) if "choices" in kw else literal_choices
    type_parser = kw.get("type_parser")
    required = env.literal(kw.get("required")) is True or (
        kw.get("required") is None
        and value is None
        and "required" not in kw
        and takes_value
        and not _is_optional(type_node)
    )
    return Flag(
        name=str(cli_name),
        dest=dest,
        aliases=tuple(aliases) if isinstance(aliases, (list, tuple)) else (),
        takes_value=takes_value,
        nargs=_known(nargs),
        type=(_type_name(type_parser) if type_parser is not None else type_name) if takes_value else "bool",
        choices=tuple(choices) if isinstance(choices, (list, tuple, set)) else None,
        default=_known(default),
        help=help_text,
        required=bool(required),
        deprecated=False,
        option_strings=(str(cli_name), *(tuple(aliases) if isinstance(aliases, (list, tuple)) else ())),
    )


def _is_optional(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Optional":
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return any(isinstance(s, ast.Constant) and s.value is None for s in (node.left, node.right))
    return False
