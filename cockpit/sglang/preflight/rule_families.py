"""SGLang's start-up checks that the flags alone decide, beyond the EAGLE rule (rules.py).

Each `Rule` names the check as the release writes it: the function that raises, its file, the
text of the check (`statements`, as they read once `self.`/`cfg.` and spaces are dropped: the
tests find them in the real source of every release the rule claims), the exception, the flags.
A rule holds from `since` to the newest release read (0.5.23); before `since` the static layer
says nothing about it. Where the outcome also depends on the GPU or on the model (an attention
backend SGLang picks itself, a page size a model forces), the rule is `sure=False`: the static
layer says INFO ("the dry run decides"), never an error.

Every rule was checked against a real SGLang 0.5.23 resolution (prepare_server_args, resolve_once,
check_server_args): tests/data/dryrun/0.5.23-rule-*.json (benchmarks/check_dry_run_sglang.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cockpit.sglang.preflight.rules import Violation, release_tuple

S19 = "sglang/srt/arg_groups/validation_hook.py"  # check_server_args from 0.5.19
OLD = "sglang/srt/server_args.py"  # ServerArgs methods before 0.5.19
LORA = "sglang/srt/arg_groups/lora_hook.py"
SPEC = "sglang/srt/arg_groups/speculative_hook.py"
PARALLEL = "sglang/srt/arg_groups/parallel_hook.py"
KV = "sglang/srt/arg_groups/kv_cache_hook.py"
PD = "sglang/srt/arg_groups/pd_disaggregation_hook.py"
CHECK = (("0", OLD, "check_server_args"), ("0.5.19", S19, "check_server_args"))
CHECK_LORA = (("0", OLD, "check_lora_server_args"), ("0.5.19", LORA, "check_lora_server_args"))
RUNAI_SCHEMES = ("s3://", "gs://", "az://")  # utils/runai_utils.py SUPPORTED_SCHEMES
TRUE = (None, "true", "True", "1")


class Flags:
    """The given flags (canonical name -> value, None for a switch) with SGLang 0.5.23's defaults."""

    def __init__(self, given: Mapping[str, str | None]) -> None:
        self.given = given

    def has(self, name: str) -> bool:
        return name in self.given

    def on(self, name: str) -> bool:
        return name in self.given and self.given[name] in TRUE

    def text(self, name: str, default: str | None = None) -> str | None:
        return self.given.get(name, default) if name in self.given else default

    def number(self, name: str, default: int | None = None) -> int | None:
        value = self.given.get(name)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            return None  # argparse refuses it: the bad-type finding says so

    def real(self, name: str, default: float) -> float | None:
        value = self.given.get(name)
        if value is None:
            return default
        try:
            return float(value)
        except ValueError:
            return None

    @property
    def algorithm(self) -> str | None:
        """The speculative algorithm as resolved: upper case, NEXTN an alias of EAGLE."""
        algo = self.given.get("--speculative-algorithm")
        if not algo:
            return None
        algo = algo.upper()
        return "EAGLE" if algo == "NEXTN" else algo

    @property
    def attn_dp(self) -> tuple[int, int] | None:
        """(attention-DP width, DP replicas) after 0.5.23's handle_deprecated_dp_attention."""
        attn, dp = self.number("--attn-dp-size", 1), self.number("--dp-size", 1)
        if attn is None or dp is None:
            return None
        if self.on("--enable-dp-attention") and attn == 1:
            return dp, 1
        return attn, dp

    @property
    def lora(self) -> bool:
        """LoRA on: --enable-lora, or --lora-paths without --enable-lora false."""
        if self.has("--enable-lora"):
            return self.on("--enable-lora")
        return bool(self.given.get("--lora-paths"))

    def backends(self) -> set[str]:
        return {
            v
            for v in (
                self.text("--attention-backend"),
                self.text("--decode-attention-backend"),
                self.text("--prefill-attention-backend"),
            )
            if v
        }


@dataclass(frozen=True)
class Rule:
    name: str
    family: str
    since: str  # the oldest release whose source was read to hold it
    where: tuple[tuple[str, str, str], ...]  # (from release, file, function), oldest first
    statements: tuple[str, ...]  # the check's text in that function (normalized, see `normalize`)
    exception: str
    flags: tuple[str, ...]
    broken: Callable[[Flags], str | None]  # what is wrong, or None
    fix: str
    sure: bool = True  # False: GPU or model may change the outcome; INFO only

    def location(self, version: str) -> tuple[str, str]:
        """(file, function) holding the check in `version`."""
        v = release_tuple(version)
        found = self.where[0]
        for entry in self.where:
            if release_tuple(entry[0]) <= v:
                found = entry
        return found[1], found[2]

    def holds_for(self, version: str) -> bool:
        return release_tuple(version) >= release_tuple(self.since)


def normalize(text: str) -> str:
    """Source text without spaces and without the `self.` / `cfg.` / `server_args.` prefixes, so
    one statement reads the same in a ServerArgs method and in an arg_groups hook."""
    for prefix in ("self.", "cfg.", "server_args.", "view."):
        text = text.replace(prefix, "")
    return "".join(text.split())


