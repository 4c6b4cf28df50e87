"""The stand-in against the SGLang it imitates (issue 25): the same probes, in the real-SGLang lab,
of SGLang 0.5.23 itself at tp 1 (`sglang-real-tp1.service`) and of the stand-in at tp 1 beside it
(the demo unit's stand-in with `--tp-size 1 --enable-metrics`, on a port of its own): the health
endpoints' answers while each starts and once ready, what a generating check costs (its time, its
Prefill and access lines); /metrics' families the cockpit reads, with their types, help and labels,
and their habits (the spec gauges at 0.0, the warm-up counted, a request counted once it is done,
cached_tokens_total only from a hit); the process titles of the unit's cgroup and who writes a
rank's line; the journal's lines of a scheduler's kill -9, shape by shape and within 1.5 s of each
other. The stops it cannot afford live (each a real start of half a minute) compare the stand-in
with the real stops recorded in tests/data/sglang-0.5.23: under the default KillMode a stop ends as
a crash does, under KillMode=mixed it ends clean. Tp 2 compares the stand-in at tp 2 with the
recorded real tp 2 (titles, /metrics' labels).

A difference fails the test unless cockpit/lab/standin/limits.py lists it: a line's shape compares
with the variable parts taken out (stamps, PIDs, addresses, figures), then the limits' rewrites.
The real server starts once in this module (17 to 36 s here); the stand-in's units start in 9 to
12 s each (SGLang's own argument resolution first)."""

from __future__ import annotations

import collections
import contextlib
import difflib
import json
import math
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import pytest

from cockpit.lab.standin.limits import LIMITS
from cockpit.sglang.server import metrics
from cockpit.systemd.processes import MEMBERS
from tests.conftest import ROOT, LabHandle
from tests.lab.standin_units import standin_unit
from tests.lab.test_real_sglang_lab import START_S, cursor, end

pytestmark = pytest.mark.real_sglang

RECORDED = ROOT / "tests" / "data" / "sglang-0.5.23"
REAL, REAL_PORT = "sglang-real-tp1.service", 30010
PROMPT = "what is the model ?"  # five words of the real model's tokenizer, five tokens of the stand-in
TOLERANCE_S = 1.5


# -- what each probe runs on the lab (its python3; the servers listen on its loopback) ------------

START_PROBE = r"""
import json, subprocess, sys, time, urllib.error, urllib.request
unit, port, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])

def ask(path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
            return f"{answer.status}, {len(answer.read())} B"
    except urllib.error.HTTPError as e:
        return f"{e.code}, {len(e.read())} B"
    except urllib.error.URLError as e:
        return "refused" if isinstance(e.reason, ConnectionRefusedError) else type(e.reason).__name__
    except OSError as e:
        return type(e).__name__

seen = {"/health": [], "/health_generate": []}
subprocess.run(["systemctl", "start", "--no-block", unit], check=True)
began = time.monotonic()
while time.monotonic() - began < limit:
    for path, said in seen.items():
        state = ask(path)
        if not said or said[-1] != state:
            said.append(state)
    if all(said[-1].startswith("200") for said in seen.values()):
        break
    if subprocess.run(["systemctl", "-q", "is-failed", unit]).returncode == 0:
        break
    time.sleep(0.2)
with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
    print(json.dumps({"seen": seen, "metrics": answer.read().decode()}))
"""

HEALTH_PROBE = r"""
import json, sys, time, urllib.error, urllib.request
port, paths = int(sys.argv[1]), sys.argv[2:]
out, began = [], time.time()
for path in paths:
    began = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
            status = answer.status
    except urllib.error.HTTPError as e:
        status = e.code
    out.append([path, status, time.monotonic() - began])
    time.sleep(0.3)
print(json.dumps({"began": began, "answers": out}))
"""

METRICS_PROBE = r"""
import json, sys, threading, time, urllib.request
port, prompt = int(sys.argv[1]), sys.argv[2]
url = f"http://127.0.0.1:{port}"

def metrics():
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        return answer.read().decode()

def complete(stream, tokens):
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True, "stream": stream}
    headers = {"Content-Type": "application/json"}
    return urllib.request.urlopen(urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), headers))

first_chunk, times = threading.Event(), {}
def stream():
    with complete(True, 64) as answer:
        answer.readline()
        first_chunk.set()
        answer.read()
    times["done"] = time.monotonic()
thread = threading.Thread(target=stream)
thread.start()
first_chunk.wait(30)
times["mid"] = time.monotonic()
mid = metrics()
thread.join()
first = metrics()
with complete(False, 8) as answer:
    answer.read()
ran = times["mid"] < times["done"]
print(json.dumps({"in flight": mid, "a new prompt": first, "its repeat": metrics(), "read while it ran": ran}))
"""

