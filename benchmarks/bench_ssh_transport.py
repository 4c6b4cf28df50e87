"""SSH transport choices side by side on one lab (issue 14, item 4). Prints JSON.

Issue 14 asks that we pick the transport by numbers: the follower's CPU per entry must halve,
and a load run through `--host` must read within 5% of a raw-socket client at 256 streams.
Both workloads run every variant on the same lab (`bench-ssh-<4 hex>`, its own, taken down at
the end), interleaved round by round (the start rotates each round), so that the noise of a
busy 2-core machine hits every variant alike. Each figure is given as `min` and `median` over
`--runs` runs, with every run kept under `runs`.

Workload A, `follow`: a transient unit prints `--entries` journal lines; each variant reads
the unit's whole journal once (`journalctl -u U -o json --all --output-fields=<OUTPUT_FIELDS>`,
the follower's own argv) through a LineStream's `batches()`, parsed by `parse_json_lines`, as
the app's follower does. Variants: asyncssh with each cipher the lab's OpenSSH server accepts
(chacha20-poly1305 is asyncssh's first choice; AES-GCM goes through cryptography's one-shot
AEAD; aes128-ctr needs a MAC), AES-GCM with a larger channel window and packet size, and the
OpenSSH client (`ssh`) as a subprocess, whose stdout we parse the same way.

- `entries`: entries parsed; must equal `entries_in_lab` (the same journalctl's count in the
  lab: the flood's lines plus systemd's own about the unit). `ok` says it did.
- `wall_s`: from opening the stream to its end (asyncssh: the connection is opened before, and
  `connect_s` is its cost; `ssh`: its own connect is inside and `connect_s` is a separate
  `ssh alias true`'s wall time, for scale). `entries_per_s` is entries over `wall_s`.
- `cpu_us_per_entry`: this process's CPU (`time.process_time()`: every thread) over the read,
  per entry, plus for `ssh` the child's CPU (`RUSAGE_CHILDREN` delta), i.e. the whole client
  side of the follow. `parse_cpu_us_per_entry` is `parse_json_lines`'s own thread CPU, timed
  around each call, freeing the batch's entries included (they are dropped at once here);
  `transport_cpu_us_per_entry` is the difference: what the transport (and
  the batching around it) costs. That is the figure the ciphers and windows can move.
- `lab_cpu_s`: CPU of the lab's whole cgroup over the read (the session's sshd process and
  journalctl, plus the idle stand-in; its `user.slice` alone reads 0 on a hybrid hierarchy):
  the server side. `reference` is journalctl alone in the lab writing to
  /dev/null (bash `time`: wall, user+sys) and that cgroup's figure for it; the follow cannot be
  faster than `reference.wall_s`.
- `negotiated`: the cipher and MAC asyncssh agreed on (asserted against what was asked).
- `read_kib`: mean bytes per `read_chunk` (CHUNK caps it): how much each wake-up brings.

Workload B, `load`: the lab's stand-in (sglang-demo.service) set by a drop-in to 40 tok/s a
stream and a server capacity of `--capacity` tok/s, listening on 0.0.0.0 so that this machine
can also reach it without SSH; then the project's load runner (`Runner`, one level of
`--concurrency` streams, warm-up 0) through each path: asyncssh `forward_port` as `cockpit
bench --host` does (default options; AES-GCM; AES-GCM with the larger window, passed to the
forward's channels too), an OpenSSH forward (`ssh -N -L`, the user's ssh_config honoured), the
cockpit's own `SSHHost.forward_port` (which now tries OpenSSH first: cockpit/remote/openssh.py),
and raw TCP to the lab's address.

- `measured_tok_s`: the runner's output_tokens_per_s. `truth_tok_s`: what the stand-in says it
  delivered to exactly that run's requests (`/standin/delivered`, by its own clock: total
  tokens over last end minus first start). `measured_over_truth`: is the measurer right;
  `over_raw`: this run's measured over the same round's raw-socket run (the issue's 5% rule).
- `cpu_s`: this process's CPU over the run (the runner plus asyncssh's forwarding) and for
  OpenSSH the `ssh` child's (from /proc/PID/stat); `lab_cpu_s`: the lab's whole cgroup (the
  stand-in and sshd) over the run.
- `errors`: failed requests (the run still counts, but `errors` says so).

Needs root (the lab). `--skip-load` or `--skip-follow` run one workload only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import re
import resource
import secrets
import shlex
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
from _common import ROOT, emit, lab_up

from cockpit.config import HostConfig
from cockpit.lab.lab import Lab
from cockpit.load.runner import LoadConfig, Runner
from cockpit.remote.base import LineStream
from cockpit.remote.local import ProcessLines
from cockpit.remote.ssh import SSHHost
from cockpit.systemd.entry import parse_json_lines
from cockpit.systemd.journal import OUTPUT_FIELDS, journalctl_argv

STANDIN_PORT = 30000
WINDOW = 8 << 20  # 8 MiB against asyncssh's 2 MiB
PKTSIZE = 256 << 10  # 256 KiB against asyncssh's 32 KiB
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Runs in the lab under Debian's python3: `flood.py N`, N lines as fast as journald takes them.
FLOOD = r"""
import sys
w = sys.stdout.write
for i in range(int(sys.argv[1])):
    w(f"[2026-11-30 10:00:00 TP0] Decode batch, #running-req: 32, #token: {i}, token usage: 0.13, "
      "cuda graph: True, gen throughput (token/s): 4351.94, #queue-req: 3\n")
