"""Will it fit? The model's weights and KV cache against the GPUs its ranks will use.

An estimate, with its numbers in the message. Weights per GPU are the stored bytes (model_files)
over tp x pp: a lower bound, since embeddings, norms and, with DP attention, the attention
weights are not split that finely (SGLang 0.5.23 shards attention over tp / dp there,
layers/dp_attention.py `compute_dp_attention_world_info`); without DP attention each of the dp
replicas has tp x pp GPUs of its own, so dp does not divide the weights. An online
`--quantization fp8` of a 16-bit checkpoint halves what the GPU holds.

What SGLang 0.5.23 does with memory (docs/facts.md, SGLang): before loading it measures the
GPU's free memory, and after loading it keeps `free x (1 - mem_fraction_static)` aside; what is
left is the KV cache. Weights that leave nothing stop the start
(`KVCacheConfigurator._profile_available_bytes`, ValueError "Loaded weights leave no GPU memory
for the KV cache"). Memory held by processes outside the unit is not free (a restart ends only
the unit's own). Without `--mem-fraction-static`, 0.5.23 picks `(total - reserve) / total`
(`arg_groups/memory_hook.py:handle_gpu_memory_settings`), the reserve at least 10 GiB on a GPU
over 60 GiB (1.5 GiB with SGLANG_ENABLE_POST_CAPTURE_KV_SIZING), so the fraction has an upper
bound an error can rest on; for other releases it is unknown and only the plain overflows are
errors.

Errors only where it clearly cannot fit: weights per GPU over the GPU's memory, over what the
others leave, or over the fraction of it. A KV cache that cannot hold one request of the
context length is a warning; the rest is said as info. Unknown sizes: said, and nothing more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from cockpit.sglang.preflight.host_preflight import gpus_of
from cockpit.sglang.preflight.model_files import ModelFiles
from cockpit.sglang.preflight.preflight import ERROR, INFO, WARNING, Finding
from cockpit.sglang.preflight.rules import release_tuple
from cockpit.sglang.server.ranks import number, ranks_on_node
from cockpit.systemd.gpu_use import GpuUse
from cockpit.systemd.process_facts import Viewpoint

RULE = "model-fit"
GIB = 1 << 30
MIB = 1 << 20
DTYPE_BYTES = {"bfloat16": 2.0, "bf16": 2.0, "float16": 2.0, "fp16": 2.0, "half": 2.0, "float32": 4.0, "fp32": 4.0}
ONLINE_QUANT_BYTES = {"fp8": 1.0, "w8a8_fp8": 1.0, "w8a8_int8": 1.0}  # per parameter, quantized at load
DEFAULT_FRACTION_FROM = (0, 5, 23)  # the release whose default fraction rule was read
POST_CAPTURE_ENV = "SGLANG_ENABLE_POST_CAPTURE_KV_SIZING"


def gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


@dataclass(frozen=True)
class Fraction:
    value: float | None  # None: unknown (the release picks it, and its rule was not read)
    words: str  # how the message says it
    bound: bool = False  # value is the most the release would pick, not the value itself


def fraction_of(
    flags: Mapping[str, str | None], env: Mapping[str, str], version: str, total_mib: int, tp: int, pp: int
) -> Fraction:
    """`--mem-fraction-static`, else the most SGLang 0.5.23 would pick on this GPU."""
    given = flags.get("--mem-fraction-static")
    if given is not None:
        value = number(flags, "--mem-fraction-static", 0.0)
        return Fraction(value, f"--mem-fraction-static {value:g}")
    if release_tuple(version or "0") < DEFAULT_FRACTION_FROM:
        return Fraction(None, f"SGLang {version or '(unknown release)'}'s own --mem-fraction-static (not known here)")
    parallel = tp * pp / 8 * 1024
    if env.get(POST_CAPTURE_ENV, "").lower() in ("1", "true", "yes", "on"):
        reserve = 1536 + parallel
    else:
        reserve = 512 + 2048 * 1.5 + parallel  # at least 2048 activation tokens
        if total_mib > 60 * 1024:
            reserve = max(reserve, 10 * 1024)
    value = round((total_mib - reserve) / total_mib, 3)
    return Fraction(value, f"SGLang {version}'s own --mem-fraction-static, at most {value:g} here", bound=True)


def dtype_bytes(name: object) -> float | None:
    """Bytes per element of a dtype as configs and flags spell it (fp8*, fp4* included)."""
    text = str(name or "").lower().removeprefix("torch.")
    if text.startswith("fp8") or text.startswith("float8"):
        return 1.0
    if text.startswith("fp4"):
        return 0.5
    return DTYPE_BYTES.get(text)


def weights_on_gpus(model: ModelFiles, flags: Mapping[str, str | None]) -> tuple[int, str] | None:
    """(bytes the GPUs hold in all, how that was found); None where the directory does not say."""
    if model.weight_bytes is None:
        return None
    said = f"{gib(model.weight_bytes)} stored ({model.weight_source})"
    online = flags.get("--quantization")
    stored = dtype_bytes(model.text.get("torch_dtype") or model.text.get("dtype"))
    already = (model.config or {}).get("quantization_config")
    if online in ONLINE_QUANT_BYTES and not already and stored is not None and stored > ONLINE_QUANT_BYTES[online]:
        held = int(model.weight_bytes * ONLINE_QUANT_BYTES[online] / stored)
        return held, f"{said}, about {gib(held)} once --quantization {online} quantizes it at load"
    return model.weight_bytes, said


def kv_bytes_per_token(model: ModelFiles, flags: Mapping[str, str | None]) -> tuple[float, str] | None:
    """KV cache bytes one token takes on one GPU, and the terms; None where the config lacks them.

    MLA (DeepSeek V2/V3, Kimi K2): one latent of kv_lora_rank + qk_rope_head_dim per layer, the
    same on every TP rank. Otherwise K and V of the rank's KV heads: max(1, kv_heads // attn_tp)
    as 0.5.23's `ModelConfig.get_num_kv_heads` says, attn_tp = tp / dp under DP attention.
    Every layer is counted as full attention (sliding-window or linear layers hold less)."""
    text = model.text
    layers = text.get("num_hidden_layers")
    if not isinstance(layers, int) or layers <= 0:
        return None
    tp, pp = int(number(flags, "--tp-size", 1)), int(number(flags, "--pp-size", 1))
    per_rank = math.ceil(layers / max(pp, 1))
    kv_flag = flags.get("--kv-cache-dtype")
    element = dtype_bytes(kv_flag) if kv_flag not in (None, "auto") else None
    if element is None:
        model_dtype = flags.get("--dtype")
        element = dtype_bytes(model_dtype) if model_dtype not in (None, "auto") else 2.0  # auto: 16-bit
    if element is None:
        return None  # a dtype spelled in a way not known here
    dtype_words = f"{element:g} byte(s) each"
    if isinstance(text.get("kv_lora_rank"), int):
        width = text["kv_lora_rank"] + int(text.get("qk_rope_head_dim") or 0)
        return (
            per_rank * width * element,
            f"MLA: {per_rank} layers x {width} (kv_lora_rank + qk_rope_head_dim), {dtype_words}",
        )
    heads = text.get("num_attention_heads")
    kv_heads = text.get("num_key_value_heads") or heads
    head_dim = text.get("head_dim") or (text.get("hidden_size", 0) // heads if isinstance(heads, int) and heads else 0)
    if not isinstance(kv_heads, int) or not isinstance(head_dim, int) or head_dim <= 0:
        return None
    dp = int(number(flags, "--dp-size", 1))
    attn_tp = max(tp // dp, 1) if "--enable-dp-attention" in flags else tp
    on_rank = max(1, kv_heads // attn_tp)
    return (
        per_rank * 2 * on_rank * head_dim * element,
        f"{per_rank} layers x K and V x {on_rank} KV head(s) x {head_dim}, {dtype_words}",
    )


def context_length(model: ModelFiles, flags: Mapping[str, str | None]) -> int | None:
    if flags.get("--context-length") is not None:
        return int(number(flags, "--context-length", 0)) or None
    found = model.text.get("max_position_embeddings")
    return found if isinstance(found, int) and found > 0 else None


def fit_findings(
    model: ModelFiles,
    flags: Mapping[str, str | None],
    env: Mapping[str, str],
    use: GpuUse,
    view: Viewpoint,
    host: str,
    version: str,
) -> list[Finding]:
    """The fit of `model` on the GPUs this node's ranks use, as one finding."""
    tp, pp = int(number(flags, "--tp-size", 1)), int(number(flags, "--pp-size", 1))
    shards = max(tp * pp, 1)
    weights = weights_on_gpus(model, flags)
    if weights is None:
        return [
            Finding(
                INFO,
                RULE,
                [],
                f"{model.name}: the size of its weights is unknown ({model.path} on {host} has no "
                "model.safetensors.index.json with metadata.total_size and no *.safetensors files); "
                "no memory estimate.",
            )
        ]
    held, said = weights
    per_gpu = held / shards
    split = f"tp {tp} x pp {pp}" + (
        " (DP attention: attention weights are split over tp / dp only, so more than this)"
        if "--enable-dp-attention" in flags
        else ""
    )
    head = f"{model.name}: {said}; {gib(per_gpu)} per GPU over {shards} GPU(s), {split}"
    if not use.gpus:
        return [Finding(INFO, RULE, [], f"{head}. GPU memory unknown: {use.missing or 'no GPUs listed'}.")]
    wanted = gpus_of(flags, env, len(use.gpus))
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if not all(v.isdigit() for v in visible):  # UUIDs or MIG names: not matched to nvidia-smi's rows here
        return [
            Finding(
                INFO, RULE, [], f"{head}. Which GPUs CUDA_VISIBLE_DEVICES={','.join(visible)} means is not read here."
            )
        ]
    needed = ranks_on_node(flags)
    if len(wanted) < needed:
        return [
            Finding(
                ERROR,
                RULE,
                ["--tp-size", "--pp-size", "--dp-size"],
                f"{head}. This node's ranks need {needed} GPUs from --base-gpu-id "
                f"{int(number(flags, '--base-gpu-id', 0))}; {host} has {len(wanted)} of them usable "
                f"({len(use.gpus)} GPU(s) listed by nvidia-smi).",
                "RuntimeError",
                "Lower the parallel sizes, or check --base-gpu-id and CUDA_VISIBLE_DEVICES.",
            )
        ]
    by_index = {g.index: g for g in use.gpus}
    others = {i: 0 for i in wanted}
    for p in use.processes:
        if p.gpu in others and p.outside(view):
            others[p.gpu] += p.used_mib or 0
    # The GPU with least memory left for the server decides.
    index = min(wanted, key=lambda i: (by_index[i].total_mib - others[i], i))
    gpu = by_index[index]
    total, free = gpu.total_mib * MIB, (gpu.total_mib - others[index]) * MIB
    fraction = fraction_of(flags, env, version, gpu.total_mib, tp, pp)
    where = f"GPU {index} of {host}: {gib(total)}" + (
        f", {gib(total - free)} held by processes outside {view.unit}, {gib(free)} free" if others[index] else ""
    )
    if per_gpu > total:
        return [
            Finding(
                ERROR,
                RULE,
                ["--tp-size", "--pp-size"],
                f"{head}; more than all of {where}. Loading the weights runs out of memory.",
                "torch.OutOfMemoryError",
                "Raise --tp-size or --pp-size, or serve a quantized checkpoint.",
            )
        ]
    if per_gpu > free:
        return [
            Finding(
                ERROR,
                RULE,
                ["--tp-size", "--pp-size"],
                f"{head}; more than the {where}. Loading the weights runs out of memory.",
                "torch.OutOfMemoryError",
                "End the other processes on those GPUs (see gpu-held-by-other), or use other GPUs "
                "(--base-gpu-id, CUDA_VISIBLE_DEVICES).",
            )
        ]
    if fraction.value is None:
        return [Finding(INFO, RULE, [], f"{head}; {where}; KV cache size unknown with {fraction.words}.")]
    budget = free * fraction.value
    left = budget - per_gpu
    if left <= 0:
        exception = "ValueError" if release_tuple(version or "0") >= (0, 5, 19) else "RuntimeError"
        return [
            Finding(
                ERROR,
                RULE,
                ["--mem-fraction-static", "--tp-size"],
                f"{head}; {where}. With {fraction.words}, SGLang's static budget is {gib(budget)} of it, "
                "less than the weights: nothing is left for the KV cache "
                "(`Loaded weights leave no GPU memory for the KV cache`).",
                exception,
                "Raise --tp-size or --pp-size, serve a quantized checkpoint, or raise --mem-fraction-static.",
            )
        ]
    kv = kv_bytes_per_token(model, flags)
    if kv is None:
        return [
            Finding(
                INFO,
                RULE,
                [],
                f"{head}; {where}; {gib(left)} left for the KV cache with {fraction.words} "
                "(its size per token is not in config.json).",
            )
        ]
    per_token, terms = kv
    tokens = int(left / per_token)
    context = context_length(model, flags)
    at_most = "at most " if fraction.bound else ""
    said_kv = (
        f"{head}; {where}. With {fraction.words}, {gib(left)} is left for the KV cache; at "
        f"{per_token / 1024:g} KiB per token ({terms}) that is {at_most}about {tokens:,} tokens"
        + (f" (context length {context:,})" if context else "")
    )
    if context and tokens < context:
        return [
            Finding(
                WARNING,
                RULE,
                ["--mem-fraction-static", "--context-length"],
                f"{said_kv}: less than one request of the full context length.",
                None,
                "Lower --context-length, raise --tp-size, use --kv-cache-dtype fp8_e4m3, "
                "or raise --mem-fraction-static.",
            )
        ]
    return [Finding(INFO, RULE, [], f"{said_kv}.")]