PROCESSES = MEMBERS + 'ps -o pid,ppid,rss,comm,args -p "$(paste -sd, "$procs")"\n'


# -- the servers ----------------------------------------------------------------------------


@dataclass
class Server:
    name: str  # "the real server", "the stand-in"
    unit: str
    port: int
    starting: dict[str, list[str]]  # each health endpoint's answers from the start to ready, each change once
    at_ready: str  # /metrics as soon as both endpoints answered 200


def start(lab: LabHandle, name: str, unit: str, port: int) -> Server:
    """Start the unit under START_PROBE: /health and /health_generate asked every 0.2 s from
    `systemctl start` until both answer 200."""
    out = lab.ssh("python3", "-c", START_PROBE, unit, str(port), str(START_S), timeout=START_S + 60)
    told = json.loads(out.stdout)
    return Server(name, unit, port, told["seen"], told["metrics"])


def wait_ready(lab: LabHandle, port: int) -> None:
    """Until /ready answers 200, asked on the lab every 0.2 s in one SSH session."""
    probe = (
        "import sys, time, urllib.request\n"
        f"for _ in range({START_S * 5}):\n"
        "    try:\n"
        f"        urllib.request.urlopen('http://127.0.0.1:{port}/ready', timeout=5); sys.exit(0)\n"
        "    except OSError:\n"
        "        time.sleep(0.2)\n"
        "sys.exit(1)\n"
    )
    assert lab.ssh("python3", "-c", probe, check=False, timeout=START_S + 60).returncode == 0, f"none ready on {port}"


def metrics_now(lab: LabHandle, port: int) -> str:
    probe = f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/metrics').read().decode())"
    return lab.ssh("python3", "-c", probe).stdout


def processes(lab: LabHandle, unit: str) -> str:
    """`ps -o pid,ppid,rss,comm,args` of the unit's cgroup, as the recordings hold it."""
    return lab.ssh("sh", "-c", PROCESSES, "sh", "", unit).stdout


@dataclass(frozen=True)
class Servers:
    """What the module's probes read: the real tp 1 and the stand-in at tp 1, each ready; the
    stand-in at tp 2 as it was once ready (its /metrics and `ps` of its cgroup); a ready stand-in
    at tp 1 under each KillMode, to stop."""

    real: Server
    standin: Server
    tp2_metrics: str
    tp2_processes: str
    to_stop: dict[str, str]  # KillMode -> unit


# The stand-in's units: the demo unit's text on ports of their own, never restarted. The one
# compared live is at tp 1 with the real server's flags that matter here; its cache serves 4 of
# the probe's 5-token prompt, what the real radix cache serves of a repeat.
STANDIN_TP1 = (
    "sglang-conform-tp1.service",
    30111,
    "--tp-size 1 --enable-metrics",
    "COCKPIT_STANDIN_PREFIX_CACHE_HIT=0.8",
)
STANDIN_TP2 = ("sglang-conform-tp2.service", 30112, "--tp-size 2 --enable-metrics", "")
TO_STOP = {
    "control-group": ("sglang-conform-stop-cg.service", 30113),
    "mixed": ("sglang-conform-stop-mixed.service", 30114),
}


