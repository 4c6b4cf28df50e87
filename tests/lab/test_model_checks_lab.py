"""The model checks against the lab: a model directory on the host (config.json and the real
index's total_size, no weights) and the stand-in's GPUs, eight H200s of which the demo unit's
ranks hold their 0.85 share. What `cockpit preflight --host H --unit U --json` says of it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT, LabHandle
from tests.lab.standin_units import standin_unit
from tests.unit.test_preflight import COCKPIT

MODELS = ROOT / "tests" / "data" / "models"
BIG = "/models/Llama-3.1-70B-Instruct"
SPEC = (
    "--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 "
    "--speculative-num-draft-tokens 8"
)


@pytest.fixture(scope="module")
def big_model(lab: LabHandle) -> Iterator[str]:
    lab.ssh("mkdir", "-p", BIG)
    for name in ("config.json", "model.safetensors.index.json"):
        lab.ssh("tee", f"{BIG}/{name}", input=(MODELS / "Llama-3.1-70B-Instruct" / name).read_text())
    yield BIG
    lab.ssh("rm", "-rf", BIG)


def model_findings(lab: LabHandle, unit: str, rule: str) -> list[dict]:
    out = subprocess.run(
        [COCKPIT, "preflight", "--host", lab.name, "--unit", unit, "--json", "--static-only"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return [f for f in json.loads(out.stdout) if f["rule"] == rule]


def test_a_70b_on_one_gpu_does_not_fit(lab: LabHandle, big_model: str) -> None:
    with standin_unit(
        lab, "sglang-fit-tp1.service", 30110, flags=f"--model-path {big_model} --tp-size 1", start=False
    ) as unit:
        [fit] = model_findings(lab, unit, "model-fit")
    assert fit["severity"] == "error", fit
    assert "131.4 GiB per GPU over 1 GPU(s), tp 1 x pp 1" in fit["message"], fit
    # The demo unit's rank 0 holds 0.85 of GPU 0: the estimate counts it, by the stand-in's own nvidia-smi.
    assert "held by processes outside sglang-fit-tp1.service" in fit["message"], fit


def test_a_70b_over_eight_gpus_fits_its_weights_but_not_a_full_context(lab: LabHandle, big_model: str) -> None:
    with standin_unit(lab, "sglang-fit-tp8.service", 30111, flags=f"--model-path {big_model}", start=False) as unit:
        [fit] = model_findings(lab, unit, "model-fit")
    assert fit["severity"] == "warning", fit
    assert "16.4 GiB per GPU over 8 GPU(s)" in fit["message"] and "less than one request" in fit["message"], fit


def test_a_target_given_as_the_eagle3_draft_is_named(lab: LabHandle) -> None:
    flags = f"{SPEC} --speculative-draft-model-path /models/Llama-3.1-8B-Instruct"
    with standin_unit(lab, "sglang-draft-bad.service", 30112, flags=flags, start=False) as unit:
        [draft] = [f for f in model_findings(lab, unit, "draft-fit") if f["severity"] == "error"]
    assert "LlamaForCausalLM" in draft["message"] and draft["flags"][0] == "--speculative-draft-model-path", draft
    flags = f"{SPEC} --speculative-draft-model-path /models/EAGLE3-LLaMA3.1-Instruct-8B"
    with standin_unit(lab, "sglang-draft-good.service", 30113, flags=flags, start=False) as unit:
        assert model_findings(lab, unit, "draft-fit") == []


def test_a_chunk_the_page_does_not_divide_is_an_error_for_a_plain_llama(lab: LabHandle, big_model: str) -> None:
    """The flags alone leave it to the dry run (a model hook may turn chunked prefill off); the
    model's config.json (LlamaForCausalLM) and the host's release (its configs/model_config.py)
    settle it: one finding, an error, that names the architecture."""
    flags = f"--model-path {big_model} --chunked-prefill-size 1000 --page-size 64"
    with standin_unit(lab, "sglang-chunk.service", 30112, flags=flags, start=False) as unit:
        [chunk] = model_findings(lab, unit, "chunked-prefill-page")
    assert chunk["severity"] == "error", chunk
    assert chunk["would_raise"] == "AssertionError", chunk
    assert "Llama-3.1-70B-Instruct is a LlamaForCausalLM, a model no hook of the release" in chunk["message"], chunk
