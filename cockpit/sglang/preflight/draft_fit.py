"""Does the draft fit its target? The EAGLE family's draft model against the algorithm and the
target, from both config.json files.

What SGLang 0.5.23 does (docs/facts.md, SGLang), and so what is an error here:

- NEXTN is EAGLE under another name (`arg_groups/speculative_hook.py:
  _resolve_speculative_algorithm_alias`).
- Without `--speculative-draft-model-path`, `_handle_eagle_family` fills it with the target
  only for the targets that carry their own MTP layers (DeepSeek V3, GLM-4 MoE, ...:
  MTP_TARGETS); for any other target it stays None, the dry run passes
  (tests/data/sglang-0.5.23/eagle3-without-draft.txt), and the draft worker loads the target
  itself as its draft (`ModelConfig.from_server_args`: `model_path or cfg.model_path`; sglang
  #36528). Under EAGLE3 that dies: `EAGLEWorkerV2.init_lm_head` reads the draft model's
  `hot_token_id`, which only the EAGLE3 draft classes define (EAGLE3_DRAFTS), an
  AttributeError. Under EAGLE and STANDALONE it is a warning: nothing was seen to fail.
- An EAGLE3 draft's class must be one of EAGLE3_DRAFTS, for the same reason.
- The draft reads the target's hidden states: EAGLE's `fc` takes hidden_size x 2 of its own
  (`models/llama_eagle.py`), EAGLE3's takes `target_hidden_size` (else its hidden_size) times
  the aux states (`models/llama_eagle3.py`). A width that differs from the target's
  hidden_size cannot be multiplied at the first forward.
- A vocabulary that differs from the target's (an EAGLE3 draft's own `draft_vocab_size` is
  mapped to the target's through its d2t table, and is fine) means a draft trained for another
  tokenizer: it runs and is never accepted, a warning.

A missing draft directory is check_paths' finding, not repeated here.
"""

from __future__ import annotations

from collections.abc import Mapping

from cockpit.sglang.preflight.model_files import ModelFiles
from cockpit.sglang.preflight.preflight import ERROR, INFO, WARNING, Finding
from cockpit.sglang.preflight.rules import EAGLE_FAMILY

RULE = "draft-fit"
ALGORITHM = "--speculative-algorithm"
DRAFT = "--speculative-draft-model-path"
# 0.5.23 `_handle_eagle_family`: targets whose draft is their own MTP layers.
MTP_TARGETS = frozenset(
    {
        "DeepseekV32ForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekV4ForCausalLM",
        "Glm4MoeForCausalLM",
        "Glm4MoeLiteForCausalLM",
        "GlmMoeDsaForCausalLM",
        "BailingMoeForCausalLM",
        "BailingMoeV2ForCausalLM",
        "BailingMoeV2_5ForCausalLM",
        "MistralLarge3ForCausalLM",
        "PixtralForConditionalGeneration",
        "HYV3ForCausalLM",
        "HYV4ForCausalLM",
        "Qwen4ExpForConditionalGeneration",
    }
)
# 0.5.23: the model classes that define `hot_token_id` (models/llama_eagle3.py, kimi_k25_eagle3.py).
EAGLE3_DRAFTS = frozenset({"LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM"})


def algorithm_of(flags: Mapping[str, str | None]) -> str | None:
    """The EAGLE-family algorithm as SGLang resolves it (NEXTN is EAGLE); None for any other."""
    given = (flags.get(ALGORITHM) or "").upper()
    if given not in EAGLE_FAMILY:
        return None
    return "EAGLE" if given == "NEXTN" else given