@pytest.fixture(scope="module")
def servers(real_lab: LabHandle) -> Iterator[Servers]:
    """The real tp 1 started alone (it takes both cores for half a minute: its one start in this
    module), then the stand-in's four units at once (SGLang's own resolution of their flags takes
    most of their start)."""
    units = [STANDIN_TP1, STANDIN_TP2, *((unit, port, "--tp-size 1", "") for unit, port in TO_STOP.values())]
    with contextlib.ExitStack() as installed:
        for unit, port, flags, env in units:
            installed.enter_context(
                standin_unit(real_lab, unit, port, flags=flags, env=env, restart=False, start=False)
            )
        mixed = TO_STOP["mixed"][0]
        real_lab.ssh("mkdir", "-p", f"/etc/systemd/system/{mixed}.d")
        real_lab.ssh("tee", f"/etc/systemd/system/{mixed}.d/kill-mode.conf", input="[Service]\nKillMode=mixed\n")
        real_lab.ssh("systemctl", "daemon-reload")
        try:
            began = time.monotonic()
            real = start(real_lab, "the real server", REAL, REAL_PORT)
            real_s, began = time.monotonic() - began, time.monotonic()
            with ThreadPoolExecutor() as pool:
                standin = pool.submit(start, real_lab, "the stand-in", *STANDIN_TP1[:2])
                for unit, _, _, _ in units[1:]:
                    real_lab.ssh("systemctl", "start", unit)
                for readied in [pool.submit(wait_ready, real_lab, port) for _, port, _, _ in units[1:]]:
                    readied.result()
            print(
                f"the real tp 1 ready in {real_s:.0f} s, the stand-in's four units in {time.monotonic() - began:.0f} s"
            )
            tp2, port = STANDIN_TP2[:2]
            stops = {mode: unit for mode, (unit, _) in TO_STOP.items()}
            yield Servers(real, standin.result(), metrics_now(real_lab, port), processes(real_lab, tp2), stops)
        finally:
            end(real_lab, REAL)


# -- differences and the limits ----------------------------------------------------------------


def unlisted(differences: list[str]) -> list[str]:
    """The differences no limit names."""
    return [d for d in differences if not any(lim.differs and re.fullmatch(lim.differs, d) for lim in LIMITS)]


VARIABLE = (
    (r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "[T"),  # the stamp (a rank's ` TPn` is kept)
    (r"\b\d+\.\d+\.\d+\.\d+:\d+\b", "ADDR"),
    (r"\b(parent_pid|pid)=\d+", r"\1=N"),
    (r"process \[\d+\]", "process [N]"),
    (r"\b\d+\.\d+\b", "F"),
)


def message(entry: dict) -> str:
    said = entry.get("MESSAGE", "")
    return bytes(said).decode(errors="replace") if isinstance(said, list) else str(said)


def shape(entry: dict, unit: str) -> str:
    """A journal entry without what varies from run to run: `IDENTIFIER[COMM]: MESSAGE`, the stamp,
    PIDs, addresses, figures and the unit's name and description out, then the limits' rewrites."""
    said = message(entry).replace(unit, "UNIT")
    said = re.sub(r"^(Stopping|Stopped) UNIT - .*?(\.\.\.|\.)$", r"\1 UNIT\2", said)
    for pattern, replacement in VARIABLE:
        said = re.sub(pattern, replacement, said)
    said = f"{entry.get('SYSLOG_IDENTIFIER')}[{entry.get('_COMM')}]: {said}"
    for lim in LIMITS:
        if lim.rewrite:
            said = re.sub(*lim.rewrite, said)
    return said


@dataclass(frozen=True)
class Lines:
    """A probe's journal lines: shapes, and each one's seconds from the probe's moment."""

    shapes: list[str]
    at: list[float]


def lines(entries: list[dict], unit: str, since: float) -> Lines:
    """The entries' shapes and times, but systemd's SIGKILL of a process still dying when the main
    process went: a race either server may lose (one real kill -9 of three), in no recording."""
    kept = [
        e
        for e in entries
        if not re.fullmatch(rf"{re.escape(unit)}: Killing process \d+ \(.*\) with signal SIGKILL\.", message(e))
    ]
    return Lines([shape(e, unit) for e in kept], [int(e["__REALTIME_TIMESTAMP"]) / 1e6 - since for e in kept])


