"""The release's start-up checks that the model's own config.json decides, read before a start.

`ModelConfig._derive_context_length` (every release the catalog supports) refuses a
`--context-length` above the length it derives from the model's config, unless the environment
says `SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN` (or `SGLANG_IS_IN_CI`) is true. The length is
`get_context_length`'s: the first of CONTEXT_KEYS the language model's config holds, times a rope
scaling factor. It is decided here only where the file says it plainly: a config without any of
those keys gets its class's default from transformers, and a rope scaling factor other than 1 is
read differently by transformers' releases, so neither says anything. Both numbers are named
with where each comes from, and the variable with the unit's value of it.

`check_server_args` refuses a `--chunked-prefill-size` that `--page-size` does not divide, but the
release's model hooks may first turn chunked prefill off (-1), so the flags alone only say INFO.
The model's config.json settles it where it names a plain causal LM none of those hooks touches:
0.5.23's `_handle_model_specific_adjustments` and `_handle_model_capability_adjustments` turn it
off for a Qwen3.5 decision checkpoint, HRM-Text's prefix LM, an embedding model (`--is-embedding`,
EmbeddingGemma's bidirectional Gemma 3, the Clef and Kev heads on Qwen3.5), and a multimodal
architecture the release lists as lacking chunked prefill (read off the release, as
`chunked_prefill_unsupported`); `test_model_checks` counts those hooks in the release's source.
The GPU has a say too: an attention backend that refuses the page size given sets its own (64 or
128: `_mla_backend_page_constraints`, `_fa4_page_constraint`, `_intel_xpu_page_constraint`), and
the diffusion LLM its block size; so it is sure only for a chunk those pages do not divide either,
without `--dllm-algorithm`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cockpit.sglang.catalog.generation import env_bool
from cockpit.sglang.preflight.model_files import ModelFiles
from cockpit.sglang.preflight.preflight import ERROR, Finding
from cockpit.sglang.preflight.rule_families import BY_NAME, Flags, chunk_per_rank

# get_context_length's keys (utils/hf_transformers/common.py in 0.5.23), in its order of preference.
CONTEXT_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")
ALLOW_LONGER = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
IN_CI = "SGLANG_IS_IN_CI"


def derived_context_length(model: ModelFiles) -> tuple[int, str] | None:
    """(length, the config key it came from) as SGLang derives it, or None where the file alone
    does not decide it."""
    config: Mapping[str, Any] = model.config or {}
    nested = config.get("text_config")
    text = nested if isinstance(nested, dict) else config  # SGLang's hf_text_config: the nested one alone
    rope = text.get("rope_scaling")
    if rope:
        if not isinstance(rope, dict):
            return None
        plain = "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3"
        if not plain and rope.get("factor", 1) != 1:
            return None
    for key in CONTEXT_KEYS:
        value = text.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return value, key
    return None


def _switch(env: Mapping[str, str], name: str) -> bool:
    """An EnvBool whose default is false, as SGLang reads it: a value it cannot parse is warned
    of and read as the default."""
    value = env.get(name)
    return value is not None and env_bool(value) is True


def context_findings(
    model: ModelFiles, flags: Mapping[str, str | None], env: Mapping[str, str], version: str
) -> list[Finding]:
    """The context-length check of `_derive_context_length` for the target model."""
    given = flags.get("--context-length")
    try:
        length = int(given) if given is not None else None
    except ValueError:
        return []  # argparse's to refuse
    derived = derived_context_length(model)
    if length is None or derived is None or length <= derived[0]:
        return []
    if _switch(env, ALLOW_LONGER) or _switch(env, IN_CI):
        return []  # allowed: SGLang warns and uses it
    said = env.get(ALLOW_LONGER)
    where = f"{ALLOW_LONGER} is not set"
    if said is not None:
        unread = " (no boolean SGLang reads: it takes its default, false)" if env_bool(said) is None else ""
        where = f"{ALLOW_LONGER}={said} in the unit's environment{unread}"
    return [
        Finding(
            ERROR,
            "context-longer-than-model",
            ["--context-length"],
            f"SGLang {version} will stop at start-up: ValueError in _derive_context_length (--context-length "
            f"{length:,} is above the {derived[0]:,} that {model.name}'s config.json gives as {derived[1]}, "
            f"and {where}).",
            "ValueError",
            f"Lower --context-length to {derived[0]:,} or less, or set Environment={ALLOW_LONGER}=1 if the model "
            "really takes longer inputs (its rope scaling, say).",
        )
    ]


CHUNK_PAGE = BY_NAME["chunked-prefill-page"]
FORCED_PAGES = (64, 128)  # the page sizes an attention backend sets where it refuses the one given


def keeps_chunked_prefill(model: ModelFiles, flags: Mapping[str, str | None], unsupported: frozenset[str]) -> bool:
    """Whether no model hook of the release turns chunked prefill off for this model (see the
    module's docstring); `unsupported`, the release's chunked_prefill_unsupported."""
    archs = (model.config or {}).get("architectures")
    if not isinstance(archs, list) or len(archs) != 1 or not isinstance(archs[0], str):
        return False
    arch = archs[0]
    return (
        arch.endswith("ForCausalLM")
        and arch not in unsupported
        and not arch.startswith(("Qwen3_5", "HrmText"))
        and (model.config or {}).get("model_type") != "hrm_text"
        and not model.text.get("use_bidirectional_attention")
        and "--is-embedding" not in flags
    )


def chunk_page_findings(
    model: ModelFiles, flags: Mapping[str, str | None], version: str, unsupported: frozenset[str] | None
) -> list[Finding]:
    """check_server_args' chunked-prefill-by-page check, sure where the model keeps chunked
    prefill (None `unsupported`: the release's list could not be read, nothing said)."""
    if unsupported is None or not CHUNK_PAGE.holds_for(version):
        return []
    why, per_rank = CHUNK_PAGE.broken(Flags(flags)), chunk_per_rank(Flags(flags))
    if why is None or per_rank is None or not keeps_chunked_prefill(model, flags, unsupported):
        return []
    if "--dllm-algorithm" in flags or any(per_rank[0] % page == 0 for page in FORCED_PAGES):
        return []
    _, function = CHUNK_PAGE.location(version)
    return [
        Finding(
            ERROR,
            CHUNK_PAGE.name,
            [f for f in CHUNK_PAGE.flags if f in flags],
            f"SGLang {version} will stop at start-up: {CHUNK_PAGE.exception} in {function} ({why}); "
            f"{model.name} is a {model.architecture}, a model no hook of the release turns chunked prefill off for, "
            f"and neither page size an attention backend may set ({' or '.join(map(str, FORCED_PAGES))}) divides it.",
            CHUNK_PAGE.exception,
            CHUNK_PAGE.fix,
        )
    ]
