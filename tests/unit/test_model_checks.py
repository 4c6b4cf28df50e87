"""The release's checks that a model's config.json decides (cockpit.sglang.preflight.model_checks):
the context length SGLang derives, read off real models' config.json, and held to what 0.5.23
itself did with the eval's model (tests/data/sglang-0.5.23/static-eval-outcomes.json); and when
the model settles the chunked-prefill-by-page check, against the release's own hooks."""

from __future__ import annotations

import json

import pytest

from cockpit.sglang.preflight.architectures import MODEL_CONFIG, chunked_prefill_unsupported
from cockpit.sglang.preflight.model_checks import (
    ALLOW_LONGER,
    chunk_page_findings,
    context_findings,
    derived_context_length,
)
from cockpit.sglang.preflight.model_files import ModelFiles
from tests.conftest import ROOT

MODELS = ROOT / "tests" / "data" / "models"
OUTCOMES = json.loads((ROOT / "tests" / "data" / "sglang-0.5.23" / "static-eval-outcomes.json").read_text())
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 2048}  # the eval's


def _model(name: str) -> ModelFiles:
    return ModelFiles(f"/models/{name}", json.loads((MODELS / name / "config.json").read_text()))


@pytest.mark.parametrize(
    ("name", "derived"),
    [
        ("Llama-3.1-8B-Instruct", (131072, "max_position_embeddings")),  # llama3 rope: factor not applied
        ("Qwen2.5-7B-Instruct", (32768, "max_position_embeddings")),
        ("Qwen3-8B", (40960, "max_position_embeddings")),
        ("DeepSeek-V3", (163840, "max_position_embeddings")),
    ],
)
def test_the_length_is_what_sglang_derives_from_real_configs(name: str, derived: tuple[int, str]) -> None:
    assert derived_context_length(_model(name)) == derived


def test_only_a_plain_file_decides() -> None:
    def length(config: dict) -> tuple[int, str] | None:
        return derived_context_length(ModelFiles("/m", config))

    assert length({"seq_length": 8192, "max_position_embeddings": 4096}) == (8192, "seq_length")  # SGLang's order
    assert length({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}}) is None
    assert length({"max_position_embeddings": 4096, "rope_scaling": {"factor": 1}}) == (4096, "max_position_embeddings")
    assert length({"model_type": "llama"}) is None  # transformers' class default decides
    assert length({"max_position_embeddings": 4096, "text_config": {"model_type": "x"}}) is None  # the nested one alone


def test_a_longer_context_is_an_error_naming_both_numbers_and_the_variable() -> None:
    model = _model("Llama-3.1-8B-Instruct")
    [said] = context_findings(model, {"--context-length": "200000"}, {}, "0.5.23")
    assert said.severity == "error" and said.would_raise == "ValueError" and said.flags == ["--context-length"]
    assert said.message == (
        "SGLang 0.5.23 will stop at start-up: ValueError in _derive_context_length (--context-length 200,000 is "
        "above the 131,072 that Llama-3.1-8B-Instruct's config.json gives as max_position_embeddings, and "
        f"{ALLOW_LONGER} is not set)."
    )
    assert context_findings(model, {"--context-length": "200000"}, {ALLOW_LONGER: "0"}, "0.5.23")[0].message.endswith(
        f"and {ALLOW_LONGER}=0 in the unit's environment)."
    )
    assert context_findings(model, {"--context-length": "131072"}, {}, "0.5.23") == []
    assert context_findings(model, {"--context-length": "200000"}, {ALLOW_LONGER: "True"}, "0.5.23") == []
    [unread] = context_findings(model, {"--context-length": "200000"}, {ALLOW_LONGER: "maybe"}, "0.5.23")
    assert unread.message.endswith(
        f"{ALLOW_LONGER}=maybe in the unit's environment (no boolean SGLang reads: it takes its default, false))."
    )  # EnvField.get warns of a value EnvBool cannot parse and returns the default
    assert context_findings(model, {}, {}, "0.5.23") == []


def test_it_agrees_with_what_the_release_did_with_the_eval_model() -> None:
    cases = [c for c in OUTCOMES["sets"] if "--context-length" in c["flags"]]
    assert len(cases) >= 3
    for case in cases:
        length = case["flags"][case["flags"].index("--context-length") + 1]
        said = context_findings(ModelFiles("/m", TINY), {"--context-length": length}, {}, "0.5.23")
        refused = case["real"] == "ValueError" and case["where"] == "_derive_context_length"
        assert bool(said) == refused, case


def test_the_release_lists_the_architectures_it_turns_chunked_prefill_off_for(sglang_root) -> None:
    """Read off `is_multimodal_chunked_prefill_supported` of the oldest release and of 0.5.23."""
    old, new = (
        chunked_prefill_unsupported((sglang_root(v) / MODEL_CONFIG).read_text()) for v in ("0.4.6.post5", "0.5.23")
    )
    plain = {"CLIPModel", "Grok1AForCausalLM", "Grok1VForCausalLM", "LlavaLlamaForCausalLM"}
    assert old == {*plain, "MllamaForConditionalGeneration"}
    assert new == {*plain, "MllamaForConditionalGeneration", "MossVLForConditionalGeneration"}
    assert chunked_prefill_unsupported("def f(:") is None and chunked_prefill_unsupported("x = 1") is None


