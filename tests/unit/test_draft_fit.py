"""Does the draft fit its target: the recorded draft and target directories (tests/data/models)
against SGLang 0.5.23's EAGLE family, and what the real 0.5.23 did without a draft path."""

from __future__ import annotations

import re
from pathlib import Path

from cockpit.remote.local import LocalHost
from cockpit.sglang.preflight.draft_fit import EAGLE3_DRAFTS, MTP_TARGETS, RULE, algorithm_of, draft_findings
from cockpit.sglang.preflight.model_files import ModelFiles, read_model_files

DATA = Path(__file__).parents[1] / "data"
MODELS = DATA / "models"


async def model(name: str) -> ModelFiles:
    return await read_model_files(LocalHost(), str(MODELS / name), sizes=False)


async def check(algorithm: str, target: str, draft: str | None) -> list:
    flags = {"--speculative-algorithm": algorithm}
    return draft_findings(flags, await model(target), await model(draft) if draft else None, "0.5.23")


def test_nextn_is_eagle_and_other_algorithms_are_not_checked() -> None:
    assert algorithm_of({"--speculative-algorithm": "nextn"}) == "EAGLE"
    assert algorithm_of({"--speculative-algorithm": "EAGLE3"}) == "EAGLE3"
    assert algorithm_of({"--speculative-algorithm": "NGRAM"}) is None
    assert algorithm_of({}) is None


async def test_the_eagle3_draft_of_its_target_fits() -> None:
    assert await check("EAGLE3", "Llama-3.1-8B-Instruct", "EAGLE3-LLaMA3.1-Instruct-8B") == []
    assert await check("EAGLE", "Llama-3.1-8B-Instruct", "sglang-EAGLE-LLaMA3-Instruct-8B") == []


async def test_a_draft_for_another_width_cannot_run() -> None:
    [f] = await check("EAGLE3", "Llama-3.1-70B-Instruct", "EAGLE3-LLaMA3.1-Instruct-8B")
    assert (f.rule, f.severity, f.would_raise) == (RULE, "error", "RuntimeError")
    assert "takes hidden states 4096 wide (hidden_size), Llama-3.1-70B-Instruct's are 8192" in f.message


async def test_target_hidden_size_is_what_an_eagle3_draft_takes(tmp_path: Path) -> None:
    config = (MODELS / "EAGLE3-LLaMA3.1-Instruct-8B" / "config.json").read_text()
    (tmp_path / "config.json").write_text(
        config.replace('"hidden_size": 4096', '"hidden_size": 4096, "target_hidden_size": 8192')
    )
    draft = await read_model_files(LocalHost(), str(tmp_path), sizes=False)
    flags = {"--speculative-algorithm": "EAGLE3"}
    assert draft_findings(flags, await model("Llama-3.1-70B-Instruct"), draft, "0.5.23") == []
    [f] = draft_findings(flags, await model("Llama-3.1-8B-Instruct"), draft, "0.5.23")
    assert "8192 wide (target_hidden_size)" in f.message


async def test_an_eagle1_draft_under_eagle3_is_an_error() -> None:
    [f] = await check("EAGLE3", "Llama-3.1-8B-Instruct", "sglang-EAGLE-LLaMA3-Instruct-8B")
    assert (f.severity, f.would_raise) == ("error", "AttributeError")
    assert "is a LlamaForCausalLMEagle, not an EAGLE3 draft" in f.message and "hot_token_id" in f.message


async def test_an_eagle3_draft_under_eagle_is_a_warning() -> None:
    [f] = await check("EAGLE", "Llama-3.1-8B-Instruct", "EAGLE3-LLaMA3.1-Instruct-8B")
    assert f.severity == "warning" and f.flags == ["--speculative-algorithm"] and "EAGLE3 draft" in f.message


async def test_a_draft_of_another_family_differs_in_width_and_vocabulary() -> None:
    found = await check("EAGLE", "Qwen2.5-7B-Instruct", "sglang-EAGLE-LLaMA3-Instruct-8B")
    assert [(f.severity, f.would_raise) for f in found] == [("error", "RuntimeError"), ("warning", None)]
    assert "4096 wide" in found[0].message and "3584" in found[0].message
    assert "vocab_size 128,256 is not Qwen2.5-7B-Instruct's 152,064" in found[1].message


async def test_no_draft_path() -> None:
    [eagle3] = await check("EAGLE3", "Llama-3.1-8B-Instruct", None)
    assert (eagle3.severity, eagle3.would_raise) == ("error", "AttributeError")
    assert "loads the target Llama-3.1-8B-Instruct (LlamaForCausalLM) a second time as its own draft" in eagle3.message
    assert "#36528" in eagle3.message and "dry run does not see it" in eagle3.message
    [eagle] = await check("EAGLE", "Llama-3.1-8B-Instruct", None)
    assert eagle.severity == "warning" and eagle.would_raise is None
    [mtp] = await check("NEXTN", "DeepSeek-V3", None)
    assert mtp.severity == "info" and "own MTP layers" in mtp.message
    [kimi] = await check("EAGLE3", "Kimi-K2-Instruct", None)  # a DeepseekV3ForCausalLM without MTP layers
    assert kimi.severity == "warning" and "num_nextn_predict_layers 0" in kimi.message


def test_the_real_0_5_23_dry_run_passes_eagle3_without_a_draft() -> None:
    """Recorded with /tmp/rs-venv: the dry run leaves the path None, so only a start finds out."""
    text = (DATA / "sglang-0.5.23" / "eagle3-without-draft.txt").read_text()
    assert "RESOLVE-OK draft_path= None algo= EAGLE3" in text


def test_the_tables_match_the_0_5_23_source(sglang_root) -> None:
    """MTP_TARGETS is _handle_eagle_family's list; EAGLE3_DRAFTS the classes that set hot_token_id."""
    source = sglang_root("0.5.23") / "sglang" / "srt"
    hook = (source / "arg_groups" / "speculative_hook.py").read_text()
    listed = hook.split("def _handle_eagle_family", 1)[1].split("if model_arch in [", 1)[1].split("]:", 1)[0]
    assert set(re.findall(r'"(\w+)"', listed)) == MTP_TARGETS
    setters = {p.name for p in (source / "models").glob("*.py") if "self.hot_token_id =" in p.read_text()}
    assert setters == {"llama_eagle3.py", "kimi_k25_eagle3.py"}
    assert all(
        f"EntryClass = [{name}]" in "".join((source / "models" / s).read_text() for s in setters)
        for name in EAGLE3_DRAFTS
    )
