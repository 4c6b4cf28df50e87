"""Whether asking a server's health endpoint makes it generate a token, from the release's own
source and the unit's environment: what the answer costs, and whether it can tell a hung server.

- `/health_generate` generates one token through the scheduler and the detokenizer.
- `/health`, from 0.5.2, is the same handler (`@app.get("/health")` and
  `@app.get("/health_generate")` on `health_generate`, srt/entrypoints/http_server.py), so it
  generates too: 1.0 s and more, a `Prefill batch` line and an access line per call
  (tests/data/sglang-0.5.23/real-tp1-health.jsonl). From 0.5.9 the handler answers `/health` 200
  at once when `SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION` (srt/environ.py, `EnvBool(True)`) is
  off. 0.4.x's `/health` is a handler of its own that asks the model nothing.
- From 0.5.19, `SGLANG_DIAG_BYPASS_HEALTH_GENERATE` on answers both 200 at once.

An `EnvBool` reads true/1/yes/y and false/0/no/n in any case; any other value is its default,
with a warning (srt/environ.py `EnvField.get`).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field

from cockpit.sglang.catalog.pysource import parse
from cockpit.systemd.readiness import GENERATE, HEALTH

SWITCH = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"
BYPASS = "SGLANG_DIAG_BYPASS_HEALTH_GENERATE"
ENVIRON, HTTP_SERVER = "environ.py", "entrypoints/http_server.py"  # under sglang/srt
_TRUE, _FALSE = ("true", "1", "yes", "y"), ("false", "0", "no", "n")


@dataclass(frozen=True)
class HealthRoutes:
    """What one release's source says of its health endpoints."""

    version: str | None
    # /health is the handler that generates (None: its http_server.py could not be read).
    health_generates: bool | None
    switches: dict[str, bool] = field(default_factory=dict)  # each `NAME = EnvBool(default)` of its environ.py


@dataclass(frozen=True)
class Generation:
    """Whether an endpoint generates a token for this unit (None: not known), and why."""

    generates: bool | None
    why: str = ""


def routes_from_sources(version: str | None, environ: str | None, http_server: str | None) -> HealthRoutes:
    """The release's HealthRoutes from its two files' texts (None: not there, or unreadable). A
    file Python cannot parse says nothing, as one not there."""
    try:
        generates = health_is_generate_handler(http_server) if http_server is not None else None
    except (SyntaxError, ValueError, RecursionError):
        generates = None
    try:
        switches = env_bools(environ) if environ is not None else {}
    except (SyntaxError, ValueError, RecursionError):
        switches = {}
    return HealthRoutes(version, generates, switches)


def env_bools(source: str) -> dict[str, bool]:
    """Every `NAME = EnvBool(True|False)` (or `EnvBoolWithAlias`) in environ.py, at any depth
    (they are class attributes of `Envs`): NAME -> its default. A default that is no literal
    (a callable, worked out on the host's platform) is left out."""
    found: dict[str, bool] = {}
    for node in ast.walk(parse(source, ENVIRON)):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id.startswith("EnvBool")):
            continue
        default = call.args[0] if call.args else None
        if isinstance(default, ast.Constant) and isinstance(default.value, bool):
            found[node.targets[0].id] = default.value
    return found


def health_is_generate_handler(source: str) -> bool:
    """Whether http_server.py routes `/health` to the function that also serves `/health_generate`."""
    for node in ast.walk(parse(source, HTTP_SERVER)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            paths = {_route(d) for d in node.decorator_list}
            if HEALTH in paths:
                return GENERATE in paths
    return False


def _route(decorator: ast.expr) -> str | None:
    """`@app.get("/health")` -> `/health`."""
    if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) and decorator.args:
        first = decorator.args[0]
        if decorator.func.attr in ("get", "api_route") and isinstance(first, ast.Constant):
            return str(first.value)
    return None


def env_bool(value: str) -> bool | None:
    """SGLang's `EnvBool.parse`; None for a value it refuses (it then takes the default)."""
    lowered = value.lower()
    return True if lowered in _TRUE else False if lowered in _FALSE else None


def generation(routes: HealthRoutes | None, environment: Mapping[str, str], path: str) -> Generation:
    """Whether asking `path` makes this unit's server generate a token. `routes`: its release's
    (None: not read); `environment`: the unit's (`Environment=` and its environment files)."""
    if routes is None:
        return Generation(True, "") if path == GENERATE else Generation(None)
    release = f"SGLang {routes.version}" if routes.version else "its SGLang"
    if BYPASS in routes.switches:
        on, said = _switch(routes, environment, BYPASS, release)
        if on:
            return Generation(False, f"{said}: {release} answers 200 at once")
    if path == GENERATE:
        return Generation(True)
    if routes.health_generates is None:
        return Generation(None)
    if not routes.health_generates:
        return Generation(False, f"{release}'s /health is a handler of its own")
    if SWITCH not in routes.switches:
        return Generation(True, f"{release}'s /health is its /health_generate")
    return Generation(*_switch(routes, environment, SWITCH, release))


def _switch(routes: HealthRoutes, environment: Mapping[str, str], name: str, release: str) -> tuple[bool, str]:
    """The switch's value for the unit, and where it comes from, in words."""
    default = routes.switches[name]
    value = environment.get(name)
    if value is None:
        return default, f"{name} is {_on(default)}, {release}'s default"
    parsed = env_bool(value)
    if parsed is None:
        refused = f"{name}={value!r} in the unit's environment is no boolean to SGLang: {_on(default)}, its default"
        return default, refused
    return parsed, f"{name}={value} in the unit's environment"


def _on(value: bool) -> str:
    return "on" if value else "off"