def compared(probe: str, real: Lines, standin: Lines) -> list[str]:
    """The differences of two probes' lines: a line one says and the other does not, and a line
    both say more than TOLERANCE_S apart."""
    out = []
    matcher = difflib.SequenceMatcher(None, real.shapes, standin.shapes, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out += [
                f"{probe}: `{real.shapes[i]}` {standin.at[j]:.1f} s in, the real server's {real.at[i]:.1f} s"
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
                if abs(standin.at[j] - real.at[i]) > TOLERANCE_S
            ]
            continue
        out += [f"{probe}: the real server says `{s}`, the stand-in does not" for s in real.shapes[i1:i2]]
        out += [f"{probe}: the stand-in says `{s}`, the real server does not" for s in standin.shapes[j1:j2]]
    return out


def entries_after(lab: LabHandle, unit: str, after: str) -> list[dict]:
    out = lab.ssh("journalctl", "-u", unit, "-o", "json", f"--after-cursor={after}").stdout
    return [json.loads(line) for line in out.splitlines()]


def recorded(name: str) -> list[dict]:
    return [json.loads(line) for line in (RECORDED / name).read_text().splitlines()]


# -- 1. health ---------------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_health_answers_while_starting_and_what_a_check_costs_once_ready(real_lab: LabHandle, servers: Servers) -> None:
    """While starting: nothing listens until the ranks are up (refused), then 503 with no body
    through the warm-up, then 200. Once ready: /health generates a token, as /health_generate
    does (0.5.23's default): a second or more each, and each a Prefill line of one token and an
    access line, in that order."""
    real, standin = servers.real, servers.standin
    differences = [
        f"while starting, {path}: the real server answered {real.starting[path]}, the stand-in {standin.starting[path]}"
        for path in real.starting
        if real.starting[path] != standin.starting[path]
    ]
    assert real.starting["/health"][-2:] == ["503, 0 B", "200, 0 B"], real.starting  # the probe saw the warm-up
    asked = ["/health", "/health", "/health", "/health_generate"]
    said = {}
    for server in (real, standin):
        before = cursor(real_lab, server.unit)
        told = json.loads(real_lab.ssh("python3", "-c", HEALTH_PROBE, str(server.port), *asked, timeout=120).stdout)
        real_lab.wait_for(
            lambda s=server, c=before: (
                sum('"GET /health' in message(e) for e in entries_after(real_lab, s.unit, c)) == len(asked)
            ),
            10,
            "the checks' access lines",
        )
        said[server.name] = (
            told["answers"],
            lines(entries_after(real_lab, server.unit, before), server.unit, told["began"]),
        )
    (real_answers, real_lines), (standin_answers, standin_lines) = said[real.name], said[standin.name]
    assert all(status == 200 and took >= 1.0 for _, status, took in real_answers), real_answers
    for (path, status, took), (_, real_status, real_took) in zip(standin_answers, real_answers, strict=True):
        if status != real_status or took < 1.0 or abs(took - real_took) > 0.5:
            differences.append(
                f"once ready, {path}: {status} in {took:.2f} s, the real server {real_status} in {real_took:.2f} s"
            )
    assert sum("Prefill batch, #new-seq: 1, #new-token: 1," in s for s in real_lines.shapes) == len(asked), real_lines
    differences += compared("once ready, the checks' lines", real_lines, standin_lines)
    assert unlisted(differences) == [], differences


# -- 2. /metrics -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    kind: str
    help: str
    labels: frozenset[tuple[str, ...]]  # each sample's label names
    ranks: frozenset[str]  # the tp_rank values its samples carry
    values: dict[str, float]  # each sample's labels but the model's name (`k=v,...`) -> its value


NO_FAMILY = Family("", "", frozenset(), frozenset(), {})


def families(text: str) -> dict[str, Family]:
    """Prometheus text by family (`sglang:NAME`): its TYPE and HELP, its samples."""
    kinds = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    found = {name: replace(NO_FAMILY, kind=kind, help=helps.get(name, "")) for name, kind in kinds.items()}
    for sample in metrics.samples(text):
        name = metrics.PREFIX + sample.name
        family = name if name in found else re.sub(r"_(bucket|sum|count|created)$", "", name)
        if family not in found:
            continue
        key = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if k != "model_name")
        old = found[family]
        found[family] = replace(
            old,
            labels=old.labels | {tuple(sorted(sample.labels))},
            ranks=old.ranks | ({sample.labels["tp_rank"]} if "tp_rank" in sample.labels else set()),
            values={**old.values, key: sample.value},
        )
    return found


def rewritten(text: str, value: str, without: str = "", only: str = "") -> str:
    """The text with `value` for every sample (with `only`, for that family's alone), and no line
    of the family `without`."""
    out = []
    for line in text.splitlines():
        if without and re.match(rf"(# \w+ )?{re.escape(without)}[{{ ]", line):
            continue
        if line.startswith(metrics.PREFIX) and (not only or re.match(rf"{re.escape(only)}[{{ ]", line)):
            line = f"{line.rsplit(' ', 1)[0]} {value}"
        out.append(line)
    return "\n".join(out) + "\n"


