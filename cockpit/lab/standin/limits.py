"""Where the stand-in knowingly differs from a real SGLang 0.5.23, and why.

The stand-in keeps what a CPU cannot show (eight ranks, GPU memory, a 1T model's load times, an
NCCL hang, a launch over nodes); where it imitates the real server it must agree with it. The
conformance test (tests/lab/test_standin_conformance_lab.py) runs the same probes against the
real server of the real-SGLang lab and the stand-in beside it, and fails on every difference
that no entry here names: an entry's `differs` matches the differences a probe reports (by their
names, `re.fullmatch`), its `rewrite` is applied to both servers' journal lines before they are
compared. An entry with neither is a difference no probe sees (a CPU cannot show it, or the
probes do not reach it), listed so that a reader knows it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    what: str
    why: str
    differs: str = ""  # a regex over the names of the differences the probes report
    rewrite: tuple[str, str] | None = None  # (regex, replacement) for both servers' lines


LIMITS = (
    Limit(
        "batch lines say `cuda graph:`",
        "the stand-in imitates a GPU server (eight H200s, CUDA graph capture lines), whose Prefill and Decode "
        "lines say `cuda graph: True`; the real server of the lab runs on the CPU and says `cpu graph: False`",
        rewrite=(r"\b(?:cuda|cpu) graph: (?:True|False)", "GRAPH graph: B"),
    ),
    Limit(
        "batch lines are written by the main process",
        "the stand-in's engine is one loop in its main process for every rank, so its Prefill and Decode "
        "lines carry the main process's _PID and _COMM (`python`), where rank 0's scheduler writes SGLang's "
        "(`sglang::schedul`); the cockpit reads a line's rank from its prefix, never from its writer",
        rewrite=(r"^python\[python\]: (\[T\] (?:Prefill|Decode) batch)", r"python[sglang::schedul]: \1"),
    ),
    Limit(
        "families the cockpit does not read",
        "of the real server's 81 to 83 /metrics families the stand-in exports those the cockpit reads "
        "(cockpit/sglang/server/metrics.py, an experiment's counters among them), with the same type, help, labels and "
        "habits, and cache_hit_rate beside them; the others (latency histograms, memory, start-up and stage "
        "figures) would be numbers it makes up, shown nowhere",
        differs=r"unread family sglang:\w+: the real server exports it, the stand-in does not",
    ),
    Limit(
        "no radix cache",
        "its prefix cache serves COCKPIT_STANDIN_PREFIX_CACHE_HIT of every prompt, new or repeated, so that a "
        "load run's hit rate is set, not drawn from the runner's prompts; the real radix cache serves what an "
        "earlier prompt left (4 of a 5-token prompt's repeat, none of a new one)",
        differs=r"a new prompt: sglang:cached_tokens_total: exported by the stand-in, not by the real server",
    ),
    Limit(
        "eight ranks, GPU memory, a large model's load times",
        "what a CPU cannot show: the stand-in's ranks and their GPU memory are what its flags and "
        "COCKPIT_STANDIN_STARTUP_S say (the lab's nvidia-smi is a stand-in too); the real tp 1 of the lab loads "
        "a 2-layer random model on the CPU",
    ),
    Limit(
        "imports take under a second",
        "the real server imports for 14 to 36 s before its first rank line (the lab's CPU; a GPU host is alike), "
        "the stand-in at once (after SGLang's own argument resolution where it imports, about 7 s): every "
        "start of it would cost that much more; the timeline's imports phase is tested on the real tp 1",
    ),
    Limit(
        "start-up lines the cockpit reads nothing from",
        "the stand-in prints every start-up line the cockpit reads (cockpit/sglang/server/logparse.py), not "
        "`Memory baseline taken`, the radix cache's `Init Unified Radix Cache` and `Tree cache initialized`, "
        "the flags' deprecation warnings, nor what the lab's CPU host adds: Python warnings (AWQ, GGUF, "
        "Triton), `Ignore import error when loading sglang.srt.models...` for the packages the CPU venv lacks, "
        "thread binding and c10d's hostname",
    ),
    Limit(
        "an NCCL hang and a lost node",
        "what a CPU cannot show: `cockpit lab hang` blocks every rank as a collective whose peers never come "
        "does, and a launch over nodes (nodes.py) loses a node as NCCL does; the real tp 2 on the CPU uses "
        "gloo, whose peer's death is a `Connection reset by peer` in the other rank at once "
        "(tests/data/sglang-0.5.23/real-tp2-kill9-scheduler-tp1.jsonl), not imitated",
    ),
    Limit(
        "a node of rank > 0 ends at once on SIGTERM",
        "0.5.23 there says it waits for rank 0's ShutdownReq; the stand-in's node ends with its ranks",
    ),
    Limit(
        "no py-spy dump in the crash diagnostics",
        "where ranks are still alive when the server's SIGQUIT handler has slept its 5 s (a hang ended by the "
        "watchdog, orphaned ranks), SGLang runs py-spy on them and logs their stacks; the stand-in logs nothing "
        "there (`cockpit stacks` reads them with the real py-spy)",
    ),
    Limit(
        "the kill-detokenizer fault is a release before 0.5.12",
        "`cockpit lab kill-detokenizer` leaves a server that lives on without its detokenizer (sglang #21471), "
        "the cockpit's case for older releases; 0.5.23's watchdog would end it, so the fault takes the "
        "detokenizer out of the watch",
    ),
    Limit(
        "orphaned ranks outlive the kill",
        "with COCKPIT_STANDIN_ORPHANS the ranks that leave the cgroup are spared by the server's "
        "kill_process_tree, which would reach them by their parent: the fault makes the survivors a "
        "reparented scheduler leaves",
    ),
    Limit(
        "no native /generate; a token is a word",
        "the stand-in serves the OpenAI API the cockpit's load runs use, and counts a prompt's tokens as its "
        "words (the lab's real model has a word-level tokenizer too)",
    ),
    Limit(
        "SIGINT ends it at once",
        "Ctrl+C (and a test's teardown) ends the stand-in without uvicorn's shutdown lines; the real server's "
        "SIGINT is not recorded",
    ),
)