sys.stdout.flush()
"""


# -- the lab ------------------------------------------------------------------------------


def lab_ssh(lab: Lab, command: str, *, input: str | None = None, timeout: float = 120, check: bool = True) -> str:
    """`command` (one string for the remote shell) as root in the lab; its stdout and stderr."""
    proc = subprocess.run(
        lab.ssh_argv("root", [command], shell=True), input=input, capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"`{command[:80]}` in the lab failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout + proc.stderr


def lab_cgroup(lab: Lab) -> Path:
    """The lab's cgroup in the jump box's unified hierarchy."""
    base = Path("/sys/fs/cgroup/unified") if Path("/sys/fs/cgroup/unified").is_dir() else Path("/sys/fs/cgroup")
    return base / f"cockpit-lab-{lab.name}"


def pin(lab: Lab) -> int:
    """Every process of the lab onto CPU 1 (what it starts later inherits it), this one onto CPU 0
    (the threads and processes it starts later inherit it): a jump box whose host is elsewhere,
    on a 2-core machine. The processes of the lab pinned."""
    pinned = 0
    for procs in lab_cgroup(lab).rglob("cgroup.procs"):
        for pid in procs.read_text().split():
            try:
                os.sched_setaffinity(int(pid), {1})
                pinned += 1
            except OSError:
                pass  # gone meanwhile
    os.sched_setaffinity(0, {0})
    return pinned


def cgroup_cpu_s(lab: Lab, sub: str = "") -> float:
    """CPU seconds so far of the lab's cgroup (`sub`: a cgroup below its payload, such as
    `user.slice`), from the jump box's unified hierarchy; NaN where there is none."""
    path = lab_cgroup(lab) / (f"payload/{sub}" if sub else "") / "cpu.stat"
    try:
        for line in path.read_text().splitlines():
            key, value = line.split()
            if key == "usage_usec":
                return int(value) / 1e6
    except (OSError, ValueError):
        pass
    return float("nan")


def ssh_base(lab: Lab) -> tuple[list[str], str]:
    """(`ssh -F <the lab's ssh_config>`, the root alias): OpenSSH as the user runs it."""
    argv = lab.ssh_argv("root")
    return argv[:-1], argv[-1]


# -- transports ---------------------------------------------------------------------------


class TunedHost(SSHHost):
    """SSHHost with extra asyncssh connection options (ciphers, MACs, window, max_pktsize).
    The options reach `create_process` (it reads them from the connection's options); a local
    forward takes its window and packet size as arguments, so `forward_port` passes them."""

    def __init__(self, config: HostConfig, tuning: dict[str, Any]) -> None:
        super().__init__(config)
        self.tuning = tuning

    def _options(self, **extra: Any) -> asyncssh.SSHClientConnectionOptions:
        return super()._options(**self.tuning, **extra)

    @contextlib.asynccontextmanager
    async def forward_port(self, host: str, port: int) -> AsyncIterator[int]:
        sizes = {k: v for k, v in self.tuning.items() if k in ("window", "max_pktsize")}
        if sizes:
            # asyncssh's local forward opens each channel with `self.create_connection(...)` at
            # its default window and packet size (not the connection options'): give the
            # connection's own method the sizes, on this connection object alone.
            conn = await self.connection()
            conn.create_connection = functools.partial(conn.create_connection, **sizes)  # type: ignore[method-assign]
        async with self._asyncssh_forward(host, port) as local:  # the cockpit's own goes by OpenSSH first
            yield local

    def negotiated(self) -> dict[str, str | None]:
        """What the connection agreed on, from asyncssh's private state (None if it moved)."""

        def name(attr: str) -> str | None:
            value = getattr(self._conn, attr, None)
            return value.decode() if isinstance(value, bytes) else value

        return {"cipher": name("_enc_alg_sc"), "mac": name("_mac_alg_sc") or None}