def read_by_the_cockpit(text: str) -> set[str]:
    """The families whose absence, or whose value alone, changes what the cockpit makes of
    /metrics (cockpit.sglang.server.metrics.reading, and the counters an experiment keeps): found by
    trying each, so the set follows the reader."""
    ones, zeros = rewritten(text, "1.0"), rewritten(text, "0.0")
    return {
        name
        for name in families(text)
        if metrics.reading(rewritten(ones, "1.0", without=name), 0) != metrics.reading(ones, 0)
        or metrics.reading(rewritten(zeros, "1.0", only=name), 0) != metrics.reading(zeros, 0)
        or metrics.counters(rewritten(ones, "1.0", without=name)) != metrics.counters(ones)  # an experiment's
    }


def compare_families(moment: str, real: str, standin: str, read: set[str]) -> list[str]:
    """What differs at one moment: a family one server exports and the other does not, its type,
    help, label names or ranks, and the spec gauges' values (0.0 on a plain server). A family
    only the real server exports is named by whether the cockpit reads it."""
    theirs, ours = families(real), families(standin)
    out = []
    for name in sorted(set(theirs) | set(ours)):
        if name not in ours:
            out.append(
                f"{moment}: {name}: exported by the real server, not by the stand-in"
                if name in read
                else f"unread family {name}: the real server exports it, the stand-in does not"
            )
            continue
        if name not in theirs:
            out.append(f"{moment}: {name}: exported by the stand-in, not by the real server")
            continue
        for what in ("kind", "help", "labels", "ranks"):
            mine, real_one = getattr(ours[name], what), getattr(theirs[name], what)
            if mine != real_one:
                out.append(f"{moment}: {name}'s {what}: {mine}, the real server's {real_one}")
        if name.startswith("sglang:spec_") and sorted(ours[name].values.values()) != sorted(
            theirs[name].values.values()
        ):
            out.append(f"{moment}: {name}: {ours[name].values}, the real server's {theirs[name].values}")
    return out


COUNTERS = ("sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_requests_total")


def growth(before: str, after: str) -> dict[str, dict[str, float]]:
    """Each token counter's growth from `before` to `after`, sample by sample."""
    then, now = families(before), families(after)
    return {
        name: {k: v - then.get(name, NO_FAMILY).values.get(k, 0.0) for k, v in now[name].values.items()}
        for name in COUNTERS
        if name in now
    }


@pytest.mark.timeout(600)
def test_metrics_the_cockpit_reads_and_their_habits(real_lab: LabHandle, servers: Servers) -> None:
    """At ready, with a request in flight, after a new prompt and after its repeat: every family
    the cockpit reads, with its type, help and labels, the spec gauges at 0.0 on a plain server,
    the warm-up already counted and a request counted only once it is done, cached_tokens_total
    only from the first hit; at tp 2, the recorded real tp 2 against the stand-in at tp 2."""
    real, standin = servers.real, servers.standin
    said = {
        s.name: json.loads(real_lab.ssh("python3", "-c", METRICS_PROBE, str(s.port), PROMPT, timeout=120).stdout)
        for s in (real, standin)
    }
    theirs, ours = said[real.name], said[standin.name]
    assert theirs["read while it ran"] and ours["read while it ran"], (theirs, ours)  # a request did run
    read = read_by_the_cockpit(theirs["its repeat"])
    assert {"sglang:num_running_reqs", "sglang:prompt_tokens_total", "sglang:cached_tokens_total"} <= read, read
    assert {"sglang:generation_tokens_total", "sglang:num_requests_total"} <= read, read
    assert "sglang:cached_tokens_total" not in families(real.at_ready), real.at_ready
    differences = compare_families("at ready", real.at_ready, standin.at_ready, read)
    for moment in ("in flight", "a new prompt", "its repeat"):
        differences += compare_families(moment, theirs[moment], ours[moment], read)
    counted = {
        "while it ran": (growth(real.at_ready, theirs["in flight"]), growth(standin.at_ready, ours["in flight"])),
        "once done": (
            growth(theirs["in flight"], theirs["a new prompt"]),
            growth(ours["in flight"], ours["a new prompt"]),
        ),
    }
    for moment, (real_growth, standin_growth) in counted.items():
        if standin_growth != real_growth:
            differences.append(f"counted {moment}: {standin_growth}, the real server's {real_growth}")
    streamed = counted["once done"][0]["sglang:generation_tokens_total"]
    assert streamed["engine_type=unified,is_streaming=true"] == 64, streamed  # the real server counted the stream
    differences += compare_families(
        "at tp 2", (RECORDED / "real-tp2-metrics.txt").read_text(), servers.tp2_metrics, read
    )
    assert unlisted(differences) == [], differences