def _served_colon(f: Flags) -> str | None:
    name = f.text("--served-model-name")
    if name and ":" in name and not name.lower().startswith(RUNAI_SCHEMES):
        return f"--served-model-name {name!r} holds a ':', which SGLang keeps for 'model:adapter'"
    return None


def _nnodes_tp(f: Flags) -> str | None:
    tp, pp, n = f.number("--tp-size", 1), f.number("--pp-size", 1), f.number("--nnodes", 1)
    if tp is None or pp is None or n is None or n < 1 or f.text("--ep-join-mode") == "scale":
        return None
    if (tp * pp) % n:
        return f"--tp-size {tp} x --pp-size {pp} is not divisible by --nnodes {n}"
    return None


def _nnodes_zero(f: Flags) -> str | None:
    if f.number("--nnodes") == 0 and f.text("--ep-join-mode") != "scale":
        return "--nnodes 0: the check takes --tp-size x --pp-size modulo the number of nodes"
    return None


def _dp_multinode(f: Flags) -> str | None:
    layout, n = f.attn_dp, f.number("--nnodes", 1)
    if layout is None or n is None:
        return None
    if layout[1] > 1 and n != 1:
        return f"--dp-size {layout[1]} (data-parallel replicas) with --nnodes {n}"
    return None


def _attn_dp_positive(f: Flags) -> str | None:
    attn = f.number("--attn-dp-size", 1)
    return f"--attn-dp-size {attn} is not positive" if attn is not None and attn < 1 else None


def _attn_dp_with_replicas(f: Flags) -> str | None:
    layout = f.attn_dp
    if layout and layout[0] > 1 and layout[1] > 1:
        return f"attention DP of {layout[0]} and --dp-size {layout[1]} replicas together"
    return None


def _attn_dp_divides_tp(f: Flags) -> str | None:
    layout, tp = f.attn_dp, f.number("--tp-size", 1)
    if layout is None or tp is None or layout[0] <= 1 or layout[1] > 1:
        return None
    if tp % layout[0]:
        how = "--attn-dp-size" if f.number("--attn-dp-size", 1) != 1 else "--dp-size with --enable-dp-attention"
        return f"--tp-size {tp} is not divisible by the attention-DP size {layout[0]} ({how})"
    return None


def _retraction_priority(f: Flags) -> str | None:
    if f.text("--retraction-policy") == "priority" and not f.on("--enable-priority-scheduling"):
        return "--retraction-policy priority without --enable-priority-scheduling"
    return None


def _priority_policy(f: Flags) -> str | None:
    policy = f.text("--schedule-policy", "fcfs")
    if f.on("--enable-priority-scheduling") and policy not in ("fcfs", "lof"):
        return f"--enable-priority-scheduling with --schedule-policy {policy} (only fcfs or lof)"
    return None


def _positive(flag: str, default: int, least: int) -> Callable[[Flags], str | None]:
    def check(f: Flags) -> str | None:
        value = f.number(flag, default)
        return f"{flag} {value} is below {least}" if value is not None and value < least else None

    return check


def _padding_compile(f: Flags) -> str | None:
    if f.on("--disable-cuda-graph-padding") and f.on("--enable-torch-compile"):
        return "--disable-cuda-graph-padding with --enable-torch-compile"
    return None


def _moe_dense_tp(f: Flags) -> str | None:
    dense, tp = f.number("--moe-dense-tp-size"), f.number("--tp-size", 1)
    if f.has("--moe-dense-tp-size") and dense is not None and tp is not None and dense not in (1, tp):
        return f"--moe-dense-tp-size {dense} is neither 1 nor --tp-size {tp}"
    return None


def _pp_micro_batch(f: Flags) -> str | None:
    mbs = f.number("--pp-max-micro-batch-size")
    return f"--pp-max-micro-batch-size {mbs} is not positive" if mbs is not None and mbs < 1 else None


def _lora_per_batch(f: Flags) -> str | None:
    n = f.number("--max-loras-per-batch", 8)
    return f"--max-loras-per-batch {n} is not positive" if n is not None and n <= 0 else None


def _lora_nothing_to_load(f: Flags) -> str | None:
    if not f.lora or f.given.get("--lora-paths"):
        return None
    if f.number("--max-lora-rank") and f.given.get("--lora-target-modules"):
        return None
    return "LoRA is on with no --lora-paths and without both --max-lora-rank and --lora-target-modules"


def _lora_all_alone(f: Flags) -> str | None:
    modules = (f.given.get("--lora-target-modules") or "").split()
    if f.lora and "all" in modules and len(set(modules)) > 1:
        return "--lora-target-modules names 'all' and other modules"
    return None


def _lora_max_loaded(f: Flags) -> str | None:
    loaded, per_batch = f.number("--max-loaded-loras"), f.number("--max-loras-per-batch", 8)
    if not f.lora or loaded is None or per_batch is None or per_batch <= 0:
        return None
    if loaded < per_batch:
        return f"--max-loaded-loras {loaded} is below --max-loras-per-batch {per_batch}"
    return None


