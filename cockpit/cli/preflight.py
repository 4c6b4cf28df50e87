"""`cockpit preflight`: would SGLang start with these flags? Exit 1 when it would not."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.errors import CockpitError, UsageError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cockpit.remote.base import Host
    from cockpit.session import Session
    from cockpit.sglang.catalog.flags import Catalog
    from cockpit.sglang.preflight.nodes_preflight import NodeFacts
    from cockpit.sglang.preflight.preflight import Finding, Report
    from cockpit.targets import Target


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
    p.add_argument(
        "--deployment",
        metavar="NAME",
        help="a [deployments] entry: every node's unit, and what must agree between the nodes (each finding "
        "names its `node`)",
    )
    release = p.add_mutually_exclusive_group()
    release.add_argument("--sglang-version", metavar="V", help="check against this release (its source from PyPI)")
    release.add_argument("--sglang-source", metavar="DIR", help="a directory holding the release's `sglang` package")
    p.add_argument("--static-only", action="store_true", help="no dry run on the host")
    p.add_argument("--json", action="store_true", help="print the findings as a JSON list")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="-- ARGS", help="the launch_server flags to check")
    return p


def _given_catalog(args: argparse.Namespace, argv: list[str]) -> Catalog | None:
    """The catalog named by --sglang-source or --sglang-version, if any."""
    from cockpit.sglang.catalog.flags import load_catalog

    catalog: Catalog | None = None
    if args.sglang_source:
        catalog = load_catalog(Path(args.sglang_source))
    elif args.sglang_version:
        from cockpit.sglang.catalog.releases import sglang_source

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
    from cockpit.sglang.deployments.deployment import read_deployment
    from cockpit.sglang.preflight.unit_preflight import check_unit
    from cockpit.systemd.process_facts import Viewpoint

    async with open_target(args, unit=False) as session:
        python, on_gpus, root, unit_findings, cwd = None, None, None, [], "/"
        if session.target is not None:
            found = await read_deployment(
                session.host, session.target, catalogs=session.catalogs, python=catalog is None
            )
            if found.unit is None:
                raise CockpitError(found.problems[0] if found.problems else "the unit could not be read")
            argv = argv or found.command
            python, root = found.interpreter, found.package_root
            unit_findings = check_unit(found.unit)
            cwd = found.unit.setting("WorkingDirectory") or "/"
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
        # a unit's model directories are checked with the rest of the host (check_before_start)
        environment = on_gpus[1] if on_gpus is not None else None
        report = await _report(args, argv, catalog, host, python, paths=on_gpus is None, environment=environment)
        report.findings += unit_findings
        if on_gpus is not None:
            from cockpit.sglang.preflight.architectures import ArchitectureCache
            from cockpit.sglang.preflight.model_preflight import check_before_start
            from cockpit.sglang.preflight.preflight import settled

            report.findings = settled(
                report.findings
                + await check_before_start(
                    host, argv, catalog, *on_gpus, root=root, architectures=ArchitectureCache(), cwd=cwd
                )
            )
        return report


async def _report(
    args: argparse.Namespace,
    argv: list[str],
    catalog: Catalog,
    host: Host | None,
    python: str | None,
    *,
    paths: bool = True,
    environment: Mapping[str, str] | None = None,
) -> Report:
    from cockpit.sglang.preflight.dry_runs import DryRuns, replace_static
    from cockpit.sglang.preflight.preflight import Report, check_paths, check_static, flags_only

    report = Report(check_static(argv, catalog))
    if host is not None:
        missing = await check_paths(host, argv, catalog) if paths else []
        if not args.static_only and python is not None:
            verdict = await DryRuns().verdict(host, python, flags_only(argv), catalog, environment)
            report.dry_run = verdict.outcome
            report.findings = [*replace_static(report.findings, verdict), verdict.said()]
        report.findings += missing
    return report


async def _node(
    args: argparse.Namespace, session: Session, node: str, target: Target
) -> tuple[list[Finding], NodeFacts, Host]:
    """One node's own checks (as `--unit` runs them), said of the node, and its facts."""
    import asyncio

    from cockpit.sglang.deployments.deployment import read_deployment
    from cockpit.sglang.preflight.model_preflight import check_before_start
    from cockpit.sglang.preflight.nodes_preflight import NodeFacts, host_network, on_node
    from cockpit.sglang.preflight.preflight import settled
    from cockpit.sglang.preflight.unit_preflight import check_unit
    from cockpit.systemd import gpu_use
    from cockpit.systemd.process_facts import Viewpoint

    host = session.host_named(target.host)
    found = await read_deployment(host, target, catalogs=session.catalogs, python=True)
    if found.unit is None or found.catalog is None:
        raise CockpitError(f"{node}: {found.problems[0] if found.problems else 'the unit could not be read'}")
    argv, env = found.command, found.unit.environment()
    use, (interfaces, addresses) = await asyncio.gather(gpu_use.read_or_say(host), host_network(host))
    report = await _report(args, argv, found.catalog, host, found.interpreter)
    report.findings += check_unit(found.unit)
    view = Viewpoint(target.unit, found.status.running_invocation)
    report.findings = settled(
        report.findings
        + await check_before_start(
            host, argv, found.catalog, view, env, root=found.package_root, architectures=session.architectures, use=use
        )
    )
    gpus = len(use.gpus) if use.gpus else None
    return (
        on_node(report.findings, node),
        NodeFacts(node, host.name, argv, found.catalog, env, gpus, interfaces, addresses),
        host,
    )


async def _deployment(args: argparse.Namespace) -> Report:
    """Every node's own checks, then what must agree between them, before any write."""
    import asyncio

    from cockpit import config as config_mod
    from cockpit.cli.target import session_of
    from cockpit.sglang.preflight.nodes_preflight import cross_node_findings, dist_init_addr, reach_findings
    from cockpit.sglang.preflight.preflight import Report
    from cockpit.targets import deployment_targets

    cfg = config_mod.load(getattr(args, "config", None))
    nodes = deployment_targets(cfg, args.deployment)
    async with session_of(cfg, None) as session:
        each = await asyncio.gather(*(_node(args, session, node, target) for node, target in nodes))
        report = Report([f for findings, _, _ in each for f in findings])
        facts = [fact for _, fact, _ in each]
        report.findings += cross_node_findings(facts)
        head = next((f for f in facts if f.rank == 0), facts[0])
        addr = dist_init_addr(head.flags)
        if addr is not None:
            probes = (reach_findings(host, fact.node, addr, head.node) for _, fact, host in each if fact is not head)
            report.findings += [f for found in await asyncio.gather(*probes) for f in found]
    return report


async def _run(args: argparse.Namespace) -> Report:
    if args.deployment:
        if args.unit or args.host or args.args:
            raise UsageError("--deployment reads every node's flags from its unit: give it alone")
        return await _deployment(args)
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
            where = f"{f.node} " if f.node else ""
            print(f"{marks.get(f.severity, '?')} {f.severity:<7} {where}{f.rule}: {f.message}")
            if f.fix:
                print(f"          fix: {f.fix}")
        print("the server should start" if report.would_start else "the server would NOT start")
    return 0 if report.would_start else 1
