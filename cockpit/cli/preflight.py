"""`cockpit preflight`: would SGLang start with these flags? Exit 1 when it would not."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.errors import CockpitError, UsageError

if TYPE_CHECKING:
    from cockpit.remote.base import Host
    from cockpit.sglang.flags import Catalog
    from cockpit.sglang.preflight import Report


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "preflight",
        help="check a server's flags before a restart",
        description="Static checks against the release's own flag list and start-up rules, then (with --host) "
        "a dry run of the release's argument resolution on the host. Flags come from `-- ARGS` or "
        "from the unit's ExecStart.",
    )
    p.add_argument("--host", help="a config host or ssh_config alias")
    p.add_argument("--unit", help="the unit whose ExecStart to check")
    release = p.add_mutually_exclusive_group()
    release.add_argument("--sglang-version", metavar="V", help="check against this release (its source from PyPI)")
    release.add_argument("--sglang-source", metavar="DIR", help="a directory holding the release's `sglang` package")
    p.add_argument("--static-only", action="store_true", help="no dry run on the host")
    p.add_argument("--json", action="store_true", help="print the findings as a JSON list")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="-- ARGS", help="the launch_server flags to check")
    return p


def _given_catalog(args: argparse.Namespace, argv: list[str]) -> Catalog | None:
    """The catalog named by --sglang-source or --sglang-version, if any."""
    from cockpit.sglang.flags import load_catalog

    catalog: Catalog | None = None
    if args.sglang_source:
        catalog = load_catalog(Path(args.sglang_source))
    elif args.sglang_version:
        from cockpit.sglang.releases import sglang_source

        catalog = load_catalog(sglang_source(args.sglang_version, progress=lambda m: print(m, file=sys.stderr)))
    if not args.host:
        if catalog is None:
            raise UsageError("give --sglang-version, --sglang-source, or --host (to read the release from the host)")
        if not argv:
            raise UsageError("give the flags to check after `--`, or --host and --unit")
    return catalog


async def _checked(args: argparse.Namespace, argv: list[str], catalog: Catalog | None) -> Report:
    """The checks against a host: its deployment gives the flags (with --unit), the release's
    catalog and the Python for the dry run."""
    from cockpit.cli.target import open_target
    from cockpit.sglang.deployment import read_deployment
    from cockpit.systemd.process_facts import Viewpoint

    async with open_target(args, unit=False) as session:
        python, on_gpus, root = None, None, None
        if session.target is not None:
            found = await read_deployment(
                session.host, session.target, catalogs=session.catalogs, python=catalog is None
            )
            if found.unit is None:
                raise CockpitError(found.problems[0] if found.problems else "the unit could not be read")
            argv = argv or found.command
            python, root = found.interpreter, found.package_root
            on_gpus = (Viewpoint(found.target.unit, found.status.running_invocation), found.unit.environment())
            if catalog is None:
                if found.catalog is None:
                    raise CockpitError(f"cannot read {found.problems[0]}" if found.problems else "no SGLang flag list")
                catalog = found.catalog
            host = session.host
        else:
            host = session.host_named(args.host)
        if not argv:
            raise UsageError("give the flags to check after `--`, or --unit to read them from the unit")
        if catalog is None:
            raise UsageError("give --unit (its Python tells where SGLang is) or --sglang-version")
        report = await _report(args, argv, catalog, host, python)
        if on_gpus is not None:
            from cockpit.sglang.architectures import ArchitectureCache
            from cockpit.sglang.model_preflight import check_before_start

            report.findings += await check_before_start(
                host, argv, catalog, *on_gpus, root=root, architectures=ArchitectureCache()
            )
        return report


async def _report(
    args: argparse.Namespace, argv: list[str], catalog: Catalog, host: Host | None, python: str | None
) -> Report:
    from cockpit.sglang.dry_runs import DryRuns, replace_static
    from cockpit.sglang.preflight import Report, check_paths, check_static, flags_only

    report = Report(check_static(argv, catalog))
    if host is not None:
        paths = await check_paths(host, argv, catalog)
        if not args.static_only and python is not None:
            verdict = await DryRuns().verdict(host, python, flags_only(argv), catalog)
            report.dry_run = verdict.outcome
            report.findings = [*replace_static(report.findings, verdict), verdict.said()]
        report.findings += paths
    return report


async def _run(args: argparse.Namespace) -> Report:
    argv = args.args[1:] if args.args[:1] == ["--"] else list(args.args)
    catalog = _given_catalog(args, argv)
    if args.host:
        return await _checked(args, argv, catalog)
    assert catalog is not None
    return await _report(args, argv, catalog, None, None)


def run(args: argparse.Namespace) -> int:
    import asyncio

    try:
        report = asyncio.run(_run(args))
    except (CockpitError, FileNotFoundError) as e:
        print(f"cockpit: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([f.to_json() for f in report.findings]))
    else:
        marks = {"error": "✗", "warning": "!", "info": "·"}
        for f in report.findings:
            print(f"{marks.get(f.severity, '?')} {f.severity:<7} {f.rule}: {f.message}")
            if f.fix:
                print(f"          fix: {f.fix}")
        print("the server should start" if report.would_start else "the server would NOT start")
    return 0 if report.would_start else 1
