"""SGLang log lines -> typed events: decode and prefill stats, start-up milestones, readiness,
and the markers of a crash or a hang.

It runs on every journal line of a busy server, so a line pays for a regex only once it is
known to be one of ours: the prefix ends at the first `] `, and the message must then start
with one of a handful of fixed strings (one `str.startswith` with a tuple, in C). Everything
else returns None after those two calls.

The formats, from the source of SGLang 0.5.9 and 0.5.23 and the 0.4.x lines in the fixtures:
- prefix `[%Y-%m-%d %H:%M:%S{.mmm}{ DPn}{ PPn}{ ATTN_CPn}{ MOE_DPn}{ TPn}{ EPn}] `; 0.5.9's
  argument checks add `LEVEL file.py:LINE: ` after it;
- `Decode batch{ [iter]}, key: value, ...` (0.4.x: `Decode batch.` and no accept rate), with
  the pool's keys varying by model (`#token`/`token usage`, or `#full token`/`full token
  usage` for hybrid models) and optional keys (accept len/rate, disaggregation queues, MFU);
- `Prefill batch{ [iter]}, ...` likewise (0.4.x: `Prefill batch.`, ending at `#queue-req`);
  a graph's key names the device (`cuda graph`, `cpu graph` on a CPU, `npu graph`);
- start-up facts: 0.5.23's main process prints its arguments as a dict (`server_args={'model_path':
  ...}`; older releases and the argument resolution `server_args=ServerArgs(model_path=...)`), each
  rank its KV cache (`KV Cache is allocated. dtype: torch.bfloat16, #tokens: 16384, K size: 0.00
  GB, V size: 0.00 GB`), and the main process SGLang's own account of the start (`Engine startup
  timings (s): load_weight=0.04, ..., cuda_graph={prefill=0.00, ...}, tokenizer_e2e=9.40`).
Stats lines are therefore read as `key: value` pairs rather than matched field by field, so
an extra or reordered key never loses the line; every pair is kept in `fields`.

The events are plain (not frozen) slotted dataclasses: a frozen one sets each field through
`object.__setattr__`, which made building a decode event take three times as long.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from cockpit.traceback.grammar import RANKS, STAMP

CAPTURE_START = "Capture "  # `Capture cuda graph begin.`, 0.5.23's `Capture target decode CUDA graph begin.`
_STARTS = (
    "Decode batch",
    "Prefill batch",
    "The server is fired up",
    "Init torch distributed ",
    "Init parallel ",
    "Load weight ",
    "KV Cache is allocated",
    "Memory pool end",
    "Engine startup timings",
    "server_args=",
    CAPTURE_START,
    "max_total_num_tokens=",
    "Scheduler hit an exception",
    "Received sigquit",
    "SIGQUIT received",
    "Subprocess ",
    "kill_process_tree called",
    "Health check failed",
    "Initialization failed",
    "Watchdog timeout",
    "Scheduler watchdog timeout",
)
_LEVELS = ("INFO ", "WARNING ", "ERROR ", "DEBUG ", "CRITICAL ")
READY_TEXT = "The server is fired up and ready to roll!"  # http_server.py, every release
_HEAD = re.compile(rf"\[({STAMP}){RANKS}\] (?:([A-Z]+) ([\w.]+:\d+): )?")
_CAPTURE = re.compile(r"Capture (.+? graph) (begin|end)\b", re.IGNORECASE)
_ASSIGN = re.compile(r"([A-Za-z_][\w ]*?)=(\[[^\]]*\]|[^,\s]+(?: [A-Za-z]+\b)?)")
_TIMING = re.compile(r"(\w+)=(\d+(?:\.\d+)?)")
_GRAPH_TIMINGS = re.compile(r"cuda_graph=\{([^}]*)\}")
# A scalar argument of the server_args line, as a dict (`'tp_size': 1`) or as ServerArgs(tp_size=1):
# strings, numbers, None and booleans; lists and dicts are not read.
_ARGUMENT = re.compile(r"""(?:'(\w+)': |\b(\w+)=)('[^']*'|-?[\w.]+)(?=[,)}])""")