@dataclass(frozen=True)
class Variant:
    name: str
    kind: str  # "asyncssh", "openssh" or "raw"
    tuning: dict[str, Any] = field(default_factory=dict)  # asyncssh connection options
    ssh_options: tuple[str, ...] = ()  # extra OpenSSH arguments
    remote_prefix: tuple[str, ...] = ()  # words before journalctl's argv on the lab


GCM128 = {"encryption_algs": ["aes128-gcm@openssh.com"]}
BIG = {"window": WINDOW, "max_pktsize": PKTSIZE}

FOLLOW_VARIANTS = [
    Variant("asyncssh chacha20-poly1305", "asyncssh", {"encryption_algs": ["chacha20-poly1305@openssh.com"]}),
    Variant("asyncssh aes128-gcm", "asyncssh", GCM128),
    Variant("asyncssh aes256-gcm", "asyncssh", {"encryption_algs": ["aes256-gcm@openssh.com"]}),
    Variant(
        "asyncssh aes128-ctr + hmac-sha2-256-etm",
        "asyncssh",
        {"encryption_algs": ["aes128-ctr"], "mac_algs": ["hmac-sha2-256-etm@openssh.com"]},
    ),
    Variant("asyncssh aes128-gcm, window 8 MiB, pkt 256 KiB", "asyncssh", {**GCM128, **BIG}),
    Variant(
        "asyncssh chacha20-poly1305, window 8 MiB, pkt 256 KiB",
        "asyncssh",
        {"encryption_algs": ["chacha20-poly1305@openssh.com"], **BIG},
    ),
    # journalctl writes its stdout in 4 KiB stdio blocks and sshd sends what each read of the
    # pipe gives: a bigger stdio buffer on the lab side means fewer, fuller packets.
    Variant("asyncssh aes128-gcm, remote stdbuf -o 256K", "asyncssh", GCM128, remote_prefix=("stdbuf", "-o", "256K")),
    Variant("openssh ssh (its default cipher)", "openssh"),
    Variant("openssh ssh -c aes128-gcm", "openssh", ssh_options=("-c", "aes128-gcm@openssh.com")),
]

LOAD_VARIANTS = [
    Variant("raw socket", "raw"),
    Variant("asyncssh forward chacha20-poly1305", "asyncssh", {"encryption_algs": ["chacha20-poly1305@openssh.com"]}),
    Variant("asyncssh forward aes128-gcm", "asyncssh", GCM128),
    Variant("asyncssh forward aes128-gcm, window 8 MiB, pkt 256 KiB", "asyncssh", {**GCM128, **BIG}),
    Variant("openssh ssh -N -L", "openssh"),
    Variant("cockpit forward_port (OpenSSH first)", "cockpit"),
]


def rotated(items: Sequence[Variant], by: int) -> list[Variant]:
    by %= len(items)
    return [*items[by:], *items[:by]]


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """min and median of every numeric figure of the runs."""
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        values = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
        out[key] = {"min": round(min(values), 4), "median": round(statistics.median(values), 4)}
    return out


# -- workload A: the follow ---------------------------------------------------------------


class Tally:
    """Entries, parse CPU and reads of one pass over a LineStream."""

    def __init__(self) -> None:
        self.entries = 0
        self.parse_cpu = 0.0
        self.reads = 0
        self.bytes = 0

    def count_reads(self, stream: LineStream) -> None:
        read = stream.read_chunk

        async def counted() -> bytes:
            data = await read()
            self.reads += 1
            self.bytes += len(data)
            return data

        stream.read_chunk = counted  # type: ignore[method-assign]

    async def drain(self, stream: LineStream) -> None:
        self.count_reads(stream)
        clock = time.thread_time
        async for lines in stream.batches():
            t = clock()
            entries = parse_json_lines(lines)
            self.entries += len(entries)
            del entries  # freeing the batch is the parse's cost too, not the transport's
            self.parse_cpu += clock() - t