# -- 3. titles ---------------------------------------------------------------------------------

SHAPELESS = ((r" -m \S+ .*", " -m MODULE FLAGS"), (r"main\(\d+\)", "main(N)"))  # the main's module, an fd


def titles(ps: str) -> collections.Counter[tuple[str, str, str]]:
    """The cgroup's processes as (whose child, comm, command line), PIDs left out: the main process
    (systemd's child) with its module and flags taken out, the resource tracker with its fd."""
    rows = [line.split(None, 4) for line in ps.splitlines() if line.split()[:1] not in ([], ["PID"], ["#"])]
    rows = [row for row in rows if not row[0].startswith("#")]
    [main] = [pid for pid, ppid, *_ in rows if ppid == "1"]
    out: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for pid, ppid, _, comm, args in rows:
        args = args.strip()
        for pattern, replacement in SHAPELESS:
            args = re.sub(pattern, replacement, args)
        out["systemd's" if pid == main else "the main process's" if ppid == main else ppid, comm, args] += 1
    return out


def compare_titles(moment: str, real: str, standin: str) -> list[str]:
    theirs, ours = titles(real), titles(standin)
    return [f"{moment}: the real server's cgroup holds {t}, the stand-in's does not" for t in theirs - ours] + [
        f"{moment}: the stand-in's cgroup holds {t}, the real server's does not" for t in ours - theirs
    ]


def writer(lab: LabHandle, unit: str, text: str) -> tuple[str, str]:
    """SYSLOG_IDENTIFIER and _COMM of the running start's first line holding `text`."""
    invocation = lab.ssh("systemctl", "show", "-p", "InvocationID", "--value", unit).stdout.strip()
    out = lab.ssh("journalctl", "-u", unit, f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "json").stdout
    entry = next(e for e in map(json.loads, out.splitlines()) if text in message(e))
    return entry.get("SYSLOG_IDENTIFIER"), entry.get("_COMM")


@pytest.mark.timeout(300)
def test_process_titles_and_who_writes_a_ranks_lines(real_lab: LabHandle, servers: Servers) -> None:
    """The cgroup of each server at tp 1 (the recorded real tp 2 against the stand-in at tp 2):
    `sglang::scheduler` at tp 1 and `sglang::scheduler_TPn` above, `sglang::detokenizer`, each a
    command line of its title alone and a `comm` of its first 15 bytes, multiprocessing's resource
    tracker beside them; and a rank's start-up line in the journal as its scheduler writes it."""
    real, standin = servers.real, servers.standin
    real_ps, standin_ps = processes(real_lab, real.unit), processes(real_lab, standin.unit)
    assert ("the main process's", "sglang::schedul", "sglang::scheduler") in titles(real_ps), real_ps
    differences = compare_titles("at tp 1", real_ps, standin_ps)
    differences += compare_titles("at tp 2", (RECORDED / "real-tp2-processes.txt").read_text(), servers.tp2_processes)
    rank_line = "Load weight begin."
    theirs, ours = writer(real_lab, real.unit, rank_line), writer(real_lab, standin.unit, rank_line)
    if ours != theirs:
        differences.append(f"`{rank_line}` is written by {ours}, the real server's by {theirs}")
    assert unlisted(differences) == [], differences


# -- 4. a child's death -------------------------------------------------------------------------

KILL = (
    'main=$(systemctl show -p MainPID --value "$1"); rank=$(pgrep -P "$main" -f "^sglang::scheduler"); '
    'date +%s.%N; kill -9 "$rank"'
)


