"""Pre-flight: what SGLang will make of a command line, before anything is written or restarted.

Two layers. The static one is instant and offline: the release's own flag catalog (unknown
flags with a did-you-mean, values that argparse will refuse, a missing required flag) and the
cross-flag rules SGLang enforces at start-up (rules.py), each with the release range it holds
for. Paths are checked on the host. The dry run is exact: the release's own argument
resolution, run in the service's Python on the host with nothing started on the GPUs; its
traceback is read like a crash's. A Python that cannot import SGLang (the lab has the source
but no torch) is said once, and the static layer stands alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from cockpit.remote.base import Host, HostError, RunResult
from cockpit.sglang.catalog.flags import CONVERTERS, Catalog, Flag, on_cuda
from cockpit.sglang.explain.explain import explain_traceback
from cockpit.sglang.preflight.release_checks import failing_checks
from cockpit.sglang.preflight.rule_families import violations
from cockpit.sglang.preflight.rules import eagle_violation
from cockpit.systemd.process_end import Holder
from cockpit.systemd.unit_args import Item, parse_items

ERROR, WARNING, INFO = "error", "warning", "info"
PATH_FLAGS = ("--model-path", "--speculative-draft-model-path", "--tokenizer-path")
_KIND_WORDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "json.loads": 'JSON text (`{"image": 1}`)',
}


def _kind_words(kind: str | None) -> str:
    return _KIND_WORDS.get(kind or "", f"a value of type {kind}")


@dataclass
class Finding:
    severity: str  # "error": the server will not start; "warning"; "info"
    rule: str
    flags: list[str]
    message: str
    would_raise: str | None = None  # what launch_server dies with: "AssertionError", "SystemExit(2)", ...
    fix: str | None = None
    pid: int | None = None  # the process a host finding is about (one holding a GPU's memory)
    node: str | None = None  # the node of a multi-node deployment it is about ([units] entry)
    holder: Holder | None = None  # that process as the write modal offers to end it (not in the JSON: `pid` is)
    # A [Service] key and value that fix it, as the flag editor's unit view offers them (not in the
    # JSON: `fix` says it in words).
    setting: tuple[str, str] | None = None

    def to_json(self) -> dict:
        out = asdict(self)
        del out["holder"], out["setting"]
        return out


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    dry_run: str | None = None  # "passed", "failed", or why it could not run

    @property
    def would_start(self) -> bool:
        return not any(f.severity == ERROR for f in self.findings)


def _flag_items(argv: Sequence[str], catalog: Catalog) -> tuple[list[Item], list[Item]]:
    """(flags, positionals) of a server argv (its program part is skipped); a bare list of flags
    works too."""
    words = list(argv)
    if words and words[0].startswith("-"):
        words.insert(0, "launch_server")
    _, items = parse_items(words, catalog)
    return [i for i in items if i.is_flag], [i for i in items if not i.is_flag]


def _resolve(name: str, catalog: Catalog) -> tuple[Flag | None, list[Flag]]:
    """The flag a spelling means, as argparse would take it (unique prefixes are accepted)."""
    flag = catalog.get(name)
    if flag is not None:
        return flag, []
    matches = {f.name: f for f in catalog.flags for n in f.names if n.startswith(name)}
    if len(matches) == 1:
        return next(iter(matches.values())), []
    return None, list(matches.values())


def _values(item: Item) -> list[str]:
    if item.value is None:
        return []
    return list(item.value) if isinstance(item.value, tuple) else [item.value]


def check_static(argv: Sequence[str], catalog: Catalog) -> list[Finding]:
    """Every static finding for a `launch_server` argv, in the order of the command line."""
    version = catalog.version or "(unknown release)"
    stop = f"SGLang {version} will stop at start-up"
    findings: list[Finding] = []
    flags, positionals = _flag_items(argv, catalog)
    given: dict[str, str | None] = {}
    seen: dict[str, str] = {}
    for item in flags:
        assert item.name is not None
        flag, ambiguous = _resolve(item.name, catalog)
        if flag is None:
            if ambiguous:
                names = ", ".join(f.name for f in ambiguous[:4])
                findings.append(
                    Finding(
                        ERROR,
                        "ambiguous-flag",
                        [item.name],
                        f"{stop}: {item.name} could be any of {names} (argparse refuses it).",
                        "SystemExit(2)",
                        f"Write the whole flag name, for example {ambiguous[0].name}.",
                    )
                )
                continue
            hint = catalog.suggest(item.name)
            findings.append(
                Finding(
                    ERROR,
                    "unknown-flag",
                    [item.name],
                    f"{stop}: {item.name} is not a flag of this release "
                    f"(`error: unrecognized arguments: {item.name}`)." + (f" Did you mean {hint[0]}?" if hint else ""),
                    "SystemExit(2)",
                    f"Use {hint[0]}." if hint else "Remove it.",
                )
            )
            continue
        if item.name not in flag.names:
            findings.append(
                Finding(
                    WARNING,
                    "abbreviated-flag",
                    [item.name],
                    f"{item.name} is taken as {flag.name} (an abbreviation argparse accepts).",
                    None,
                    f"Write {flag.name} in full: a later release may add a flag that makes the abbreviation ambiguous.",
                )
            )
        if flag.name in seen:
            findings.append(
                Finding(
                    WARNING,
                    "repeated-flag",
                    [flag.name],
                    f"{flag.name} is given twice; the last value wins.",
                    None,
                    "Remove one.",
                )
            )
        seen[flag.name] = item.name
        values = _values(item)
        if flag.takes_value and not values and flag.nargs not in ("?", "*"):
            findings.append(
                Finding(
                    ERROR,
                    "missing-value",
                    [flag.name],
                    f"{stop}: {flag.name} expects a value (`expected one argument`).",
                    "SystemExit(2)",
                    f"Give {flag.name} a value or remove it.",
                )
            )
            continue
        kind = CONVERTERS.get(flag.type or "")
        for value in values:
            if kind is not None:
                try:
                    kind(value)
                except ValueError:
                    findings.append(
                        Finding(
                            ERROR,
                            "bad-type",
                            [flag.name],
                            f"{stop}: {flag.name} {value!r} is not {_kind_words(flag.type)} "
                            f"(`invalid {getattr(kind, '__name__', flag.type)} value`).",
                            "SystemExit(2)",
                            f"Give {flag.name} {_kind_words(flag.type)}.",
                        )
                    )
                    break
            if flag.choices and all(isinstance(c, str) for c in flag.choices) and value not in flag.choices:
                shown = ", ".join(map(str, flag.choices[:12])) + (" ..." if len(flag.choices) > 12 else "")
                findings.append(
                    Finding(
                        ERROR,
                        "bad-choice",
                        [flag.name],
                        f"{stop}: {flag.name} {value!r} is not one of its choices ({shown}).",
                        "SystemExit(2)",
                        f"Pick one of: {shown}.",
                    )
                )
        given[flag.name] = " ".join(values) if values else None
    for word in positionals:
        findings.append(
            Finding(
                ERROR,
                "stray-argument",
                [],
                f"{stop}: `{word.value}` is not a flag nor a flag's value (`error: unrecognized arguments`).",
                "SystemExit(2)",
                "Remove it, or attach it to the flag it belongs to.",
            )
        )
    for flag in catalog.flags:
        if flag.required and flag.name not in given:
            findings.append(
                Finding(
                    ERROR,
                    "missing-required",
                    [flag.name],
                    f"{stop}: {flag.name} is required.",
                    "SystemExit(2)",
                    f"Add {flag.name}.",
                )
            )
    eagle = eagle_violation(version, given)
    for violation in ([eagle] if eagle is not None else []) + violations(version, given):
        findings.append(
            Finding(
                ERROR if violation.sure else INFO,
                violation.rule,
                list(violation.flags),
                violation.message,
                violation.exception,
                violation.fix,
            )
        )
    if not any(f.severity == ERROR for f in findings):
        findings += _release_check_findings(given, catalog, stop)
    return findings


def _release_check_findings(given: dict[str, str | None], catalog: Catalog, stop: str) -> list[Finding]:
    """The release's own checks these flags fail (release_checks), where no rule above named an
    error: the first of them, as SGLang stops at its first."""
    for check, flags in failing_checks(given, catalog):
        said = f" ({check.says})" if check.says else ""
        what = f"`{check.requirement}` is false" if check.requirement else f"it raises {check.exception}"
        return [
            Finding(
                ERROR,
                "release-check",
                flags,
                f"{stop}: {what} in {check.function} ({check.file}:{check.line}){said}.",
                check.exception,
                f"Change {' or '.join(flags)}." if flags else None,
            )
        ]
    return []


def given_flags(argv: Sequence[str], catalog: Catalog) -> dict[str, str | None]:
    """Canonical flag -> value for the flags of an argv that the release knows."""
    out: dict[str, str | None] = {}
    for item in _flag_items(argv, catalog)[0]:
        flag = _resolve(item.name or "", catalog)[0]
        if flag is not None:
            values = _values(item)
            out[flag.name] = " ".join(values) if values else None
    return out


LOCAL_PATH = ("/", "./", "../", "~")  # a path, not a Hugging Face id (`org/name`)


def settled(findings: Sequence[Finding]) -> list[Finding]:
    """The findings without an INFO that a later layer made sure of: the flags alone say a rule
    may stop the start (the model may change it), the model's own check then says it will (an
    ERROR of the same rule and node), and only the error is worth reading. The dry run's INFO is
    no guess but its verdict (where it ran, passed or failed), the heading its errors stand under:
    it stays."""
    sure = {(f.rule, f.node) for f in findings if f.severity == ERROR and f.rule != "dry-run"}
    return [f for f in findings if f.severity != INFO or (f.rule, f.node) not in sure]


def on_host(value: str, cwd: str = "/") -> str:
    """Where the server will look for a path flag's value: a relative one from the unit's
    WorkingDirectory (systemd's default `/`), not from the SSH login's home, which the check
    read before (a missing `./eagle3` passed there); `~` as written, which SGLang never expands."""
    base = (cwd or "/").lstrip("-")  # systemd's `-` prefix: the directory may be missing
    return value if value.startswith(("/", "~")) else posixpath.normpath(posixpath.join(base or "/", value))


async def check_paths(host: Host, argv: Sequence[str], catalog: Catalog, cwd: str = "/") -> list[Finding]:
    """Model directories named by the flags exist on the host and hold config.json; `cwd`: the
    unit's WorkingDirectory, where a relative one is looked for."""
    findings = []
    for name, value in given_flags(argv, catalog).items():
        if name not in PATH_FLAGS or not value or not value.startswith(LOCAL_PATH):
            continue
        where = on_host(value, cwd)
        said = value if where == value else f"{value} ({where}, from the unit's WorkingDirectory {cwd or '/'})"
        try:
            await host.stat(posixpath.join(where, "config.json"))
        except HostError:
            try:
                await host.stat(where)
                problem = f"{said} on {host.name} holds no config.json"
            except HostError:
                problem = f"{said} does not exist on {host.name}" + (
                    " (SGLang does not expand ~)" if value.startswith("~") else ""
                )
            findings.append(
                Finding(
                    ERROR,
                    "model-path",
                    [name],
                    f"SGLang will stop loading the model: {problem}.",
                    "OSError",
                    f"Point {name} at a model directory on {host.name}.",
                )
            )
    return findings


PROBE = """\
import sys
sys.argv[0] = "launch_server"  # argparse names the program after it in its refusals
try:
    from sglang.srt.server_args import prepare_server_args
except BaseException as e:
    print(f"COCKPIT-NO-SGLANG {type(e).__name__}: {e}")
    sys.exit(3)
sa = prepare_server_args(sys.argv[1:])
if hasattr(sa, "resolve_once"):
    sa.resolve_once()
if hasattr(sa, "check_server_args"):  # what launch_server checks next, before any GPU work
    sa.check_server_args()
print("COCKPIT-PREFLIGHT-OK")
"""
_ARGPARSE_REFUSAL = re.compile(r"error: argument (\S+?): (.*)")
_FLAG_WORD = re.compile(r"--[a-z0-9][a-z0-9-]*")


def _known_flags(words: Sequence[str], catalog: Catalog | None) -> list[str]:
    """The catalog's names of the flags among `words` (any spelling), in order, once each."""
    out: list[str] = []
    for word in words:
        flag = catalog.get(word) if catalog is not None else None
        if flag is not None and flag.name not in out:
            out.append(flag.name)
    return out


def flags_only(command: Sequence[str]) -> list[str]:
    """A service's command line from its first flag on: what launch_server's parser is given (the
    interpreter, `-m sglang.launch_server` or a script path come before it)."""
    return list(command[next((i for i, w in enumerate(command) if w.startswith("--")), len(command)) :])


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what `env NAME=VALUE` takes as a variable


async def dry_run(
    host: Host,
    python: str,
    argv: Sequence[str],
    catalog: Catalog | None,
    timeout: float = 120.0,
    environment: Mapping[str, str] | None = None,
) -> tuple[str, list[Finding]]:
    """The release's own resolution of these flags on the host, with the unit's Environment=
    variables (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 turns a failing check off). Returns
    (outcome, findings)."""
    probe = f"cockpit-preflight-{secrets.token_hex(4)}"
    cache = f"/tmp/{probe}"
    # --device cuda keeps the GPU code paths of the checks; nothing is started on a GPU. The -X
    # option names the probe's process, which a closed SSH channel does not end.
    variables = [f"{k}={v}" for k, v in (environment or {}).items() if _ENV_NAME.fullmatch(k) and "\0" not in v]
    command = ["env", *variables, f"SGLANG_CACHE_DIR={cache}", "timeout", str(int(timeout)), python]
    command += ["-X", f"cockpit_probe={probe}"]
    try:
        result = await host.run([*command, "-c", PROBE, *on_cuda(argv)], timeout=timeout + 10)
    except HostError as e:
        return f"not run: {e}", []
    except asyncio.CancelledError:  # the editor moved on: the probe must not go on using the host's CPU
        with contextlib.suppress(HostError):
            await asyncio.shield(host.run(["pkill", "-f", f"cockpit_probe={probe}"], timeout=10))
        raise
    finally:
        with contextlib.suppress(HostError):
            await asyncio.shield(host.run(["rm", "-rf", cache], timeout=10))
    if result.returncode == 124:
        return f"not run: the dry run took longer than {int(timeout)} s", []
    return await read_dry_run(host, python, result, argv, catalog)


async def read_dry_run(
    host: Host, python: str, result: RunResult, argv: Sequence[str], catalog: Catalog | None
) -> tuple[str, list[Finding]]:
    """(outcome, findings) of the probe's output; a traceback's failing statement is read from
    the host, as a crash's would be."""
    from cockpit.traceback.fold import fold_lines, last_with_frames

    out = result.text + "\n" + result.error_text
    if "COCKPIT-NO-SGLANG" in out:
        why = re.search(r"COCKPIT-NO-SGLANG (.*)", out)
        return (
            f"not run: {python} on {host.name} cannot import SGLang ({why.group(1) if why else '?'}); "
            "only the static checks ran",
            [],
        )
    if "COCKPIT-PREFLIGHT-OK" in out:
        return "passed", []
    given = given_flags(argv, catalog) if catalog is not None else {}
    tb = last_with_frames(fold_lines(out.encode().splitlines()).records)
    if tb is None:
        last = (result.error_text or result.text).strip().splitlines()[-1:] or ["no output"]
        refusal = _ARGPARSE_REFUSAL.search(last[0])
        refused = _known_flags(refusal.group(1).split("/"), catalog) if refusal else []
        return "failed", [
            Finding(ERROR, "dry-run", refused, f"The dry run failed: {last[0]}", f"SystemExit({result.returncode})")
        ]
    frame = tb.failing_frame
    if tb.exception in ("ModuleNotFoundError", "ImportError"):
        return "failed", [
            Finding(
                ERROR,
                "dry-run-environment",
                [],
                f"{python} on {host.name} lacks a module SGLang imports while resolving these "
                f"flags ({tb.exception}: {tb.message}); the server would stop the same way.",
                tb.exception,
                "Install the missing module into the service's Python.",
            )
        ]
    flags: list[str] = []
    detail = ""
    if frame is not None and frame.line is not None:
        try:
            source = (await host.read_file(frame.file)).decode("utf-8", "replace")
            explained = explain_traceback(source, tb, catalog)
            flags, detail = explained.flags, " " + explained.sentence()
        except (HostError, SyntaxError, ValueError):
            pass
    if not flags:  # a check that names its flag only in its message
        flags = _known_flags(_FLAG_WORD.findall(tb.message or ""), catalog)
    flags = sorted(flags, key=lambda f: f not in given)  # the flags on the command line first
    where = f" in {frame.function}" if frame is not None and frame.function else ""
    return "failed", [
        Finding(
            ERROR,
            "dry-run",
            flags,
            f"The dry run stopped: {tb.exception}{where}{': ' + tb.message if tb.message else ''}.{detail}",
            tb.exception,
        )
    ]