def follow_figures(
    tally: Tally, wall: float, cpu: float, lab_cpu: float, expected: int, connect: float
) -> dict[str, Any]:
    n = max(1, tally.entries)
    return {
        "entries": tally.entries,
        "ok": tally.entries == expected,
        "wall_s": round(wall, 3),
        "entries_per_s": round(tally.entries / wall),
        "cpu_s": round(cpu, 3),
        "cpu_us_per_entry": round(cpu / n * 1e6, 3),
        "parse_cpu_us_per_entry": round(tally.parse_cpu / n * 1e6, 3),
        "transport_cpu_us_per_entry": round((cpu - tally.parse_cpu) / n * 1e6, 3),
        "lab_cpu_s": round(lab_cpu, 3),
        "connect_s": round(connect, 3),
        "read_kib": round(tally.bytes / max(1, tally.reads) / 1024, 1),
    }


async def follow_asyncssh(lab: Lab, variant: Variant, argv: list[str], expected: int) -> dict[str, Any]:
    host = TunedHost(HostConfig(name=lab.name), variant.tuning)
    try:
        t = time.perf_counter()
        await host.connection()
        connect = time.perf_counter() - t
        negotiated = host.negotiated()
        wanted = variant.tuning.get("encryption_algs")
        if wanted and negotiated["cipher"] not in (None, wanted[0]):
            raise RuntimeError(f"{variant.name}: the connection agreed on {negotiated['cipher']}")
        tally = Tally()
        lab0, cpu0, wall0 = cgroup_cpu_s(lab), time.process_time(), time.perf_counter()
        async with host.stream(argv) as stream:
            await tally.drain(stream)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        lab_cpu = cgroup_cpu_s(lab) - lab0
    finally:
        await host.close()
    return {**follow_figures(tally, wall, cpu, lab_cpu, expected, connect), "negotiated": negotiated}


def timed_run(argv: list[str]) -> float:
    """Wall seconds of a command run to completion."""
    t = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, timeout=30)
    return time.perf_counter() - t


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def follow_openssh(lab: Lab, variant: Variant, argv: list[str], expected: int) -> dict[str, Any]:
    base, alias = ssh_base(lab)
    # The connect alone, for scale: it is inside the follow's wall and CPU below.
    connect = await asyncio.to_thread(timed_run, [*base, *variant.ssh_options, alias, "true"])
    tally = Tally()
    lab0, child0, cpu0 = cgroup_cpu_s(lab), children_cpu(), time.process_time()
    wall0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *base, *variant.ssh_options, alias, shlex.join(argv), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    await tally.drain(ProcessLines(proc))
    await proc.wait()
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0 + children_cpu() - child0
    lab_cpu = cgroup_cpu_s(lab) - lab0
    figures = follow_figures(tally, wall, cpu, lab_cpu, expected, connect)
    return {**figures, "child_cpu_s": round(children_cpu() - child0, 3), "returncode": proc.returncode}


def follow_reference(lab: Lab, argv: list[str]) -> dict[str, Any]:
    """journalctl alone in the lab, to /dev/null: the floor of any follow."""
    lab0 = cgroup_cpu_s(lab)
    out = lab_ssh(lab, f'TIMEFORMAT="%R %U %S"; time {shlex.join(argv)} >/dev/null', timeout=300)
    lab_cpu = cgroup_cpu_s(lab) - lab0
    real, user, sys_ = (float(x) for x in out.split()[-3:])
    return {"wall_s": real, "journalctl_cpu_s": round(user + sys_, 3), "lab_cpu_s": round(lab_cpu, 3)}


async def make_flood(lab: Lab, unit: str, entries: int) -> int:
    """The unit's journal holding `entries` flood lines; the entries journalctl gives for it."""
    await asyncio.to_thread(lab_ssh, lab, "tee /tmp/bench-ssh-flood.py >/dev/null", input=FLOOD)
    t = time.monotonic()
    await asyncio.to_thread(
        lab_ssh,
        lab,
        f"systemd-run --unit={unit} --wait --quiet -p LogRateLimitIntervalSec=0 "
        f"/usr/bin/python3 /tmp/bench-ssh-flood.py {entries}",
        timeout=900,
    )
    count_cmd = f"journalctl -u {unit} -o json --output-fields=_PID --no-pager | wc -l"
    last, deadline = -1, time.monotonic() + 300
    while True:  # journald may still be writing what it was sent: wait for the count to settle
        count = int((await asyncio.to_thread(lab_ssh, lab, count_cmd)).strip())
        if count >= entries and count == last:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the lab's journal holds {count} entries of {unit}, not {entries}")
        last = count
        await asyncio.sleep(1)
    print(f"flood: {count:,} entries in {time.monotonic() - t:.1f} s", file=sys.stderr)
    return count