def ended(lab: LabHandle, unit: str, after: str) -> list[dict]:
    """The unit's lines since `after`, once systemd has said how it ended."""
    found: list[dict] = []

    def over() -> bool:
        found[:] = entries_after(lab, unit, after)
        return any(re.search(r"(Failed with result|Deactivated successfully|Succeeded)", message(e)) for e in found)

    lab.wait_for(over, 60, f"{unit} to end")
    return found


@pytest.mark.timeout(300)
def test_the_lines_of_a_schedulers_death(real_lab: LabHandle, servers: Servers) -> None:
    """kill -9 of the scheduler of a ready server: within a second the children's watchdog says
    it crashed with exit code -9 and SIGQUITs the server, which says so, sleeps 5 s for its crash
    diagnostics, finds no live scheduler, kills its tree and itself; systemd: killed 9/KILL,
    failed (tests/data/sglang-0.5.23/real-tp1-kill9-scheduler.jsonl). Last on these servers."""
    said = {}
    for server in (servers.real, servers.standin):
        before = cursor(real_lab, server.unit)
        at = float(real_lab.ssh("sh", "-c", KILL, "sh", server.unit).stdout)
        said[server.name] = lines(ended(real_lab, server.unit, before), server.unit, at)
    real, standin = said["the real server"], said["the stand-in"]
    assert any("crashed with exit code -9. Triggering SIGQUIT" in s for s in real.shapes), real
    assert unlisted(compared("a scheduler's kill -9", real, standin)) == [], (real, standin)


# -- 5. stops -----------------------------------------------------------------------------------

# The stop's moment after the warm-up, modulo the tokenizer manager's 5 s looks for a SIGTERM: how
# long a stop takes, and whether a stop that kills the ranks too is seen as a crash first, hangs on
# where in those 5 s it comes. The recorded real stops came 2 to 3 s before a look (under
# KillMode=mixed they took 2.0 to 3.5 s); so does this one.
PHASE_S = 2.5


def stop_at_phase(lab: LabHandle, unit: str) -> list[dict]:
    """`systemctl stop` PHASE_S after a look of the sigterm watchdog (which looks every 5 s from the
    warm-up's /model_info); the unit's lines from then to its end."""
    invocation = lab.ssh("systemctl", "show", "-p", "InvocationID", "--value", unit).stdout.strip()
    out = lab.ssh("journalctl", "-u", unit, f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "json").stdout
    warm_up = next(
        int(e["__REALTIME_TIMESTAMP"]) / 1e6
        for e in map(json.loads, out.splitlines())
        if '"GET /model_info ' in message(e)
    )
    before = cursor(lab, unit)
    time.sleep(math.fmod(PHASE_S - (time.time() - warm_up), 5.0) % 5.0)
    lab.ssh("systemctl", "stop", unit, timeout=60)
    return ended(lab, unit, before)


def from_stopping(entries: list[dict], unit: str) -> Lines:
    """The lines of a stop from systemd's `Stopping` line, the probe's moment, which is left out: the
    server's first line comes within a millisecond of it, before it or after (journald reads the
    two from two sockets)."""
    [stopping] = [e for e in entries if message(e).startswith("Stopping ")]
    return lines([e for e in entries if e is not stopping], unit, int(stopping["__REALTIME_TIMESTAMP"]) / 1e6)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("kill_mode", "recording"),
    [("control-group", "real-tp1-stop.jsonl"), ("mixed", "real-tp1-stop-killmode-mixed.jsonl")],
)
def test_a_stop_ends_as_the_recorded_real_stops_did(
    real_lab: LabHandle, servers: Servers, kill_mode: str, recording: str
) -> None:
    """Under the default KillMode=control-group every process gets the SIGTERM: the scheduler dies
    of it, the watchdog takes that for a crash, and the server ends failed, Result=signal, 9/KILL,
    about 6 s after the stop (13 of 13 real stops); under KillMode=mixed only the main process
    gets it, drains, lets its ranks end and exits 0: inactive, success, 2 to 3.5 s."""
    real = from_stopping(recorded(recording), "sglang-real-tp1.service")
    unit = servers.to_stop[kill_mode]
    standin = from_stopping(stop_at_phase(real_lab, unit), unit)
    assert unlisted(compared(f"a stop under KillMode={kill_mode}", real, standin)) == [], (real, standin)
