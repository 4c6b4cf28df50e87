"""`cockpit preflight`: would SGLang start with these flags? Exit 1 when it would not."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from cockpit.errors import CockpitError, UsageError
from cockpit.sglang.flags import Catalog, load_catalog
from cockpit.sglang.preflight import INFO, Finding, Report, check_paths, check_static, dry_run


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


async def _catalog_and_argv(args: argparse.Namespace, argv: list[str]):
    """(catalog, argv, host or None, python or None, pool or None)."""
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
        return catalog, argv, None, None, None
    from cockpit import config as config_mod
    from cockpit.remote.pool import HostPool
    from cockpit.sglang.catalogs import CatalogCache
    from cockpit.systemd.remote_unit import load_remote_unit, site_packages
    from cockpit.systemd.status import fetch
    from cockpit.targets import resolve

    cfg = config_mod.load(args.config)
    pool = HostPool(cfg)
    host = pool.get(args.host)
    python = None
    if args.unit:
        target = resolve(cfg, args.host, args.unit)
        status = await fetch(host, target.unit)
        unit = await load_remote_unit(host, status)
        exec_argv = unit.exec()
        argv = argv or exec_argv
        python = target.python or (exec_argv[0] if exec_argv else None)
    if not argv:
        raise UsageError("give the flags to check after `--`, or --unit to read them from the unit")
    if catalog is None:
        if python is None:
            raise UsageError("give --unit (its Python tells where SGLang is) or --sglang-version")
        root = await site_packages(host, python)
        if root is None:
            raise CockpitError(f"{python} on {host.name} did not say where its packages are")
        catalog = await CatalogCache().get(host, root)
    return catalog, argv, host, python, pool


async def _run(args: argparse.Namespace) -> Report:
    argv = args.args[1:] if args.args[:1] == ["--"] else list(args.args)
    catalog, argv, host, python, pool = await _catalog_and_argv(args, argv)
    try:
        report = Report(check_static(argv, catalog))
        if host is not None:
            report.findings += await check_paths(host, argv, catalog)
            if not args.static_only and python is not None:
                flags_only = argv[next((i for i, w in enumerate(argv) if w.startswith("--")), len(argv)) :]
                report.dry_run, found = await dry_run(host, python, flags_only, catalog)
                report.findings += found
                report.findings.append(
                    Finding(INFO, "dry-run", [], f"SGLang's own argument resolution on {host.name}: {report.dry_run}")
                )
    finally:
        if pool is not None:
            await pool.close()
    return report


def run(args: argparse.Namespace) -> int:
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