def draft_findings(
    flags: Mapping[str, str | None], target: ModelFiles, draft: ModelFiles | None, version: str
) -> list[Finding]:
    """`draft` is None without --speculative-draft-model-path (or with the target's own path)."""
    algorithm = algorithm_of(flags)
    if algorithm is None or target.config is None:
        return []
    stop = f"SGLang {version or '(unknown release)'} will stop at start-up"
    arch = target.architecture
    if draft is None:
        if arch in MTP_TARGETS:
            if target.text.get("num_nextn_predict_layers") == 0:
                return [
                    Finding(
                        WARNING,
                        RULE,
                        [DRAFT],
                        f"{algorithm} without {DRAFT}: SGLang drafts with {target.name}'s own MTP layers "
                        f"({arch}), and its config.json says num_nextn_predict_layers 0.",
                        None,
                        f"Give {DRAFT} a draft trained for this target.",
                    )
                ]
            return [Finding(INFO, RULE, [], f"{algorithm} drafts with {target.name}'s own MTP layers ({arch}).")]
        said = (
            f"{ALGORITHM} {flags.get(ALGORITHM)} without {DRAFT}: SGLang loads the target "
            f"{target.name} ({arch}) a second time as its own draft (sglang #36528)"
        )
        if algorithm == "EAGLE3" and arch not in EAGLE3_DRAFTS:
            return [
                Finding(
                    ERROR,
                    RULE,
                    [DRAFT, ALGORITHM],
                    f"{stop}: {said}, and {arch} is no EAGLE3 draft (AttributeError: no `hot_token_id` "
                    "in EAGLEWorkerV2.init_lm_head). The dry run does not see it.",
                    "AttributeError",
                    f"Give {DRAFT} an EAGLE3 draft trained for this target.",
                )
            ]
        return [
            Finding(
                WARNING,
                RULE,
                [DRAFT],
                f"{said}: twice the weights, and a draft that was not trained as one.",
                None,
                f"Give {DRAFT} a draft model trained for this target.",
            )
        ]
    if draft.config is None:
        return []  # check_paths says the directory or its config.json is missing
    findings: list[Finding] = []
    draft_arch = draft.architecture
    if algorithm == "EAGLE3" and draft_arch not in EAGLE3_DRAFTS:
        findings.append(
            Finding(
                ERROR,
                RULE,
                [DRAFT, ALGORITHM],
                f"{stop}: {draft.name} is a {draft_arch}, not an EAGLE3 draft "
                f"({', '.join(sorted(EAGLE3_DRAFTS))}); EAGLEWorkerV2.init_lm_head reads its "
                "`hot_token_id` (AttributeError).",
                "AttributeError",
                f"Use an EAGLE3 draft, or the {ALGORITHM} the draft was trained for.",
            )
        )
    elif algorithm != "EAGLE3" and draft_arch in EAGLE3_DRAFTS:
        findings.append(
            Finding(
                WARNING,
                RULE,
                [ALGORITHM],
                f"{draft.name} is an EAGLE3 draft ({draft_arch}) run as {algorithm}: it expects the "
                "target's three aux hidden states, which only EAGLE3 captures.",
                None,
                f"Use {ALGORITHM} EAGLE3.",
            )
        )
    if algorithm in ("EAGLE", "EAGLE3"):
        findings += _width(target, draft, version)
    target_vocab, draft_vocab = target.text.get("vocab_size"), draft.text.get("vocab_size")
    if isinstance(target_vocab, int) and isinstance(draft_vocab, int) and target_vocab != draft_vocab:
        findings.append(
            Finding(
                WARNING,
                RULE,
                [DRAFT],
                f"{draft.name}'s vocab_size {draft_vocab:,} is not {target.name}'s {target_vocab:,}: "
                "a draft trained for another tokenizer proposes tokens the target never accepts.",
                None,
                "Use a draft trained for this target.",
            )
        )
    return findings


def _width(target: ModelFiles, draft: ModelFiles, version: str) -> list[Finding]:
    """The hidden width the draft takes from the target against the target's hidden_size."""
    wants_key = "target_hidden_size" if "target_hidden_size" in draft.text else "hidden_size"
    wants, has = draft.text.get(wants_key), target.text.get("hidden_size")
    if not isinstance(wants, int) or not isinstance(has, int) or wants == has:
        return []
    return [
        Finding(
            ERROR,
            RULE,
            [DRAFT],
            f"SGLang {version or '(unknown release)'} cannot run this draft: {draft.name} takes hidden states "
            f"{wants} wide ({wants_key}), {target.name}'s are {has} (a shape mismatch at the draft's first "
            "forward, its CUDA graph capture at start-up).",
            "RuntimeError",
            "Use a draft trained for this target.",
        )
    ]
