"""`cockpit lab ...`: the local lab host, a real systemd in a container (root)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from cockpit.errors import UsageError
from cockpit.fmt import cockpit_command


def add_parser(sub: argparse._SubParsersAction, parser_class: type[argparse.ArgumentParser]) -> None:
    lab = sub.add_parser(
        "lab",
        help="the local lab host: a real systemd in a container (root)",
        description="A disposable systemd host with sshd and the SGLang stand-in, "
        "reachable as `--host cockpit-lab` once up.",
    )
    lab_sub = lab.add_subparsers(dest="lab_command", required=True, parser_class=parser_class)
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
    up.add_argument(
        "--real-sglang",
        action="store_true",
        help="a service Python where SGLang (0.5.23) really imports, with CPU torch: the pre-flight's dry "
        "run gives SGLang's own verdict there, and sglang-real-tp1.service and sglang-real-tp2.service serve "
        "a tiny model with SGLang itself once started (a second image, built once: about 2 min where pip "
        "has torch cached, 6.3 GB)",
    )
    up.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="N > 1: N labs (NAME, NAME-n1, ...) running one SGLang launch over N nodes, "
        "sglang-k26-node{i}.service on each, and a config with its [deployments.k26]",
    )
    up.add_argument("--json", action="store_true", help="print the lab's facts as JSON")
    down = lab_sub.add_parser("down", help="stop the lab and remove its namespace and cgroups")
    down.add_argument("--name", default=None)
    down.add_argument("--nodes", type=int, default=1, help="the labs of `up --nodes N` too")
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
    hang = lab_sub.add_parser(
        "hang",
        help="make every rank of the lab's stand-in block in a collective (a hang: watch readiness turn hung, "
        "`s` dumps the stacks; each rank's watchdog ends it after --watchdog-timeout)",
    )
    dead = lab_sub.add_parser(
        "kill-detokenizer",
        help="kill the lab's stand-in's detokenizer process (/health still answers 200: watch readiness say degraded)",
    )
    for verb in (crash, hang, dead):
        verb.add_argument("--name", default=None)
        verb.add_argument("--port", type=int, default=30000, help="the stand-in's --port (default 30000)")
    generate = lab_sub.add_parser(
        "generate",
        help="ask a real SGLang of a --real-sglang lab for tokens (its /generate, greedy) and print its answer; "
        "start its unit first (`cockpit lab ssh -- systemctl start sglang-real-tp1.service`)",
    )
    generate.add_argument("--name", default=None)
    generate.add_argument("--port", type=int, default=30010, help="30010: sglang-real-tp1.service; 30020: tp 2")
    generate.add_argument("--tokens", type=int, default=8, help="how many tokens to generate (default 8)")
    generate.add_argument("text", help="the prompt (the tiny model knows 61 English words; others are <unk>)")
    demo = lab_sub.add_parser("demo", help="boot the lab and open the cockpit on its sglang-demo.service")
    demo.add_argument("--name", default=None)


def run(args: argparse.Namespace) -> int:
    from cockpit.lab.lab import DEFAULT_SGLANG, REAL_UNITS, Lab, running_labs
    from cockpit.lab.paths import DEFAULT_NAME

    lab = Lab(args.name or DEFAULT_NAME)
    me = cockpit_command()  # the commands it prints run as typed: `.venv/bin/cockpit` where that is how
    if args.lab_command == "up" and args.nodes > 1:
        from cockpit.lab import nodes

        if args.real_sglang:
            raise UsageError("--nodes runs the stand-in: give it without --real-sglang")
        infos, config_file = nodes.up(
            lab.name,
            args.nodes,
            progress=lambda m: print(m, file=sys.stderr),
            sglang_version=args.sglang_version or DEFAULT_SGLANG,
            release=args.release,
        )
        if args.json:
            print(json.dumps({"labs": [i.to_json() for i in infos], "config": str(config_file)}))
        else:
            for rank, info in enumerate(infos):
                print(f"lab {info.name} is up at {info.address}: node {rank}, {nodes.node_unit(rank)}")
            print(f"  {me} --config {config_file} --deployment {nodes.DEPLOYMENT}")
            print(f"  {me} --config {config_file} status --deployment {nodes.DEPLOYMENT}")
        return 0
    if args.lab_command == "up":
        info = lab.up(
            sglang_version=args.sglang_version or DEFAULT_SGLANG,
            release=args.release,
            progress=lambda m: print(m, file=sys.stderr),
            real_sglang=args.real_sglang,
        )
        if args.json:
            print(json.dumps(info.to_json()))
        else:
            print(
                f"lab {info.name} is up at {info.address} (Debian {info.release}, SGLang {info.sglang_version} "
                f"{'installed, importable' if info.real_sglang else 'source'}, stand-in server)"
            )
            print(f"  ssh -F {info.ssh_config} {info.name}")
            print(f"  {me} --host {info.name} --unit sglang-demo.service")
            if info.real_sglang:
                print(
                    "and SGLang 0.5.23 itself on the CPU, a tiny random-weight Llama, stopped until you start it "
                    "(about 3 GB and 30 s of both cores; tp 2 about 4 GB):"
                )
                for unit, port in REAL_UNITS.items():
                    print(f"  {me} lab ssh --name {info.name} -- systemctl start {unit}")
                    print(f"  {me} --host {info.name} --unit {unit}")
                    print(f"  {me} lab generate --name {info.name} --port {port} 'what is the model ?'")
        return 0
    if args.lab_command == "down":
        for each in [lab, *(Lab(f"{lab.name}-n{rank}") for rank in range(1, args.nodes))]:
            stopped = each.down()
            print(f"lab {each.name} {'stopped' if stopped else 'was not running; cleaned up'}")
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
    if args.lab_command in ("hang", "kill-detokenizer"):
        from cockpit.lab.lab import fault

        fault(lab, args.lab_command, args.port)
        print(
            f"the stand-in on {lab.name} hangs now: no token, no line; /health_generate gets no answer, and each "
            "rank's watchdog ends the server after its --watchdog-timeout (300 s unless the unit says)"
            if args.lab_command == "hang"
            else f"the stand-in's detokenizer on {lab.name} is dead now: /health still answers 200, no request "
            "gets its answer, and /health_generate says 503 after 20 s"
        )
        return 0
    if args.lab_command == "generate":
        from cockpit.lab.lab import generate

        print(json.dumps(generate(lab, args.text, args.port, args.tokens)))
        return 0
    if args.lab_command == "demo":
        from cockpit.lab.lab import demo_config
        from cockpit.targets import resolve
        from cockpit.ui.launch import open_app  # the only path here that loads Textual

        info = lab.up(progress=lambda m: print(m, file=sys.stderr))
        config = demo_config(info.name)
        return open_app(config, resolve(config, None, "demo"))
    raise UsageError(f"unknown lab command {args.lab_command}")
