"""Will it fit: the recorded model directories (tests/data/models) on H200s as nvidia-smi printed
one (tests/data/nvidia-smi), with SGLang 0.5.23's memory rules."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cockpit.remote.local import LocalHost
from cockpit.sglang.preflight.model_files import read_model_files, total_size_of
from cockpit.sglang.preflight.model_fit import RULE, fit_findings, fraction_of, kv_bytes_per_token
from cockpit.systemd import gpu_use
from cockpit.systemd.gpu_use import GpuUse
from cockpit.systemd.process_facts import SEP, Viewpoint

DATA = Path(__file__).parents[1] / "data"
MODELS = DATA / "models"
CAPTURE = json.loads((DATA / "nvidia-smi" / "apps-capture.json").read_text())
VIEW = Viewpoint("sglang.service", "aaaa")
GIB = 1 << 30


def _real(when: str, query: str) -> str:
    return next(
        c["stdout"]
        for c in CAPTURE["captures"]
        if c["when"].startswith(when) and c["argv"][1:] == [query, gpu_use.FORMAT]
    )


IDLE_ROW = _real("idle", gpu_use.GPU_QUERY).strip()  # `0, GPU-67aa..., 0, 143771`: one real H200


def h200s(count: int, held_mib: dict[int, int] | None = None) -> GpuUse:
    """`count` GPUs printed as the real H200 was (its row, renumbered), and a process holding
    `held_mib[i]` MiB on GPU i (no facts: a process outside the unit)."""
    index, uuid, _, total = (c.strip() for c in IDLE_ROW.split(","))
    gpus = "".join(f"{i}, {uuid}-{i}, {(held_mib or {}).get(i, 0)}, {total}\n" for i in range(count))
    apps = "".join(f"{4000 + i}, /usr/bin/python3, {mib}, {uuid}-{i}\n" for i, mib in (held_mib or {}).items())
    return gpu_use.parse(gpus + SEP + "\n" + apps)


async def model(name: str):
    return await read_model_files(LocalHost("gpu-1"), str(MODELS / name))


async def fit(name: str, flags: dict[str, str | None], use: GpuUse, version: str = "0.5.23", env=None):
    return fit_findings(await model(name), flags, env or {}, use, VIEW, "gpu-1", version)


def test_the_real_h200_row_reads_as_143771_mib() -> None:
    assert [(g.index, g.total_mib) for g in h200s(8).gpus] == [(i, 143771) for i in range(8)]


async def test_the_index_total_size_is_the_weight_count() -> None:
    found = await model("Llama-3.1-70B-Instruct")
    assert found.weight_bytes == 141107412992 and found.weight_source == "model.safetensors.index.json total_size"
    assert found.architecture == "LlamaForCausalLM"
    assert total_size_of(b'{"metadata": {"total_size": 688586727753}, "weight_map": {"lm_head') == 688586727753
    assert total_size_of(b'{"weight_map": {"model.total_size": "a"') is None and total_size_of(b"not json") is None


async def test_without_an_index_the_safetensors_files_are_summed(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((MODELS / "Qwen3-8B" / "config.json").read_text())
    for i, size in enumerate((5_000_000_000, 3_000_000_000)):
        shard = tmp_path / f"model-0000{i + 1}-of-00002.safetensors"
        shard.touch()
        os.truncate(shard, size)  # sparse: only the size counts
    found = await read_model_files(LocalHost(), str(tmp_path))
    assert (found.weight_bytes, found.weight_source) == (8_000_000_000, "2 *.safetensors files")


def test_sglang_0_5_23s_own_fraction_on_an_h200() -> None:
    # (143771 - max(512 + 2048 * 1.5 + tp*pp/8*1024, 10240)) / 143771
    assert fraction_of({}, {}, "0.5.23", 143771, 8, 1).value == 0.929
    assert fraction_of({}, {"SGLANG_ENABLE_POST_CAPTURE_KV_SIZING": "1"}, "0.5.23", 143771, 8, 1).value == 0.982
    assert fraction_of({"--mem-fraction-static": "0.8"}, {}, "0.5.9", 143771, 1, 1).value == 0.8
    assert fraction_of({}, {}, "0.5.9", 143771, 1, 1).value is None


async def test_kv_bytes_per_token_gqa_and_mla() -> None:
    assert kv_bytes_per_token(await model("Llama-3.1-70B-Instruct"), {"--tp-size": "8"})[0] == 80 * 2 * 1 * 128 * 2
    assert kv_bytes_per_token(await model("Llama-3.1-8B-Instruct"), {})[0] == 32 * 2 * 8 * 128 * 2
    # MLA: one latent of 512 + 64 per layer on every rank, whatever the tp
    assert kv_bytes_per_token(await model("DeepSeek-V3"), {"--tp-size": "8"})[0] == 61 * 576 * 2
    fp8 = kv_bytes_per_token(await model("DeepSeek-V3"), {"--tp-size": "8", "--kv-cache-dtype": "fp8_e4m3"})
    assert fp8[0] == 61 * 576 and "MLA" in fp8[1]
    # DP attention: KV heads split over tp / dp (8 heads over attn_tp 2)
    dp = {"--tp-size": "8", "--dp-size": "4", "--enable-dp-attention": None}
    assert kv_bytes_per_token(await model("Llama-3.1-70B-Instruct"), dp)[0] == 80 * 2 * 4 * 128 * 2


async def test_llama_70b_at_tp8_on_eight_h200s_fits() -> None:
    [f] = await fit("Llama-3.1-70B-Instruct", {"--tp-size": "8"}, h200s(8))
    assert (f.rule, f.severity) == (RULE, "info")
    assert "131.4 GiB stored" in f.message and "16.4 GiB per GPU over 8 GPU(s), tp 8 x pp 1" in f.message
    assert "at most 0.929" in f.message and "114.0 GiB is left for the KV cache" in f.message
    assert "40 KiB per token" in f.message and "about 2,98" in f.message and "context length 131,072" in f.message


@pytest.mark.parametrize("fraction", [None, "0.9"])
async def test_llama_70b_on_one_h200_does_not_fit(fraction: str | None) -> None:
    flags = {} if fraction is None else {"--mem-fraction-static": fraction}
    [f] = await fit("Llama-3.1-70B-Instruct", flags, h200s(1))
    assert (f.severity, f.would_raise) == ("error", "ValueError")
    assert "131.4 GiB per GPU over 1 GPU(s)" in f.message and "GPU 0 of gpu-1: 140.4 GiB" in f.message
    budget = "130.4" if fraction is None else "126.4"
    assert f"static budget is {budget} GiB of it, less than the weights" in f.message


async def test_an_older_release_without_the_flag_is_never_an_error_on_the_fraction() -> None:
    [f] = await fit("Llama-3.1-70B-Instruct", {}, h200s(1), version="0.5.9")
    assert f.severity == "info" and "KV cache size unknown" in f.message


async def test_llama_8b_beside_a_process_holding_120_gib_is_tight() -> None:
    [f] = await fit("Llama-3.1-8B-Instruct", {}, h200s(1, {0: 120 * 1024}))
    assert (f.severity, f.flags) == ("warning", ["--mem-fraction-static", "--context-length"])
    assert "120.0 GiB held by processes outside sglang.service, 20.4 GiB free" in f.message
    assert "4.0 GiB is left for the KV cache" in f.message and "128 KiB per token" in f.message
    assert "about 32," in f.message and "less than one request of the full context length" in f.message


async def test_llama_8b_beside_a_process_holding_130_gib_cannot_load() -> None:
    [f] = await fit("Llama-3.1-8B-Instruct", {}, h200s(1, {0: 130 * 1024}))
    assert (f.severity, f.would_raise) == ("error", "torch.OutOfMemoryError")
    assert "15.0 GiB per GPU" in f.message and "10.4 GiB free" in f.message


async def test_the_gpu_with_least_left_decides() -> None:
    [f] = await fit("Llama-3.1-8B-Instruct", {"--tp-size": "2"}, h200s(2, {1: 138 * 1024}))
    assert f.severity == "error" and "GPU 1 of gpu-1" in f.message


async def test_the_units_own_process_does_not_count() -> None:
    use = h200s(1, {0: 130 * 1024})
    own = Viewpoint("sglang.service", "aaaa")
    mine = [
        p.__class__(**{**p.__dict__, "cgroup": "/system.slice/sglang.service", "invocation": "aaaa"})
        for p in use.processes
    ]
    [f] = fit_findings(await model("Llama-3.1-8B-Instruct"), {}, {}, GpuUse(use.gpus, mine), own, "gpu-1", "0.5.23")
    assert f.severity == "info" and "held by processes" not in f.message


async def test_deepseek_v3_fp8_at_tp8_fits_with_its_mla_cache() -> None:
    [f] = await fit("DeepSeek-V3", {"--tp-size": "8"}, h200s(8))
    assert f.severity == "info" and "641.3 GiB stored" in f.message and "80.2 GiB per GPU" in f.message
    assert "68.625 KiB per token (MLA: 61 layers x 576" in f.message


async def test_online_fp8_halves_a_bf16_checkpoint() -> None:
    [f] = await fit("Llama-3.1-8B-Instruct", {"--quantization": "fp8"}, h200s(1))
    assert "about 7.5 GiB once --quantization fp8 quantizes it at load" in f.message and "7.5 GiB per GPU" in f.message
    # an fp8 checkpoint is counted as stored, not halved again
    [d] = await fit("DeepSeek-V3", {"--tp-size": "8", "--quantization": "fp8"}, h200s(8))
    assert "80.2 GiB per GPU" in d.message


async def test_unknown_sizes_are_said_and_nothing_more() -> None:
    [f] = await fit("Qwen3-8B", {}, h200s(1))
    assert f.severity == "info" and "the size of its weights is unknown" in f.message


async def test_more_ranks_than_gpus() -> None:
    [f] = await fit("Llama-3.1-8B-Instruct", {"--tp-size": "8"}, h200s(1))
    assert f.severity == "error" and "need 8 GPUs" in f.message and "has 1 of them usable" in f.message


async def test_gpus_named_by_uuid_are_not_guessed() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "GPU-67aad03a-3aa0-161f-39bd-35049fe2d9ee"}
    [f] = await fit("Llama-3.1-70B-Instruct", {}, h200s(1), env=env)
    assert f.severity == "info" and "CUDA_VISIBLE_DEVICES=GPU-67aad03a" in f.message
    [g] = await fit(
        "Llama-3.1-8B-Instruct", {"--tp-size": "2"}, h200s(8, {3: 138 * 1024}), env={"CUDA_VISIBLE_DEVICES": "2,3"}
    )
    assert g.severity == "error" and "GPU 3 of gpu-1" in g.message  # rank 1 is nvidia-smi's GPU 3


async def test_a_host_without_nvidia_smi_gets_the_weights_alone() -> None:
    [f] = await fit("Llama-3.1-8B-Instruct", {}, GpuUse(missing="no nvidia-smi on gpu-1", no_tool=True))
    assert f.severity == "info" and "15.0 GiB per GPU" in f.message and "no nvidia-smi on gpu-1" in f.message


def test_the_recorded_models_are_small() -> None:
    sizes = [os.path.getsize(p) for p in MODELS.rglob("*.json")]
    assert sizes and max(sizes) < 4096