def _lora_paths_over(f: Flags) -> str | None:
    loaded, per_batch = f.number("--max-loaded-loras"), f.number("--max-loras-per-batch", 8)
    paths = (f.given.get("--lora-paths") or "").split()
    if not f.lora or loaded is None or per_batch is None or loaded < per_batch:
        return None
    if len(paths) > loaded:
        return f"{len(paths)} --lora-paths but --max-loaded-loras {loaded}"
    return None


def _lora_overlap(f: Flags) -> str | None:
    if not (f.lora and f.on("--enable-lora-overlap-loading")):
        return None
    loaded, per_batch = f.number("--max-loaded-loras"), f.number("--max-loras-per-batch", 8)
    if per_batch is None or per_batch <= 0:
        return None
    if loaded is None or loaded > 2 * per_batch:
        return (
            "--enable-lora-overlap-loading needs --max-loaded-loras set to at most twice "
            f"--max-loras-per-batch ({2 * per_batch})"
        )
    return None


def _lora_speculative(f: Flags) -> str | None:
    if f.lora and f.algorithm == "STANDALONE":
        return "LoRA with --speculative-algorithm STANDALONE"
    return None


def _spec_dp_attention(algorithm: str) -> Callable[[Flags], str | None]:
    def check(f: Flags) -> str | None:
        layout = f.attn_dp
        if f.algorithm == algorithm and layout and layout[0] > 1 and layout[1] == 1:
            tp = f.number("--tp-size", 1)
            if tp is not None and tp % layout[0] == 0:  # else the DP assertion stops it first
                return f"{algorithm} speculative decoding with attention DP ({layout[0]})"
        return None

    return check


def _dflash_draft(f: Flags) -> str | None:
    if f.algorithm == "DFLASH" and f.number("--pp-size", 1) == 1 and not f.has("--speculative-draft-model-path"):
        return "DFLASH without --speculative-draft-model-path"
    return None


def _dflash_pp(f: Flags) -> str | None:
    pp = f.number("--pp-size", 1)
    if f.algorithm == "DFLASH" and pp is not None and pp != 1 and f.attn_dp == (1, 1):
        return f"DFLASH with --pp-size {pp}"
    return None


def _dflash_block(f: Flags) -> str | None:
    block, draft = f.number("--speculative-dflash-block-size"), f.number("--speculative-num-draft-tokens")
    if f.algorithm != "DFLASH" or not f.has("--speculative-draft-model-path") or f.number("--pp-size", 1) != 1:
        return None
    if f.attn_dp != (1, 1) or block is None or block <= 0 or draft is None:
        return None
    if block != draft:
        return f"--speculative-dflash-block-size {block} differs from --speculative-num-draft-tokens {draft}"
    return None


def _sink_without_window(f: Flags) -> str | None:
    sink = f.number("--speculative-draft-sink-size")
    if sink is not None and sink >= 0 and not f.has("--speculative-draft-window-size"):
        return "--speculative-draft-sink-size without --speculative-draft-window-size"
    return None


def _window_positive(f: Flags) -> str | None:
    window = f.number("--speculative-draft-window-size")
    if window is not None and window <= 0:
        return f"--speculative-draft-window-size {window} is not positive"
    return None


def _block_verification(f: Flags) -> str | None:
    algo = f.algorithm
    if f.on("--speculative-use-block-verification") and algo not in ("EAGLE", "EAGLE3", "DFLASH", "DSPARK"):
        return f"--speculative-use-block-verification with {algo or 'no speculative algorithm'}"
    return None


def _decode_radix_spec(f: Flags) -> str | None:
    algo = f.algorithm
    if (
        f.text("--disaggregation-mode") == "decode"
        and f.on("--disaggregation-decode-enable-radix-cache")
        and algo not in (None, "DSPARK", "EAGLE", "EAGLE3")
    ):
        return f"--disaggregation-decode-enable-radix-cache with --speculative-algorithm {algo}"
    return None


def _host_receive_threshold(f: Flags) -> str | None:
    t = f.real("--disaggregation-decode-host-receive-threshold", 1.0)
    if t is not None and not 0 <= t <= 1:
        return f"--disaggregation-decode-host-receive-threshold {t:g} is outside 0..1"
    return None


def _prefill_dequant(f: Flags) -> str | None:
    requested = f.text("--prefill-kv-cache-dequant-dtype", "auto")
    if requested != "auto" and f.has("--kv-cache-dtype") and f.text("--kv-cache-dtype") != "nvfp4":
        return f"--prefill-kv-cache-dequant-dtype {requested} with --kv-cache-dtype {f.text('--kv-cache-dtype')}"
    if requested != "auto" and not f.has("--kv-cache-dtype"):
        return f"--prefill-kv-cache-dequant-dtype {requested} without --kv-cache-dtype nvfp4"
    return None


def _lmcache_hicache(f: Flags) -> str | None:
    if f.on("--enable-lmcache") and f.on("--enable-hierarchical-cache"):
        return "--enable-lmcache with --enable-hierarchical-cache"
    return None


def _lmcache_radix(f: Flags) -> str | None:
    if f.on("--enable-lmcache") and f.on("--disable-radix-cache") and not f.on("--enable-hierarchical-cache"):
        return "--enable-lmcache with --disable-radix-cache"
    return None


