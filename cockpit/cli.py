"""`cockpit`: opens the app; its subcommands run the same core headless.

Exit status everywhere: 0 ok, 1 the check found problems, 2 usage or connection error.
Errors are one sentence on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, Sequence

from cockpit import __version__
from cockpit.errors import CockpitError, UsageError
from cockpit.load import bench_cli
from cockpit.sglang import explain_cli, preflight_cli
from cockpit.systemd import unit_cli
from cockpit.traceback import cli as fold_cli
from cockpit.ui import snapshot_cli  # imports no Textual until it runs

EXAMPLES = """\
examples:
  cockpit                                   open the cockpit on the units of your config
  cockpit --host gpu1 --unit sglang-k26     open it on one unit of an ssh_config host
  cockpit lab up                            boot the local lab host (root) and its SGLang stand-in
  cockpit lab ssh -- systemctl status sglang-demo
  cockpit lab down

config: --config FILE, $COCKPIT_CONFIG, ~/.config/cockpit/config.toml or ./cockpit.toml
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one sentence, like every other error here."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _add_lab(sub: argparse._SubParsersAction) -> None:
    lab = sub.add_parser(
        "lab",
        help="the local lab host: a real systemd in a container (root)",
        description="A disposable systemd host with sshd and the SGLang stand-in, "
        "reachable as `--host cockpit-lab` once up.",
    )
    lab_sub = lab.add_subparsers(dest="lab_command", required=True, parser_class=_Parser)
    up = lab_sub.add_parser("up", help="build the image once, boot the lab, write its ssh_config")
    up.add_argument("--name", default=None, help="lab name and ssh alias (default cockpit-lab)")
    up.add_argument(
        "--sglang-version", default=None, help="SGLang release whose source the lab holds (0.5.23 or 0.5.9)"
    )
    up.add_argument(
        "--release",
        default="bookworm",
        choices=["bookworm", "trixie"],
        help="the Debian release the lab runs (bookworm: systemd 252, Python 3.11, OpenSSH 9.2; trixie: "
        "systemd 257, Python 3.13, OpenSSH 10)",
    )
    up.add_argument("--json", action="store_true", help="print the lab's facts as JSON")
    down = lab_sub.add_parser("down", help="stop the lab and remove its namespace and cgroups")
    down.add_argument("--name", default=None)
    status = lab_sub.add_parser("status", help="is the lab up, and where")
    status.add_argument("--name", default=None)
    status.add_argument("--json", action="store_true")
    ssh = lab_sub.add_parser(
        "ssh", help="ssh into the lab (`-- ARGV...` runs exactly that argv; one quoted string is a shell command)"
    )
    ssh.add_argument("--name", default=None)
    ssh.add_argument("--user", default="root", choices=["root", "operator"])
    ssh.add_argument("remote_command", nargs=argparse.REMAINDER, metavar="-- CMD")
    crash = lab_sub.add_parser(
        "crash", help="make every rank of the lab's stand-in crash at once (watch the tracebacks fold)"
    )
    crash.add_argument("--name", default=None)
    crash.add_argument("--port", type=int, default=30000, help="the stand-in's --port (default 30000)")
    demo = lab_sub.add_parser("demo", help="boot the lab and open the cockpit on its sglang-demo.service")
    demo.add_argument("--name", default=None)


def _add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="a config host or an ssh_config alias")
    p.add_argument("--unit", help="a systemd unit on that host, or the name of a [units] entry")


def _add_status(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="the unit's state, PID, restarts, last exit and readiness",
        description="Exit 0 when the unit is active and /health answers 200, 1 otherwise.",
    )
    _add_target(p)
    p.add_argument("--json", action="store_true", help="print the UnitStatus fields as JSON")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cockpit",
        description="A keyboard-driven cockpit for SGLang servers run as systemd units.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cockpit {__version__}")
    parser.add_argument("--config", help="the config file to read")
    parser.add_argument("--host", help="a config host or an ssh_config alias")
    parser.add_argument("--unit", help="a systemd unit on that host")
    parser.add_argument("--read-only", action="store_true", help="refuse every action that changes a host")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add_status(sub)
    fold_cli.add_parser(sub)
    explain_cli.add_parser(sub)
    bench_cli.add_parser(sub)
    unit_cli.add_parser(sub)
    preflight_cli.add_parser(sub)
    snapshot_cli.add_parser(sub)
    _add_lab(sub)
    return parser


