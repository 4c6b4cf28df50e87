"""Status refresh latency and journal follow throughput against the lab (issue 3).

- status: `systemctl show` through the command channel (reused connection, no login shell
  per call) against a fresh exec channel per call (`conn.run`), p50/p95 over 200 polls.
  Target: p50 under 30 ms.
- follow: a unit logs N lines as fast as it can; then, alternating, ROUNDS times each:
  - the follower reads them all through its SSH connection and parses them (`JournalFollower`,
    the app's own reader, from `-n all --follow`);
  - OpenSSH runs the follower's very command (`follow_argv(UNIT, "-n", "all")`, the export
    format, buffering included) through `ssh -F <the lab's ssh_config> LAB`, live, and this
    process only counts the entries that arrive (their blank lines), until all N are in: the
    anchor. `ratio_vs_openssh` is the
    median of the rounds' ratios (each pair ran back to back, under the same load). Target: the
    follower at least as fast (ratio >= 1.0).
  - `journalctl -u UNIT -o json --all` to /dev/null timed inside the host is printed as well,
    once: a costlier command than the follower's (every field), kept for comparison with older
    figures only.
Prints JSON.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import time

from _common import emit, lab_up, pct

from cockpit.config import HostConfig
from cockpit.lab.lab import Lab
from cockpit.remote.ssh import SSHHost
from cockpit.systemd import journal, status

LAB = "cockpit-bench"
FLOOD_LINES = 200_000
ROUNDS = 5
FLOOD = (
    "import sys\nw = sys.stdout.write\n"
    f"for i in range({FLOOD_LINES}):\n"
    "    w(f'[2026-11-30 10:00:00 TP0] Decode batch, #running-req: 32, #token: {i}, token usage: 0.13, "
    "cuda graph: True, gen throughput (token/s): 4351.94, #queue-req: 3\\n')\n"
)


async def status_latency(host: SSHHost) -> dict:
    await status.fetch(host, "sglang-demo.service")
    query, run = [], []
    for _ in range(200):
        t = time.perf_counter()
        await status.fetch(host, "sglang-demo.service")
        query.append((time.perf_counter() - t) * 1000)
    argv = ["systemctl", "show", "--timestamp=unix", "-p", ",".join(status.PROPERTIES), "sglang-demo.service"]
    for _ in range(100):
        t = time.perf_counter()
        await host.run(argv)
        run.append((time.perf_counter() - t) * 1000)
    return {
        "command_channel_ms": {"p50": round(pct(query, 50), 2), "p95": round(pct(query, 95), 2)},
        "exec_per_call_ms": {"p50": round(pct(run, 50), 2), "p95": round(pct(run, 95), 2)},
        "target_p50_ms": 30,
        "met": pct(query, 50) < 30,
    }


async def follow_throughput(host: SSHHost, lab: Lab) -> dict:
    await host.run(["tee", "/tmp/flood.py"], input=FLOOD.encode())
    await host.run(["systemctl", "reset-failed", "flood"], timeout=10)
    result = await host.run(
        [
            "systemd-run",
            "--unit=flood",
            "--wait",
            "-p",
            "LogRateLimitIntervalSec=0",
            "/usr/bin/python3",
            "/tmp/flood.py",
        ],
        timeout=300,
    )
    assert result.ok, result.error_text
    # Let journald finish writing what it had buffered before timing either reader.
    await asyncio.sleep(2)
    timing = await host.run(
        [
            "sh",
            "-c",
            "s=$(date +%s.%N); journalctl -u flood -o json --all >/dev/null; "
            'e=$(date +%s.%N); echo "$s $e"; journalctl -u flood -q | wc -l',
        ]
    )
    start, end, count = timing.text.split()
    baseline_rate = int(count) / (float(end) - float(start))
    follower, openssh = [], []
    for _ in range(ROUNDS):
        follower.append(await follower_rate(host, int(count)))
        openssh.append(await asyncio.to_thread(openssh_rate, lab, int(count)))
    # Each round's pair ran back to back, under the machine's load of that moment: their ratio.
    ratio = statistics.median(f / o for f, o in zip(follower, openssh, strict=True))
    return {
        "entries": int(count),
        "rounds": ROUNDS,
        "follower_entries_per_s": [round(r) for r in follower],
        "openssh_same_command_entries_per_s": [round(r) for r in openssh],
        "ratio_vs_openssh": round(ratio, 3),
        "ratio_vs_openssh_each_round": [round(f / o, 3) for f, o in zip(follower, openssh, strict=True)],
        "target_ratio_vs_openssh": 1.0,
        "met": ratio >= 1.0,
        "journalctl_all_fields_devnull_in_host_entries_per_s": round(baseline_rate),
    }


async def follower_rate(host: SSHHost, count: int) -> float:
    """Entries a second the app's follower reads and parses the unit's journal at, from the top."""
    got = 0
    done = asyncio.Event()

    def on_batch(entries) -> None:
        nonlocal got
        got += len(entries)
        if got >= count:
            done.set()

    follower = journal.JournalFollower(host, "flood.service", backlog=0)
    t = time.perf_counter()
    task = asyncio.create_task(follower.run(on_batch))
    await asyncio.wait_for(done.wait(), 600)
    elapsed = time.perf_counter() - t
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return got / elapsed


def openssh_rate(lab: Lab, count: int) -> float:
    """Entries a second OpenSSH delivers the follower's own command's output at, counted here
    (an export entry ends with a blank line; the flood's lines hold no field sent as bytes)."""
    argv = lab.ssh_argv("root", journal.follow_argv("flood.service", "-n", "all"))
    t = time.perf_counter()
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL) as ssh:
        assert ssh.stdout is not None
        got, last = 0, b""
        while got < count and (chunk := ssh.stdout.read1(1 << 20)):
            got += (last + chunk).count(b"\n\n")
            last = chunk[-1:]
        elapsed = time.perf_counter() - t
        ssh.kill()
    return got / elapsed


async def main() -> None:
    lab = lab_up(LAB)
    host = SSHHost(HostConfig(name=LAB))
    try:
        deadline = time.monotonic() + 30
        while True:
            st = await status.fetch(host, "sglang-demo.service")
            if st.active_state == "active" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.3)
        emit(
            {
                "benchmark": "remote",
                "status_refresh": await status_latency(host),
                "journal_follow": await follow_throughput(host, lab),
            }
        )
    finally:
        await host.close()
        lab.down()


if __name__ == "__main__":
    asyncio.run(main())