async def workload_follow(lab: Lab, args: argparse.Namespace) -> dict[str, Any]:
    unit = f"bench-ssh-flood-{secrets.token_hex(2)}"
    expected = await make_flood(lab, unit, args.entries)
    argv = journalctl_argv(unit)  # as it is: the stdbuf variant adds the prefix the cockpit uses
    runs: dict[str, list[dict[str, Any]]] = {v.name: [] for v in FOLLOW_VARIANTS}
    reference: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    for r in range(args.runs):
        reference.append(await asyncio.to_thread(follow_reference, lab, argv))
        print(f"round {r + 1}: journalctl in the lab {reference[-1]['wall_s']:.2f} s", file=sys.stderr)
        for variant in rotated(FOLLOW_VARIANTS, r):
            if variant.name in failures:
                continue
            go = follow_asyncssh if variant.kind == "asyncssh" else follow_openssh
            try:
                result = await go(lab, variant, [*variant.remote_prefix, *argv], expected)
            except Exception as e:  # a refused cipher or option: report it, keep the rest going
                failures[variant.name] = f"{type(e).__name__}: {e}"
                print(f"  {variant.name}: FAILED {failures[variant.name]}", file=sys.stderr)
                continue
            runs[variant.name].append(result)
            print(
                f"  {variant.name}: {result['wall_s']:.2f} s, {result['cpu_us_per_entry']:.2f} us/entry "
                f"(transport {result['transport_cpu_us_per_entry']:.2f}), ok={result['ok']}",
                file=sys.stderr,
            )
    default = "asyncssh chacha20-poly1305"
    variants: dict[str, Any] = {}
    for v in FOLLOW_VARIANTS:
        if not runs[v.name]:
            variants[v.name] = {"failed": failures.get(v.name, "no run")}
            continue
        s = summary(runs[v.name])
        variants[v.name] = {
            "kind": v.kind,
            "options": {
                **v.tuning,
                **({"ssh_options": list(v.ssh_options)} if v.ssh_options else {}),
                **({"remote_prefix": list(v.remote_prefix)} if v.remote_prefix else {}),
            },
            "negotiated": runs[v.name][0].get("negotiated"),
            "all_ok": all(x["ok"] for x in runs[v.name]),
            **s,
            "runs": runs[v.name],
            **({"failed_later": failures[v.name]} if v.name in failures else {}),
        }
    if runs[default]:
        base = statistics.median(x["cpu_us_per_entry"] for x in runs[default])
        base_t = statistics.median(x["transport_cpu_us_per_entry"] for x in runs[default])
        for entry in variants.values():
            if "cpu_us_per_entry" in entry:
                entry["cpu_vs_default"] = round(entry["cpu_us_per_entry"]["median"] / base, 3)
                entry["transport_cpu_vs_default"] = round(entry["transport_cpu_us_per_entry"]["median"] / base_t, 3)
    return {
        "unit": unit,
        "flood_lines": args.entries,
        "entries_in_lab": expected,
        "argv": argv,
        "output_fields": OUTPUT_FIELDS,
        "reference_journalctl_in_lab": {**summary(reference), "runs": reference},
        "default": default,
        "variants": variants,
    }


# -- workload B: 256 streams --------------------------------------------------------------


def standin_exec_start(listen: str) -> str:
    """The demo unit's ExecStart, as shipped, with `--host` changed to `listen`."""
    text = (ROOT / "cockpit/lab/guest/sglang-demo.service").read_text().replace("\\\n", " ")
    line = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    return re.sub(r"--host\s+\S+", f"--host {listen}", " ".join(line.split()))