def _cmd_lab(args: argparse.Namespace) -> int:
    from cockpit.lab.lab import DEFAULT_SGLANG, Lab, running_labs
    from cockpit.lab.paths import DEFAULT_NAME

    lab = Lab(args.name or DEFAULT_NAME)
    if args.lab_command == "up":
        info = lab.up(
            sglang_version=args.sglang_version or DEFAULT_SGLANG,
            release=args.release,
            progress=lambda m: print(m, file=sys.stderr),
        )
        if args.json:
            print(json.dumps(info.to_json()))
        else:
            print(
                f"lab {info.name} is up at {info.address} (Debian {info.release}, SGLang {info.sglang_version} "
                "source, stand-in server)"
            )
            print(f"  ssh -F {info.ssh_config} {info.name}")
            print(f"  cockpit --host {info.name} --unit sglang-demo.service")
        return 0
    if args.lab_command == "down":
        stopped = lab.down()
        print(f"lab {lab.name} {'stopped' if stopped else 'was not running; cleaned up'}")
        return 0
    if args.lab_command == "status":
        labs = running_labs() if args.name is None else [i for i in [lab.info()] if i]
        if args.json:
            print(json.dumps([i.to_json() for i in labs]))
        elif not labs:
            print("no lab is up" if args.name is None else f"lab {lab.name} is not up")
        for info in labs if not args.json else []:
            print(
                f"{info.name}: up at {info.address}, pid {info.pid}, SGLang {info.sglang_version}, "
                f"ssh_config {info.ssh_config}"
            )
        return 0 if labs else 1
    if args.lab_command == "ssh":
        command = args.remote_command[1:] if args.remote_command[:1] == ["--"] else args.remote_command
        argv = lab.ssh_argv(args.user, command, shell=len(command) == 1)
        os.execvp(argv[0], argv)
    if args.lab_command == "crash":
        from cockpit.lab.lab import crash

        ranks = crash(lab, args.port)
        print(
            f"the stand-in on {lab.name} crashes on {ranks} rank{'s' * (ranks != 1)} now: each prints "
            "`Scheduler hit an exception: Traceback ...`, the journal folds each into one row, and systemd "
            "restarts the unit (Restart=on-failure)"
        )
        return 0
    if args.lab_command == "demo":
        from cockpit.lab.lab import demo_config
        from cockpit.ui.launch import open_app  # the only path here that loads Textual

        info = lab.up(progress=lambda m: print(m, file=sys.stderr))
        return open_app(demo_config(info.name), "demo", read_only=False)
    raise UsageError(f"unknown lab command {args.lab_command}")


async def _status(args: argparse.Namespace) -> int:
    from cockpit import config as config_mod
    from cockpit.fmt import duration
    from cockpit.remote.pool import HostPool
    from cockpit.sglang.endpoint import unit_address
    from cockpit.systemd.readiness import is_ready
    from cockpit.systemd.status import fetch
    from cockpit.targets import resolve

    cfg = config_mod.load(args.config)
    target = resolve(cfg, args.host, args.unit)
    pool = HostPool(cfg)
    try:
        host = pool.get(target.host)
        status = await fetch(host, target.unit)
        ready = (
            await is_ready(host, *await unit_address(host, target, status))
            if status.active_state == "active"
            else False
        )
    finally:
        await pool.close()
    from dataclasses import replace

    status = replace(status, ready=ready)
    if args.json:
        print(json.dumps(status.to_json()))
    else:
        state = f"{status.active_state} ({status.sub_state})"
        print(f"{status.unit} on {status.host}: {state}, {'ready' if ready else 'not ready'}")
        print(
            f"  pid {status.main_pid or '-'}, up {duration(status.uptime())}, restarts {status.n_restarts}, "
            f"last exit {status.last_exit or '-'}"
        )
        print(
            f"  invocation {status.invocation_id or '-'}, unit file {status.fragment_path or '-'}"
            + (" (changed on disk: daemon-reload needed)" if status.need_daemon_reload else "")
        )
    return 0 if status.active_state == "active" and ready else 1


def _cmd_status(args: argparse.Namespace) -> int:
    import asyncio

    return asyncio.run(_status(args))


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "status": _cmd_status,
    "fold": fold_cli.run,
    "explain": explain_cli.run,
    "bench": bench_cli.run,
    "unit": unit_cli.run,
    "preflight": preflight_cli.run,
    "snapshot": snapshot_cli.run,
    "lab": _cmd_lab,
}


# Options whose value may itself begin with a dash: `--flag --tp-size=4`, `--since -30min`.
DASHED_VALUES = ("--flag", "--unset", "--since")


def join_dashed_values(argv: Sequence[str]) -> list[str]:
    """`--flag --tp-size=4` as `--flag=--tp-size=4`: argparse would take the value for an option."""
    out: list[str] = []
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            out += words[i:]
            break
        if word in DASHED_VALUES and i + 1 < len(words) and words[i + 1].startswith("-") and words[i + 1] != "--":
            out.append(f"{word}={words[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(join_dashed_values(sys.argv[1:] if argv is None else argv))
        if args.command is None:
            from cockpit.ui.launch import run_app  # the only path that loads Textual

            return run_app(args)
        return COMMANDS[args.command](args)
    except UsageError as e:
        print(f"cockpit: {e}", file=sys.stderr)
        return 2
    except CockpitError as e:
        print(f"cockpit: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