def _pdmux_pp(f: Flags) -> str | None:
    pp = f.number("--pp-size", 1)
    return f"--enable-pdmux with --pp-size {pp}" if f.on("--enable-pdmux") and pp not in (1, None) else None


def _pdmux_chunked(f: Flags) -> str | None:
    if f.on("--enable-mis"):  # _handle_multi_item_scoring turns chunked prefill off
        return None
    if f.on("--enable-pdmux") and f.number("--pp-size", 1) == 1 and f.number("--chunked-prefill-size") != -1:
        return "--enable-pdmux without --chunked-prefill-size -1"
    return None


# SpeculativeAlgorithm's members in 0.5.23's speculative/spec_info.py and spec_registry's
# _RESERVED_ALIASES (tests/unit/test_rule_families.py reads both off the release).
SPEC_ALGORITHMS = (
    *("DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM"),
    *("NONE", "NEXTN"),
)
LOG_LEVELS = ("CRITICAL", "FATAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG", "NOTSET")  # logging's int levels


def _spec_unknown(f: Flags) -> str | None:
    name = f.text("--speculative-algorithm")
    if name is None or name.upper() in SPEC_ALGORITHMS:
        return None
    return (
        f"--speculative-algorithm {name!r} is none of this release's algorithms ({', '.join(SPEC_ALGORITHMS[:-2])})"
        ", and no plugin here registers it"
    )


def _log_level(f: Flags) -> str | None:
    level = f.text("--log-level")
    if level is None or level.upper() in LOG_LEVELS:
        return None
    return f"--log-level {level!r} is no level of Python's logging (critical, error, warning, info or debug)"


def _mxfp8(f: Flags) -> str | None:
    if f.text("--kv-cache-dtype") == "mxfp8":
        return "--kv-cache-dtype mxfp8 needs a Blackwell (SM100+) GPU"
    return None


def chunk_per_rank(f: Flags) -> tuple[int, int] | None:
    """(the chunked prefill size check_server_args sees, the attention-DP width it was divided
    by, as handle_data_parallelism divides it); None where it is not given, or off."""
    chunk = f.number("--chunked-prefill-size")
    if chunk is None or chunk <= 0:
        return None
    layout = f.attn_dp
    width = layout[0] if layout and layout[0] > 1 else 1
    return chunk // width, width


def _chunk_page(f: Flags) -> str | None:
    per_rank, page = chunk_per_rank(f), f.number("--page-size")
    if per_rank is None or page is None or page <= 0 or f.on("--enable-mis"):
        return None
    if f.on("--enable-kv-cache-sharding"):
        return None  # 0.5.23's handle_kv_cache_sharding rounds the chunk up to whole pages
    if f.text("--disaggregation-mode") == "decode":
        return None
    effective, width = per_rank
    if effective % page:
        chunk = f.number("--chunked-prefill-size")
        per = f" ({chunk} // attention DP {width} = {effective})" if width > 1 else ""
        return f"--chunked-prefill-size {chunk}{per} is not divisible by --page-size {page}"
    return None


PAGE_TREE_BACKENDS = ("flashinfer", "fa3", "triton")  # _handle_eagle_family's _PAGE_TREE_SPEC_BACKENDS


def _eagle_topk_page(f: Flags) -> str | None:
    topk, page = f.number("--speculative-eagle-topk"), f.number("--page-size")
    if f.algorithm not in ("EAGLE", "EAGLE3", "STANDALONE") or topk is None or page is None:
        return None
    if topk > 1 and page > 1:
        backend = f.text("--attention-backend")
        if backend is None or backend not in PAGE_TREE_BACKENDS:
            return (
                f"--speculative-eagle-topk {topk} with --page-size {page} needs attention backend "
                f"{', '.join(PAGE_TREE_BACKENDS)}" + (f"; --attention-backend is {backend}" if backend else "")
            )
    return None