def configure_standin(lab: Lab, address: str, tokens_per_s: float, capacity: float) -> None:
    """A drop-in: the rates, and listening on every address so that raw TCP reaches it too."""
    dropin = (
        "[Service]\n"
        f"Environment=COCKPIT_STANDIN_TOKENS_PER_S={tokens_per_s:g} COCKPIT_STANDIN_CAPACITY={capacity:g}\n"
        "ExecStart=\n"
        f"{standin_exec_start('0.0.0.0')}\n"
    )
    d = "/etc/systemd/system/sglang-demo.service.d"
    lab_ssh(lab, f"mkdir -p {d} && cat > {d}/bench-ssh.conf", input=dropin)
    lab_ssh(lab, "systemctl daemon-reload && systemctl restart sglang-demo.service")
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://{address}:{STANDIN_PORT}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the stand-in did not answer /health within 60 s of its restart")
        time.sleep(0.3)


def delivered(address: str) -> list[list[float]]:
    with urllib.request.urlopen(f"http://{address}:{STANDIN_PORT}/standin/delivered", timeout=30) as resp:
        return json.loads(resp.read())["requests"]


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a live process, from /proc (its rusage is ours only once it is reaped)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"ssh -L exited ({proc.returncode}) before its port answered")
        if time.monotonic() > deadline:
            raise RuntimeError(f"ssh -L: port {port} did not answer within {timeout:.0f} s")
        time.sleep(0.05)