@dataclass(slots=True)
class LogPrefix:
    """What SGLang's logging puts before a message, and the message."""

    stamp: str  # the time as printed, in the host's local time
    rank: str  # "TP3", "DP1 TP3", or "" (a single rank prints none)
    level: str | None  # only 0.5.9's argument checks print a level and a source
    source: str | None  # "server_args.py:1835"
    message: str


def rank_order(rank: str) -> tuple[str, int]:
    """A sort key for rank labels: TP2 before TP10 ("" first)."""
    head = rank.rstrip("0123456789")
    tail = rank[len(head) :]
    return head, int(tail) if tail else -1


def split_prefix(line: str) -> LogPrefix | None:
    """The prefix of any SGLang log line (not only the ones `parse` turns into events)."""
    head = _HEAD.match(line, max(0, line.find("[")))
    if head is None:
        return None
    return LogPrefix(head.group(1), head.group(2)[1:], head.group(3), head.group(4), line[head.end() :].rstrip())


@dataclass(slots=True)
class DecodeStats:
    stamp: str  # the prefix's time, as printed (the host's local time)
    rank: str  # "TP3", "DP1 TP3", or "" (one rank)
    running_req: int
    queue_req: int
    gen_throughput: float  # tokens/s over the last log interval, all running requests
    tokens: int | None  # KV tokens in use (`#token`, or `#full token` on hybrid models)
    token_usage: float | None
    accept_len: float | None  # speculative decoding only
    accept_rate: float | None  # from 0.5.x; 0.4.x printed only the length
    graph: bool | None  # ran as a CUDA (or CPU/NPU) graph
    fields: dict[str, str] = field(compare=False)


@dataclass(slots=True)
class PrefillStats:
    stamp: str
    rank: str
    new_seq: int
    new_token: int
    cached_token: int
    running_req: int
    queue_req: int
    token_usage: float | None
    input_throughput: float | None  # absent in 0.4.x
    graph: bool | None
    fields: dict[str, str] = field(compare=False)


@dataclass(slots=True)
class Ready:
    """`The server is fired up and ready to roll!`: the server answers requests."""

    stamp: str
    rank: str


MilestoneKind = Literal[
    "init_begin",
    "init_end",
    "load_weight_begin",
    "load_weight_end",
    "kv_cache_allocated",
    "memory_pool_end",
    "graph_capture_begin",
    "graph_capture_end",
    "max_total_num_tokens",
    "engine_timings",
    "server_args",
]


@dataclass(slots=True)
class Milestone:
    """A start-up step or fact; `values` holds the line's `key=value` pairs (`avail mem` -> `9.80
    GB`); the KV cache line's `key: value` pairs (`#tokens` -> `16384`); SGLang's own timings in
    seconds (`load_weight` -> `0.04`, `cuda_graph decode` -> `12.31`); the scalar arguments of the
    server_args line (`tp_size` -> `1`, `speculative_algorithm` -> `None`)."""

    stamp: str
    rank: str
    kind: MilestoneKind
    message: str
    values: dict[str, str] = field(compare=False)

    def number(self, key: str) -> float | None:
        """The leading number of a value: `number("avail mem")` -> 9.8."""
        raw = self.values.get(key)
        try:
            return float(raw.split(" ", 1)[0]) if raw else None
        except ValueError:
            return None


ErrorKind = Literal[
    "scheduler_exception",
    "sigquit",
    "child_crashed",
    "tree_killed",
    "health_check_failed",
    "initialization_failed",
    "watchdog_timeout",
]


@dataclass(slots=True)
class ErrorMarker:
    """A line that means the server is failing; a traceback often follows on the next lines."""

    stamp: str
    rank: str
    kind: ErrorKind
    message: str


LogEvent = DecodeStats | PrefillStats | Ready | Milestone | ErrorMarker