def _ngram_topk_page(f: Flags) -> str | None:
    breadth, page = f.number("--speculative-ngram-max-bfs-breadth", 10), f.number("--page-size")
    if f.algorithm != "NGRAM" or breadth is None or page is None or f.attn_dp not in ((1, 1), None):
        return None
    if breadth > 1 and page > 1 and f.text("--attention-backend") != "flashinfer":
        backend = f.text("--attention-backend")
        return f"NGRAM's BFS breadth {breadth} with --page-size {page} needs the flashinfer attention backend" + (
            f"; --attention-backend is {backend}" if backend else ""
        )
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "served-name-colon",
        "served model name",
        "0.5.9",
        CHECK,
        ('":"notinserved_model_name', "served_model_namecannotcontainacolon"),
        "AssertionError",
        ("--served-model-name",),
        _served_colon,
        "Name the model without ':' (use '-' or '/'); ':' selects a LoRA adapter in requests.",
    ),
    Rule(
        "nnodes-divides-tp",
        "multi-node",
        "0.4.6.post5",
        CHECK,
        ("(tp_size*pp_size)%nnodes==0", "tp_sizemustbedivisiblebynumberofnodes"),
        "AssertionError",
        ("--tp-size", "--pp-size", "--nnodes"),
        _nnodes_tp,
        "Make --tp-size x --pp-size a multiple of --nnodes (each node runs the same number of ranks).",
    ),
    Rule(
        "nnodes-zero",
        "multi-node",
        "0.4.6.post5",
        CHECK,
        ("(tp_size*pp_size)%nnodes==0",),
        "ZeroDivisionError",
        ("--nnodes",),
        _nnodes_zero,
        "Give --nnodes the number of machines the server spans (1 for one).",
    ),
    Rule(
        "dp-replicas-multinode",
        "multi-node",
        "0.5.23",
        (("0", S19, "check_server_args"),),
        ("assertnot(dp_size>1andnnodes!=1)", "multi-nodedata-parallelreplicasarenotsupported"),
        "AssertionError",
        ("--dp-size", "--nnodes"),
        _dp_multinode,
        "Across nodes use attention DP (--attn-dp-size) instead of --dp-size replicas, or run one "
        "server per node behind a router.",
    ),
    Rule(
        "attn-dp-positive",
        "dp attention",
        "0.5.23",
        (("0", PARALLEL, "handle_data_parallelism"),),
        ("ifattn_dp_size<1:", "--attn-dp-sizemustbepositive"),
        "ValueError",
        ("--attn-dp-size",),
        _attn_dp_positive,
        "Give --attn-dp-size 1 (off) or more.",
    ),
    Rule(
        "attn-dp-with-dp-replicas",
        "dp attention",
        "0.5.23",
        (("0", PARALLEL, "handle_data_parallelism"),),
        ("ifattn_dp_size>1anddp_size>1:", "data-parallelreplicascombinedwithattentiondataparallelism"),
        "ValueError",
        ("--attn-dp-size", "--dp-size", "--enable-dp-attention"),
        _attn_dp_with_replicas,
        "Use either --attn-dp-size (attention DP inside one server) or --dp-size (replicas), not both.",
    ),
    Rule(
        "attn-dp-divides-tp",
        "dp attention",
        "0.5.23",
        (("0", PARALLEL, "handle_data_parallelism"),),
        ("asserttp_size%attn_dp_size==0",),
        "AssertionError",
        ("--tp-size", "--attn-dp-size", "--dp-size", "--enable-dp-attention"),
        _attn_dp_divides_tp,
        "Make --tp-size a multiple of the attention-DP size (for example --tp-size 8 with --attn-dp-size 2, 4 or 8).",
    ),
    Rule(
        "retraction-needs-priority",
        "priority scheduling",
        "0.5.19",
        CHECK,
        (
            'ifretraction_policy=="priority"andnotenable_priority_scheduling:',
            "--retraction-policypriorityrequires--enable-priority-scheduling",
        ),
        "ValueError",
        ("--retraction-policy", "--enable-priority-scheduling"),
        _retraction_priority,
        "Add --enable-priority-scheduling, or drop --retraction-policy priority.",
    ),
    Rule(
        "priority-schedule-policy",
        "priority scheduling",
        "0.5.3",
        CHECK,
        ("Tousepriorityscheduling,schedule_policymustbe'fcfs'or'lof'",),
        "AssertionError",
        ("--enable-priority-scheduling", "--schedule-policy"),
        _priority_policy,
        "Use --schedule-policy fcfs or lof with --enable-priority-scheduling.",
    ),
    Rule(
        "tokenizer-workers",
        "process layout",
        "0.5.2",
        CHECK,
        ("asserttokenizer_worker_num>0",),
        "AssertionError",
        ("--tokenizer-worker-num",),
        _positive("--tokenizer-worker-num", 1, 1),
        "Give --tokenizer-worker-num 1 or more.",
    ),
    Rule(
        "detokenizer-workers",
        "process layout",
        "0.5.12",
        CHECK,
        ("assertdetokenizer_worker_num>0",),
        "AssertionError",
        ("--detokenizer-worker-num",),
        _positive("--detokenizer-worker-num", 1, 1),
        "Give --detokenizer-worker-num 1 or more.",
    ),
    Rule(
        "base-gpu-id",
        "process layout",
        "0.4.6.post5",
        CHECK,
        ("assertbase_gpu_id>=0",),
        "AssertionError",
        ("--base-gpu-id",),
        _positive("--base-gpu-id", 0, 0),
        "Give --base-gpu-id 0 or more (a GPU index as CUDA_VISIBLE_DEVICES numbers them).",
    ),
    Rule(
        "gpu-id-step",
        "process layout",
        "0.4.6.post5",
        CHECK,
        ("assertgpu_id_step>=1",),
        "AssertionError",
        ("--gpu-id-step",),
        _positive("--gpu-id-step", 1, 1),
        "Give --gpu-id-step 1 or more.",
    ),
    Rule(
        "moe-dense-tp",
        "process layout",
        "0.5.13",
        CHECK,
        ("moe_dense_tp_sizeonlysupportsNone,1,ortp_sizecurrently",),
        "AssertionError",
        ("--moe-dense-tp-size", "--tp-size"),
        _moe_dense_tp,
        "Leave --moe-dense-tp-size out, or give 1 or the --tp-size value.",
    ),
    Rule(
        "cuda-graph-padding-compile",
        "cuda graph",
        "0.5.12",
        CHECK,
        ("assertnot(disable_cuda_graph_paddingandenable_torch_compile)",),
        "AssertionError",
        ("--disable-cuda-graph-padding", "--enable-torch-compile"),
        _padding_compile,
        "Drop --disable-cuda-graph-padding or --enable-torch-compile.",
    ),
    Rule(
        "pp-micro-batch",
        "pipeline",
        "0.5.12",
        CHECK,
        ("pp_max_micro_batch_sizeisNoneorpp_max_micro_batch_size>=1",),
        "AssertionError",
        ("--pp-max-micro-batch-size",),
        _pp_micro_batch,
        "Give --pp-max-micro-batch-size 1 or more, or leave it out (auto).",
    ),
    Rule(
        "pdmux-pp",
        "pipeline",
        "0.5.23",
        CHECK,
        ("assertpp_size==1", "PD-Multiplexingisonlysupportedwithpipelineparallelismdisabled"),
        "AssertionError",
        ("--enable-pdmux", "--pp-size"),
        _pdmux_pp,
        "PD-Multiplexing needs --pp-size 1.",
    ),
    Rule(
        "pdmux-chunked-prefill",
        "chunked prefill",
        "0.5.23",
        CHECK,
        ("assertchunked_prefill_size==-1", "PD-Multiplexingisnotcompatiblewithchunkedprefill"),
        "AssertionError",
        ("--enable-pdmux", "--chunked-prefill-size"),
        _pdmux_chunked,
        "Add --chunked-prefill-size -1 (and --disable-overlap-schedule) with --enable-pdmux.",
        sure=False,  # a model without chunked prefill support turns it off itself
    ),
    Rule(
        "lora-per-batch",
        "lora",
        "0.5.2",
        CHECK_LORA,
        ("assertmax_loras_per_batch>0",),
        "AssertionError",
        ("--max-loras-per-batch",),
        _lora_per_batch,
        "Give --max-loras-per-batch 1 or more.",
    ),
    Rule(
        "lora-nothing-to-load",
        "lora",
        "0.5.2",
        CHECK_LORA,
        ("assertlora_pathsor(max_lora_rankandlora_target_modules)",),
        "AssertionError",
        ("--enable-lora", "--lora-paths", "--max-lora-rank", "--lora-target-modules"),
        _lora_nothing_to_load,
        "Give --lora-paths, or both --max-lora-rank and --lora-target-modules (adapters loaded later).",
    ),
    Rule(
        "lora-target-all-alone",
        "lora",
        "0.5.2",
        CHECK_LORA,
        ("If'all'isspecifiedin--lora-target-modules,itshouldbetheonlymodulespecified",),
        "AssertionError",
        ("--lora-target-modules",),
        _lora_all_alone,
        "Give --lora-target-modules all alone, or list the modules without 'all'.",
    ),
    Rule(
        "lora-max-loaded",
        "lora",
        "0.5.2",
        CHECK_LORA,
        ("assertmax_loaded_loras>=max_loras_per_batch",),
        "AssertionError",
        ("--max-loaded-loras", "--max-loras-per-batch"),
        _lora_max_loaded,
        "Raise --max-loaded-loras to at least --max-loras-per-batch (8 unless given).",
    ),
    Rule(
        "lora-paths-over-max-loaded",
        "lora",
        "0.5.2",
        CHECK_LORA,
        ("assertlen(lora_paths)<=max_loaded_loras",),
        "AssertionError",
        ("--lora-paths", "--max-loaded-loras"),
        _lora_paths_over,
        "Raise --max-loaded-loras to the number of --lora-paths, or load fewer adapters at start.",
    ),
    Rule(
        "lora-overlap-loading",
        "lora",
        "0.5.9",
        CHECK_LORA,
        ("max_loaded_lorasisnotNoneandmax_loaded_loras<=max_loaded_loras_limit",),
        "AssertionError",
        ("--enable-lora-overlap-loading", "--max-loaded-loras", "--max-loras-per-batch"),
        _lora_overlap,
        "Set --max-loaded-loras to at most twice --max-loras-per-batch, or drop --enable-lora-overlap-loading.",
    ),
    Rule(
        "lora-speculative",
        "lora",
        "0.5.19",
        (("0", LORA, "check_lora_speculative_compatibility"),),
        ('lora_spec_algorithms=("EAGLE","EAGLE3","DFLASH","DSPARK")', "LoRAisonlycompatiblewithNGRAM"),
        "ValueError",
        ("--speculative-algorithm", "--lora-paths", "--enable-lora"),
        _lora_speculative,
        "Use EAGLE, EAGLE3, NEXTN, DFLASH or NGRAM speculative decoding with LoRA, or serve without LoRA.",
    ),
    Rule(
        "standalone-dp-attention",
        "speculative",
        "0.5.23",
        (("0", SPEC, "_handle_eagle_family"),),
        (
            'ifspeculative_algorithm=="STANDALONE"andattn_dp_enabled_of(',
            "standalonespeculativedecodingdoesnotsupportdpattention",
        ),
        "ValueError",
        ("--speculative-algorithm", "--attn-dp-size", "--enable-dp-attention"),
        _spec_dp_attention("STANDALONE"),
        "Drop attention DP, or use EAGLE/EAGLE3 drafts.",
    ),
    Rule(
        "ngram-dp-attention",
        "speculative",
        "0.5.23",
        (("0", SPEC, "_handle_ngram"),),
        ("ifattn_dp_enabled_of(view):", "ngramspeculativedecodingdoesnotsupportdpattention"),
        "ValueError",
        ("--speculative-algorithm", "--attn-dp-size", "--enable-dp-attention"),
        _spec_dp_attention("NGRAM"),
        "Drop attention DP for NGRAM speculative decoding.",
    ),
    Rule(
        "dflash-draft-path",
        "speculative",
        "0.5.13",
        (("0", SPEC, "_handle_dflash"),),
        (
            "ifspeculative_draft_model_pathisNone:",
            "DFLASHspeculativedecodingrequiressetting--speculative-draft-model-path",
        ),
        "ValueError",
        ("--speculative-algorithm", "--speculative-draft-model-path"),
        _dflash_draft,
        "Add --speculative-draft-model-path (the DFLASH draft checkpoint).",
    ),
    Rule(
        "dflash-pp",
        "speculative",
        "0.5.13",
        (("0", SPEC, "_handle_dflash"),),
        ("ifpp_size!=1:", "DFLASHspeculativedecodingonlysupportspp_size==1"),
        "ValueError",
        ("--speculative-algorithm", "--pp-size"),
        _dflash_pp,
        "Run DFLASH with --pp-size 1.",
    ),
    Rule(
        "dflash-block-size",
        "speculative",
        "0.5.13",
        (("0", SPEC, "_handle_dflash"),),
        ("Both--speculative-num-draft-tokensand--speculative-dflash-block-sizeareset",),
        "ValueError",
        ("--speculative-dflash-block-size", "--speculative-num-draft-tokens"),
        _dflash_block,
        "Give only --speculative-dflash-block-size, or the same value to both.",
    ),
    Rule(
        "draft-sink-needs-window",
        "speculative",
        "0.5.23",
        (("0", SPEC, "handle_speculative_decoding"),),
        ("--speculative-draft-sink-sizerequires--speculative-draft-window-size",),
        "ValueError",
        ("--speculative-draft-sink-size", "--speculative-draft-window-size"),
        _sink_without_window,
        "Add --speculative-draft-window-size, or drop --speculative-draft-sink-size.",
    ),
    Rule(
        "draft-window-positive",
        "speculative",
        "0.5.13",
        (("0", SPEC, "handle_speculative_decoding"),),
        ("ifwindow_size<=0:", "--speculative-draft-window-sizemustbepositive"),
        "ValueError",
        ("--speculative-draft-window-size",),
        _window_positive,
        "Give --speculative-draft-window-size 1 or more.",
    ),
    Rule(
        "block-verification-algorithm",
        "speculative",
        "0.5.23",
        (("0", SPEC, "handle_speculative_decoding"),),
        (
            'ifspeculative_algorithmnotin("EAGLE","EAGLE3","DFLASH","DSPARK"):',
            "--speculative-use-block-verificationonlysupports",
        ),
        "ValueError",
        ("--speculative-use-block-verification", "--speculative-algorithm"),
        _block_verification,
        "Use block verification with EAGLE, EAGLE3, NEXTN, DFLASH or DSPARK only.",
    ),
    Rule(
        "decode-radix-speculative",
        "disaggregation",
        "0.5.23",
        (("0", SPEC, "handle_speculative_decoding"),),
        (
            'andspeculative_algorithmnotin(None,"DSPARK","EAGLE","EAGLE3")',
            "--disaggregation-decode-enable-radix-cacheisincompatible",
        ),
        "ValueError",
        ("--disaggregation-decode-enable-radix-cache", "--speculative-algorithm", "--disaggregation-mode"),
        _decode_radix_spec,
        "Drop --disaggregation-decode-enable-radix-cache, or use EAGLE/EAGLE3 drafts on the decode server.",
    ),
    Rule(
        "host-receive-threshold",
        "disaggregation",
        "0.5.23",
        (("0", PD, "handle_pd_disaggregation"),),
        ("ifnot0<=disaggregation_decode_host_receive_threshold<=1:",),
        "ValueError",
        ("--disaggregation-decode-host-receive-threshold",),
        _host_receive_threshold,
        "Give --disaggregation-decode-host-receive-threshold a value from 0 to 1.",
    ),
    Rule(
        "prefill-dequant-needs-nvfp4",
        "kv cache dtype",
        "0.5.23",
        (("0", KV, "handle_nvfp4_prefill_kv_dequant_dtype"),),
        ('ifkv_cache_dtype!="nvfp4":', "--prefill-kv-cache-dequant-dtypeappliesonlywith"),
        "ValueError",
        ("--prefill-kv-cache-dequant-dtype", "--kv-cache-dtype"),
        _prefill_dequant,
        "Add --kv-cache-dtype nvfp4, or drop --prefill-kv-cache-dequant-dtype.",
    ),
    Rule(
        "lmcache-hicache",
        "kv cache",
        "0.5.23",
        (("0", KV, "handle_cache_compatibility"),),
        ("--enable-lmcacheand--enable-hierarchical-cacheare",),
        "ValueError",
        ("--enable-lmcache", "--enable-hierarchical-cache"),
        _lmcache_hicache,
        "Use either --enable-lmcache or --enable-hierarchical-cache.",
    ),
    Rule(
        "lmcache-radix",
        "kv cache",
        "0.5.23",
        (("0", KV, "handle_cache_compatibility"),),
        ("--enable-lmcacherequiresradixcachetobeenabled",),
        "ValueError",
        ("--enable-lmcache", "--disable-radix-cache"),
        _lmcache_radix,
        "Drop --disable-radix-cache: LMCache extends the radix cache.",
    ),
    Rule(
        "spec-algorithm-unknown",
        "speculative",
        "0.5.23",
        (("0", "sglang/srt/speculative/spec_info.py", "from_string"),),
        ("ifupperin_RESERVED_ALIASES:", 'raiseValueError(f"Unknownspeculativealgorithmname:{name}")'),
        "ValueError",
        ("--speculative-algorithm",),
        _spec_unknown,
        "Use one of EAGLE, EAGLE3, STANDALONE, NGRAM or DFLASH (case does not matter).",
    ),
    Rule(
        "log-level-unknown",
        "logging",
        "0.5.12",
        (("0", OLD, "prepare_server_args"),),
        ("level=getattr(logging,raw_args.log_level.upper()),",),
        "AttributeError",
        ("--log-level",),
        _log_level,
        "Use debug, info, warning, error or critical.",
    ),
    # The GPU or the model decides these: INFO, the dry run (or the start) says.
    Rule(
        "kv-mxfp8-blackwell",
        "kv cache dtype",
        "0.5.19",
        (("0", KV, "handle_mxfp8_kv_cache_compatibility"),),
        ("ifnotget_platform().is_blackwell:", "--kv-cache-dtypemxfp8requiresanSM100+(Blackwell)GPU"),
        "ValueError",
        ("--kv-cache-dtype",),
        _mxfp8,
        "Use --kv-cache-dtype fp8_e4m3 unless the GPUs are Blackwell.",
        sure=False,
    ),
    Rule(
        "chunked-prefill-page",
        "chunked prefill",
        "0.5.2",
        CHECK,
        ("chunked_prefill_sizemustbedivisiblebypage_size",),
        "AssertionError",
        ("--chunked-prefill-size", "--page-size"),
        _chunk_page,
        "Make --chunked-prefill-size a multiple of --page-size (per attention-DP rank).",
        sure=False,
    ),
    Rule(
        "eagle-topk-page-backend",
        "speculative",
        "0.5.13",
        (("0", SPEC, "_handle_eagle_family"),),
        ('_PAGE_TREE_SPEC_BACKENDS=("flashinfer","fa3","triton")', "andattention_backendnotin_PAGE_TREE_SPEC_BACKENDS"),
        "ValueError",
        ("--speculative-eagle-topk", "--page-size", "--attention-backend"),
        _eagle_topk_page,
        "Use --page-size 1, --speculative-eagle-topk 1, or --attention-backend flashinfer, fa3 or triton.",
    ),
    Rule(
        "ngram-topk-page-backend",
        "speculative",
        "0.5.13",
        (("0", SPEC, "_handle_ngram"),),
        ('andattention_backend!="flashinfer"', "Thiscombinationisonlysupportedforthe'flashinfer'backend"),
        "ValueError",
        ("--speculative-algorithm", "--page-size", "--attention-backend", "--speculative-ngram-max-bfs-breadth"),
        _ngram_topk_page,
        "Use --page-size 1, --attention-backend flashinfer, or --speculative-ngram-max-bfs-breadth 1.",
    ),
)
# Sure only when --attention-backend is given: SGLang picks one for the GPU otherwise (0.5.23 on
# this CPU machine picked one that passes for EAGLE, fails for NGRAM).
BACKEND_DEPENDENT = {"eagle-topk-page-backend", "ngram-topk-page-backend"}
BY_NAME = {rule.name: rule for rule in RULES}


def violations(version: str, given: Mapping[str, str | None]) -> list[Violation]:
    """The rules of `version` these flags break, in RULES order (INFO-only ones marked not sure)."""
    flags = Flags(given)
    out: list[Violation] = []
    for rule in RULES:
        if not rule.holds_for(version):
            continue
        why = rule.broken(flags)
        if why is None:
            continue
        sure = rule.sure and (rule.name not in BACKEND_DEPENDENT or flags.has("--attention-backend"))
        _, function = rule.location(version)
        involved = tuple(f for f in rule.flags if f in given) + tuple(f for f in rule.flags if f not in given)
        if sure:
            message = f"SGLang {version} will stop at start-up: {rule.exception} in {function} ({why})."
        else:
            message = (
                f"SGLang {version} may stop at start-up: {rule.exception} in {function} ({why}) "
                "unless the GPU or the model changes it; the dry run decides."
            )
        out.append(Violation(rule.name, rule.exception, function, involved, message, rule.fix, sure))
    return out