def test_the_hooks_that_turn_chunked_prefill_off_are_those_the_check_reads(sglang_root) -> None:
    """0.5.23 turns chunked prefill off in five places of model_hook.py (a decision checkpoint,
    HRM-Text, an embedding spec, EmbeddingGemma, a multimodal architecture without it; the Clef
    and Kev heads as a `("chunked_prefill_size", -1)` pair) and for --enable-mis: a release that
    adds one must be read again before keeps_chunked_prefill is trusted with it."""
    hooks = sglang_root("0.5.23") / "sglang" / "srt" / "arg_groups"
    counts = {
        path.name: text.count("chunked_prefill_size=-1") + text.count('("chunked_prefill_size", -1)')
        for path in hooks.glob("*.py")
        if "chunked_prefill_size" in (text := path.read_text())
    }
    assert {name: n for name, n in counts.items() if n} == {"model_hook.py": 6, "attention_hook.py": 1}


UNSUPPORTED = frozenset({"LlavaLlamaForCausalLM", "Grok1VForCausalLM"})
CHUNK_1000_PAGE_64 = {"--chunked-prefill-size": "1000", "--page-size": "64"}


@pytest.mark.parametrize("name", ["Llama-3.1-8B-Instruct", "Qwen3-8B", "DeepSeek-V3"])
def test_a_plain_causal_lm_makes_the_chunk_by_page_check_sure(name) -> None:
    [found] = chunk_page_findings(_model(name), CHUNK_1000_PAGE_64, "0.5.23", UNSUPPORTED)
    assert (found.severity, found.rule, found.would_raise) == ("error", "chunked-prefill-page", "AssertionError")
    assert found.message.startswith(
        "SGLang 0.5.23 will stop at start-up: AssertionError in check_server_args (--chunked-prefill-size 1000 "
        f"is not divisible by --page-size 64); {name} is a "
    )
    assert found.flags == ["--chunked-prefill-size", "--page-size"]


@pytest.mark.parametrize(
    ("config", "flags"),
    [
        ({"architectures": ["LlavaLlamaForCausalLM"]}, CHUNK_1000_PAGE_64),  # the release lists it
        ({"architectures": ["HrmTextForCausalLM"], "model_type": "hrm_text"}, CHUNK_1000_PAGE_64),
        ({"architectures": ["Gemma3ForCausalLM"], "use_bidirectional_attention": True}, CHUNK_1000_PAGE_64),
        ({"architectures": ["Qwen3_5ForCausalLM"]}, CHUNK_1000_PAGE_64),  # Kev's pointer head
        ({"architectures": ["Qwen3Model"]}, CHUNK_1000_PAGE_64),  # an embedding model
        ({"architectures": ["LlamaForCausalLM", "X"]}, CHUNK_1000_PAGE_64),
        (TINY, {**CHUNK_1000_PAGE_64, "--is-embedding": None}),
        (TINY, {**CHUNK_1000_PAGE_64, "--dllm-algorithm": "LowConfidence"}),
        (TINY, {"--chunked-prefill-size": "64", "--page-size": "48"}),  # trtllm_mha would set 64
        (TINY, {"--chunked-prefill-size": "1024", "--page-size": "64"}),  # divisible
    ],
)
def test_where_a_model_or_a_backend_may_change_it_nothing_is_said(config, flags) -> None:
    assert chunk_page_findings(ModelFiles("/m", config), flags, "0.5.23", UNSUPPORTED) == []


def test_without_the_releases_list_nothing_is_said() -> None:
    assert chunk_page_findings(ModelFiles("/m", TINY), CHUNK_1000_PAGE_64, "0.5.23", None) == []
    assert len(chunk_page_findings(ModelFiles("/m", TINY), CHUNK_1000_PAGE_64, "0.5.23", frozenset())) == 1


def test_the_models_error_settles_the_flags_info(sglang_root) -> None:
    """`cockpit preflight` and the write modal show the model's ERROR alone, not also the flags'
    INFO that the dry run would decide, for the same rule; another rule's INFO stays."""
    from cockpit.sglang.catalog.flags import load_catalog
    from cockpit.sglang.preflight.preflight import check_static, given_flags, settled

    catalog = load_catalog(sglang_root("0.5.23"))
    argv = ["--model-path", "/m", "--chunked-prefill-size", "1000", "--page-size", "64", "--kv-cache-dtype", "mxfp8"]
    static = check_static(argv, catalog)
    assert [(f.severity, f.rule) for f in static] == [("info", "kv-mxfp8-blackwell"), ("info", "chunked-prefill-page")]
    model = chunk_page_findings(ModelFiles("/m", TINY), given_flags(argv, catalog), "0.5.23", frozenset())
    assert [(f.severity, f.rule) for f in settled(static + model)] == [
        ("info", "kv-mxfp8-blackwell"),
        ("error", "chunked-prefill-page"),
    ]


def test_the_dry_runs_verdict_stays_beside_its_errors() -> None:
    """The dry run's INFO is its verdict, not a guess its errors make sure of: `cockpit preflight`
    lost "…: failed" on every failing dry run when `settled` dropped it (CI of stop 42)."""
    from cockpit.sglang.preflight.dry_runs import Verdict
    from cockpit.sglang.preflight.preflight import ERROR, Finding, settled

    error = Finding(ERROR, "dry-run", ["--chunked-prefill-size"], "The dry run failed: invalid int value")
    verdict = Verdict("lab", "0.5.23", "failed", (error,))
    assert settled([verdict.said(), error]) == [verdict.said(), error]