ERRORS: tuple[tuple[str, ErrorKind], ...] = (
    ("Scheduler hit an exception", "scheduler_exception"),
    ("Received sigquit", "sigquit"),  # the launch phase's handler (and to 0.5.19 the running one's)
    # 0.5.23's running phase: its handler, its SubprocessWatchdog's line (`crashed_child`), and the
    # kill of its own tree they end in (`kills_itself`); docs/facts.md (SGLang).
    ("SIGQUIT received", "sigquit"),
    ("Subprocess ", "child_crashed"),
    ("kill_process_tree called", "tree_killed"),
    ("Health check failed", "health_check_failed"),
    ("Initialization failed", "initialization_failed"),
    ("Watchdog timeout", "watchdog_timeout"),  # to 0.5.19: `Watchdog timeout (self.watchdog_timeout=300)`
    ("Scheduler watchdog timeout", "watchdog_timeout"),  # 0.5.23: `... (self.watchdog_timeout=300, self.soft=False)`
)
_CRASHED = re.compile(r"Subprocess (\S+) \(pid=\d+\) crashed with exit code (-?\d+)\.")
_KILLS_ITSELF = re.compile(r"kill_process_tree called: parent_pid=(\d+), include_parent=True, pid=\1\b")


def crashed_child(message: str) -> tuple[str, int] | None:
    """`Subprocess scheduler_0 (pid=489) crashed with exit code -9. ...` -> ("scheduler_0", -9):
    the child SGLang's watchdog found dead (its name in SGLang's list: `scheduler_N`, the Nth
    scheduler process, or `detokenizer`) and its exit code (minus the signal that killed it)."""
    m = _CRASHED.match(message)
    return (m.group(1), int(m.group(2))) if m else None


def kills_itself(message: str) -> bool:
    """`kill_process_tree called: parent_pid=P, include_parent=True, pid=P`: the server killing
    its own tree, itself included, as its SIGQUIT handler and a failed warm-up do. A graceful
    stop kills only its children (`include_parent=False`)."""
    return _KILLS_ITSELF.match(message) is not None


ENDING_KINDS: tuple[ErrorKind, ...] = ("sigquit", "child_crashed", "tree_killed")


def ends_server(event: LogEvent | None) -> bool:
    """Whether a line says the server is ending itself: its SIGQUIT handler's line (either
    release's wording), its watchdog's word of a dead child, or the kill of its own tree."""
    if not isinstance(event, ErrorMarker) or event.kind not in ENDING_KINDS:
        return False
    if event.kind == "child_crashed":
        return crashed_child(event.message) is not None  # not some other `Subprocess ...` line
    return event.kind != "tree_killed" or kills_itself(event.message)  # a graceful stop ends its children only


# The distributed set-up is `Init torch distributed begin.` / `... ends.` to 0.5.19 and `Init
# parallel begin.` / `Init parallel ends.` in 0.5.23; the KV cache line is 0.4.x's.
MILESTONES: tuple[tuple[str, MilestoneKind], ...] = (
    ("Init torch distributed begin", "init_begin"),
    ("Init torch distributed ends", "init_end"),
    ("Init parallel begin", "init_begin"),
    ("Init parallel ends", "init_end"),
    ("KV Cache is allocated", "kv_cache_allocated"),
    ("Load weight begin", "load_weight_begin"),
    ("Load weight end", "load_weight_end"),
    ("Memory pool end", "memory_pool_end"),
    ("max_total_num_tokens=", "max_total_num_tokens"),
    ("Engine startup timings", "engine_timings"),  # 0.5.23, the main process, once the ranks are up
    ("server_args=", "server_args"),
)


