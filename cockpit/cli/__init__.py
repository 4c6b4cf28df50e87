"""`cockpit`: opens the app; its subcommands run the same core headless.

Exit status everywhere: 0 ok, 1 the check found problems, 2 usage or connection error.
Errors are one sentence on stderr.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import sys
from collections.abc import Callable, Sequence

from cockpit import __version__

# One module per subcommand; each imports what its work needs only when it runs, so
# `cockpit status` does not pay for Textual or the load runner.
from cockpit.cli import bench, deployment, experiment, explain, fold, lab, preflight, snapshot, stacks, status, unit
from cockpit.cli.inert_output import inert_streams
from cockpit.errors import CockpitError, UsageError

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
    parser.add_argument(
        "--deployment",
        metavar="NAME",
        help="open the app on a [deployments] entry: its node 0, with every node's readiness and the group's",
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    status.add_parser(sub)
    fold.add_parser(sub)
    explain.add_parser(sub)
    bench.add_parser(sub)
    unit.add_parser(sub)
    preflight.add_parser(sub)
    snapshot.add_parser(sub)
    stacks.add_parser(sub)
    deployment.add_parser(sub)
    experiment.add_parser(sub)
    lab.add_parser(sub, _Parser)
    return parser


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "status": status.run,
    "fold": fold.run,
    "explain": explain.run,
    "bench": bench.run,
    "unit": unit.run,
    "preflight": preflight.run,
    "snapshot": snapshot.run,
    "stacks": stacks.run,
    "deployment": deployment.run,
    "experiment": experiment.run,
    "lab": lab.run,
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


# `lab` is the local lab's own tooling (`lab ssh` passes the lab's output through as ssh does);
# every other subcommand prints through cockpit.cli.inert_output.
LOCAL = frozenset({"lab"})


def _prints_json(args: argparse.Namespace) -> bool:
    """explain prints JSON always, the others with `--json` (bench's `--json OUT` names a file)."""
    return args.command == "explain" or getattr(args, "json", None) is True


# Commands whose work is over once they have printed: `console` ends them without CPython's
# teardown of the ~280 modules they loaded (20 ms of a 0.3 s `cockpit status`, which scripts
# call in loops and people set beside `ssh host systemctl show`).
ENDS_AT_ONCE = frozenset({"status"})


def _open_deployment(args: argparse.Namespace) -> int:
    from cockpit.cli.target import early_reader, targets_of
    from cockpit.ui.launch import open_app

    cfg, nodes = targets_of(args)
    reader = early_reader(cfg, nodes[0][1])
    return open_app(cfg, nodes[0][1], read_only=args.read_only, reader=reader, group=args.deployment)


def main(argv: Sequence[str] | None = None) -> int:
    return _run(argv)[0]


def console() -> None:
    """The `cockpit` command: `main`, then the exit (at once for ENDS_AT_ONCE, with the atexit
    handlers run and the output flushed first)."""
    try:
        code, command = _run(None)
    except BrokenPipeError:  # `cockpit status --deployment D | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        os._exit(1)
    if command in ENDS_AT_ONCE:
        atexit._run_exitfuncs()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:  # `cockpit status | head -1`: what was wanted has gone
            pass
        os._exit(code)
    sys.exit(code)


def _run(argv: Sequence[str] | None) -> tuple[int, str | None]:
    """(the exit status, the subcommand run)."""
    parser = build_parser()
    try:
        args = parser.parse_args(join_dashed_values(sys.argv[1:] if argv is None else argv))
    except CockpitError as e:
        print(f"cockpit: {e}", file=sys.stderr)
        return 2, None
    command = args.command
    inert = command is not None and command not in LOCAL
    with inert_streams(_prints_json(args)) if inert else contextlib.nullcontext():
        try:
            if command is None:
                return _open_app(args), None
            return COMMANDS[command](args), command
        except CockpitError as e:
            print(f"cockpit: {e}", file=sys.stderr)
            return 2, command
        except KeyboardInterrupt:
            return 130, command


def _open_app(args: argparse.Namespace) -> int:
    from cockpit.cli.target import early_reader, target_of

    if args.deployment:
        return _open_deployment(args)
    cfg, target = target_of(args, unit=False)
    if target is None and args.host:
        raise UsageError("--unit is needed with --host")
    # its ssh logs in on another core while Textual is imported: the first status is
    # then on screen with the first frame
    reader = early_reader(cfg, target) if target is not None else None
    from cockpit.ui.launch import open_app  # the only path that loads Textual

    return open_app(cfg, target, read_only=args.read_only, reader=reader)