def start_forward(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def openssh_version() -> str:
    return subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def one_load(lab: Lab, variant: Variant, address: str, args: argparse.Namespace) -> dict[str, Any]:
    before = len(await asyncio.to_thread(delivered, address))

    async def measure(url: str) -> tuple[Any, float, float, float]:
        config = LoadConfig(
            url=url,
            concurrency=(args.concurrency,),
            requests=args.requests,
            warmup=0,
            input_len=16,
            output_len=args.output_len,
        )
        lab0, cpu0, t = cgroup_cpu_s(lab), time.process_time(), time.perf_counter()
        [level] = await Runner(config).run()
        return level, time.process_time() - cpu0, cgroup_cpu_s(lab) - lab0, time.perf_counter() - t

    extra: dict[str, Any] = {}
    if variant.kind == "raw":
        level, cpu, lab_cpu, wall = await measure(f"http://{address}:{STANDIN_PORT}")
    elif variant.kind == "cockpit":  # exactly what `cockpit bench --host` opens
        host = SSHHost(HostConfig(name=lab.name))
        try:
            async with host.forward_port("127.0.0.1", STANDIN_PORT) as local:
                extra["forwarded_by"] = host.forwarded_by
                level, cpu, lab_cpu, wall = await measure(f"http://127.0.0.1:{local}")
        finally:
            await host.close()
    elif variant.kind == "asyncssh":
        host = TunedHost(HostConfig(name=lab.name), variant.tuning)
        try:
            async with host.forward_port("127.0.0.1", STANDIN_PORT) as local:
                extra["negotiated"] = host.negotiated()
                level, cpu, lab_cpu, wall = await measure(f"http://127.0.0.1:{local}")
        finally:
            await host.close()
    else:
        base, alias = ssh_base(lab)
        port = free_port()
        argv = [*base, *variant.ssh_options, "-N", "-o", "ExitOnForwardFailure=yes"]
        argv += ["-L", f"127.0.0.1:{port}:127.0.0.1:{STANDIN_PORT}", alias]
        proc = start_forward(argv)
        try:
            await asyncio.to_thread(wait_port, port, proc)
            child0 = proc_cpu_s(proc.pid)
            level, cpu, lab_cpu, wall = await measure(f"http://127.0.0.1:{port}")
            child = proc_cpu_s(proc.pid) - child0
            cpu += child
            extra["ssh_child_cpu_s"] = round(child, 3)
        finally:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    served = (await asyncio.to_thread(delivered, address))[before:]
    truth = sum(r[3] for r in served) / (max(r[2] for r in served) - min(r[0] for r in served)) if served else 0.0
    return {
        "measured_tok_s": round(level.output_tokens_per_s, 1),
        "truth_tok_s": round(truth, 1),
        "measured_over_truth": round(level.output_tokens_per_s / truth, 4) if truth else None,
        "requests": level.requests,
        "served": len(served),
        "errors": level.errors,
        "ttft_ms_p50": level.ttft_ms.get("p50"),
        "tpot_ms_mean": level.tpot_ms.get("mean"),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "lab_cpu_s": round(lab_cpu, 3),
        **extra,
        **({"first_errors": level.first_errors} if level.errors else {}),
    }


async def workload_load(lab: Lab, args: argparse.Namespace) -> dict[str, Any]:
    info = lab.info()
    assert info is not None
    address = info.address
    await asyncio.to_thread(configure_standin, lab, address, args.tokens_per_s, args.capacity)
    runs: dict[str, list[dict[str, Any]]] = {v.name: [] for v in LOAD_VARIANTS}
    failures: dict[str, str] = {}
    for r in range(args.runs):
        raw_this_round: float | None = None
        results: dict[str, dict[str, Any]] = {}
        for variant in rotated(LOAD_VARIANTS, r):
            if variant.name in failures:
                continue
            try:
                result = await one_load(lab, variant, address, args)
            except Exception as e:
                failures[variant.name] = f"{type(e).__name__}: {e}"
                print(f"  {variant.name}: FAILED {failures[variant.name]}", file=sys.stderr)
                continue
            result["round"] = r + 1
            results[variant.name] = result
            runs[variant.name].append(result)
            print(
                f"round {r + 1} {variant.name}: measured {result['measured_tok_s']:.0f}, truth "
                f"{result['truth_tok_s']:.0f} tok/s, cpu {result['cpu_s']:.1f} s, errors {result['errors']}",
                file=sys.stderr,
            )
        if "raw socket" in results:
            raw_this_round = results["raw socket"]["measured_tok_s"]
            for result in results.values():
                result["over_raw"] = round(result["measured_tok_s"] / raw_this_round, 4)
    variants: dict[str, Any] = {}
    for v in LOAD_VARIANTS:
        if not runs[v.name]:
            variants[v.name] = {"failed": failures.get(v.name, "no run")}
            continue
        variants[v.name] = {
            "kind": v.kind,
            "options": v.tuning,
            **summary(runs[v.name]),
            "runs": runs[v.name],
            **({"failed_later": failures[v.name]} if v.name in failures else {}),
        }
        over_raw = [x["over_raw"] for x in runs[v.name] if "over_raw" in x]
        if over_raw and v.kind != "raw":
            variants[v.name]["within_5pct_of_raw"] = statistics.median(over_raw) >= 0.95
    return {
        "concurrency": args.concurrency,
        "requests": args.requests,
        "output_len": args.output_len,
        "input_len": 16,
        "standin": {"tokens_per_s": args.tokens_per_s, "capacity": args.capacity, "listen": "0.0.0.0"},
        "raw_url": f"http://{address}:{STANDIN_PORT}",
        "variants": variants,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=500_000, help="flood lines to follow (default 500000)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each variant, interleaved (default 3)")
    parser.add_argument("--skip-follow", action="store_true", help="workload B only")
    parser.add_argument("--skip-load", action="store_true", help="workload A only")
    parser.add_argument("--concurrency", type=int, default=256, help="streams of the load run (default 256)")
    parser.add_argument("--requests", type=int, default=2048, help="requests per load run (default 2048: ~20 s)")
    parser.add_argument("--output-len", type=int, default=100, help="max_tokens per request (default 100)")
    parser.add_argument("--tokens-per-s", type=float, default=40, help="stand-in rate per stream (default 40)")
    parser.add_argument("--capacity", type=float, default=10_240, help="stand-in capacity, tok/s (default 10240)")
    parser.add_argument("--lab", help="use this running lab of yours and leave it up (default: a fresh one)")
    args = parser.parse_args()

    name = args.lab or f"bench-ssh-{secrets.token_hex(2)}"
    started = time.time()
    result: dict[str, Any] = {"benchmark": "ssh_transport", "lab": name, "cpus": os.cpu_count()}
    result["versions"] = {
        "asyncssh": asyncssh.__version__,
        "openssh_client": openssh_version(),
    }
    lab: Lab | None = None
    try:
        lab = await asyncio.to_thread(lab_up, name)
        result["versions"]["openssh_server"] = lab_ssh(lab, "ssh -V 2>&1").strip()
        result["server_ciphers"] = lab_ssh(lab, "sshd -T | grep -E '^(ciphers|macs) '").split("\n")
        if not args.skip_follow:
            result["follow"] = await workload_follow(lab, args)
        if not args.skip_load:
            result["load"] = await workload_load(lab, args)
    finally:
        if lab is not None and not args.lab:
            await asyncio.to_thread(lab.down)
    result["took_s"] = round(time.time() - started, 1)
    emit(result)


if __name__ == "__main__":
    asyncio.run(main())