def parse(line: str) -> LogEvent | None:
    """The event a log line (a journal entry's MESSAGE) carries, or None for any other line."""
    end = line.find("] ")
    if end < 0 or not (line.startswith(_STARTS, end + 2) or line.startswith(_LEVELS, end + 2)):
        return None
    head = _HEAD.match(line, max(0, line.rfind("[", 0, end)))
    if head is None or not line.startswith(_STARTS, head.end()):
        return None
    stamp, rank = head.group(1), head.group(2)[1:]
    message = line[head.end() :].rstrip()
    if message.startswith("Decode batch"):
        return _decode(message, stamp, rank)
    if message.startswith("Prefill batch"):
        return _prefill(message, stamp, rank)
    if message.startswith(READY_TEXT):
        return Ready(stamp, rank)
    for marker, error in ERRORS:
        if message.startswith(marker):
            return ErrorMarker(stamp, rank, error, message)
    for marker, milestone in MILESTONES:
        if message.startswith(marker):
            return Milestone(stamp, rank, milestone, message, _values(milestone, message))
    capture = _CAPTURE.match(message)
    if capture is None:
        return None  # "Capture cuda graph bs [...]" and the like: not a milestone
    kind: MilestoneKind = "graph_capture_begin" if capture.group(2) == "begin" else "graph_capture_end"
    values = dict(_ASSIGN.findall(message), graph=capture.group(1))
    return Milestone(stamp, rank, kind, message, values)


def _values(kind: MilestoneKind, message: str) -> dict[str, str]:
    """The facts of a start-up line, each kind written its own way."""
    if kind == "kv_cache_allocated":  # `KV Cache is allocated. dtype: torch.bfloat16, #tokens: 16384, ...`
        return _pairs(message, message.find(". "))
    if kind == "engine_timings":
        graphs = _GRAPH_TIMINGS.search(message)
        if graphs is None:
            return dict(_TIMING.findall(message))
        rest = message[: graphs.start()] + message[graphs.end() :]
        return {**dict(_TIMING.findall(rest)), **{f"cuda_graph {k}": v for k, v in _TIMING.findall(graphs.group(1))}}
    if kind == "server_args":
        values: dict[str, str] = {}
        for quoted, bare, value in _ARGUMENT.findall(message):
            values.setdefault(quoted or bare, value.strip("'"))  # the first: a nested dict's key comes later
        return values
    return dict(_ASSIGN.findall(message))


def _pairs(message: str, skip: int) -> dict[str, str]:
    """`, key: value, key: value` after the first words (`Decode batch`, `Prefill batch`,
    `KV Cache is allocated.`), which end at `skip`."""
    if message.startswith(" [", skip):  # the iteration number of SGLANG_LOG_FORWARD_ITERS
        skip = message.find("]", skip) + 1
    fields = {}
    for part in message[skip + 2 :].rstrip(",").split(", "):
        key, sep, value = part.partition(": ")
        if sep:
            fields[key] = value
    return fields


def _graph(fields: dict[str, str]) -> bool | None:
    value = fields.get("cuda graph")
    if value is not None:
        return value == "True"
    for key, value in fields.items():  # "cpu graph", "npu graph", "musa graph"
        if key.endswith(" graph"):
            return value == "True"
    return None


def _float(fields: dict[str, str], *keys: str) -> float | None:
    for key in keys:
        if key in fields:
            try:
                return float(fields[key])
            except ValueError:
                return None
    return None


def _decode(message: str, stamp: str, rank: str) -> DecodeStats | None:
    f = _pairs(message, 12)
    try:
        running, queue = int(f["#running-req"]), int(f["#queue-req"])
        throughput = float(f["gen throughput (token/s)"])
        tokens = f.get("#token") or f.get("#full token")
        return DecodeStats(
            stamp,
            rank,
            running,
            queue,
            throughput,
            int(tokens) if tokens else None,
            _float(f, "token usage", "full token usage"),
            _float(f, "accept len"),
            _float(f, "accept rate"),
            _graph(f),
            f,
        )
    except (KeyError, ValueError):
        return None  # a decode line of a format this does not know: not one we can plot


def _prefill(message: str, stamp: str, rank: str) -> PrefillStats | None:
    f = _pairs(message, 13)
    try:
        return PrefillStats(
            stamp,
            rank,
            int(f["#new-seq"]),
            int(f["#new-token"]),
            int(f["#cached-token"]),
            int(f["#running-req"]),
            int(f["#queue-req"]),
            _float(f, "token usage", "full token usage"),
            _float(f, "input throughput (token/s)"),
            _graph(f),
            f,
        )
    except (KeyError, ValueError):
        return None
