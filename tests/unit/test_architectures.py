"""Supported architecture: the registry read from the real SGLang 0.5.23 source as the host
check reads it (one grep), checked against Python's own parse of every module, and what the real
0.5.23 did with an architecture it lacks (tests/data/sglang-0.5.23/)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cockpit.remote.base import RunResult
from cockpit.remote.local import LocalHost
from cockpit.sglang.preflight.architectures import (
    ArchitectureCache,
    architecture_findings,
    entry_classes,
    in_transformers,
    read_registry,
)
from cockpit.sglang.preflight.model_files import ModelFiles

DATA = Path(__file__).parents[1] / "data"


def ast_entry_classes(models: Path) -> set[str]:
    """The names `EntryClass` is bound to in every module, as Python parses them."""
    names: set[str] = set()
    for path in models.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EntryClass" for t in node.targets):
                value = node.value
                items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
                names.update(i.id for i in items if isinstance(i, ast.Name))
    return names


@pytest.fixture(scope="module")
def root(sglang_root) -> Path:
    return sglang_root("0.5.23")


async def test_the_grep_reads_every_entry_class_of_0_5_23(root: Path) -> None:
    found = await read_registry(LocalHost(), str(root))
    assert found == ast_entry_classes(root / "sglang" / "srt" / "models")
    assert {"LlamaForCausalLM", "LlamaForCausalLMEagle3", "DeepseekV3ForCausalLM"} <= found
    assert "Phi3ForCausalLM" in found  # the second line of llama.py's four-line list
    assert "TransformersMultiModalMoEForSequenceClassification" in found  # last of transformers.py's twelve
    assert "ExaoneMoEForCausalLMMTP" in found  # `EntryClass = ExaoneMoEForCausalLMMTP`, no list
    assert "FooBarForCausalLM" not in found and len(found) == 290  # model classes in 0.5.23


def test_entry_class_statements() -> None:
    text = (
        "EntryClass = Plain  # a comment\n--\n"
        "EntryClass = [\n    First,  # Second\n    Third,\n]\nclass After:\n"
        "EntryClass = (Tupled, Also)\n"
        '    "EntryClass",\n'  # an __all__ entry is no statement
    )
    assert entry_classes(text) == {"Plain", "First", "Third", "Tupled", "Also"}


async def test_the_registry_is_read_once_per_host_and_release(root: Path) -> None:
    class Counting(LocalHost):
        runs = 0

        async def run(self, argv, **kw) -> RunResult:
            Counting.runs += 1
            return await super().run(argv, **kw)

    cache, host = ArchitectureCache(), Counting("gpu-1")
    first = await cache.get(host, str(root), "0.5.23")
    assert await cache.get(host, str(root), "0.5.23") is first and Counting.runs == 1
    await cache.get(Counting("gpu-2"), str(root), "0.5.23")
    assert Counting.runs == 2


async def test_a_root_without_sglang_is_one_sentence(tmp_path: Path) -> None:
    from cockpit.errors import CockpitError

    with pytest.raises(CockpitError, match="SGLang's model classes under"):
        await read_registry(LocalHost(), str(tmp_path))


def model(arch: str, **extra) -> ModelFiles:
    return ModelFiles("/models/m", {"architectures": [arch], **extra})


def test_a_class_nobody_has_is_an_error_as_0_5_23_raised_it() -> None:
    supported = {"LlamaForCausalLM", "LlamaForCausalLMEagle3"}
    assert architecture_findings(model("LlamaForCausalLM"), "--model-path", supported, "0.5.23", None) == []
    assert architecture_findings(model("LlamaForCausalLMEagle3"), "--model-path", supported, "0.5.23", None) == []
    [f] = architecture_findings(model("FooBarForCausalLM"), "--model-path", supported, "0.5.23", False)
    assert (f.severity, f.would_raise, f.flags) == ("error", "ValueError", ["--model-path"])
    recorded = (DATA / "sglang-0.5.23" / "unknown-architecture.txt").read_text()
    quoted = f.message.split("`")[1]  # what the finding says SGLang prints
    assert quoted in recorded and "RESOLVE-OK" in recorded.split(quoted)[0]  # the dry run passed first
    assert "are not supported for now" not in recorded  # the registry's own message is not reached


def test_a_stand_in_class_is_a_warning() -> None:
    supported = {"LlamaForCausalLM"}
    [via_hf] = architecture_findings(model("GPT2LMHeadModel"), "--model-path", supported, "0.5.23", True)
    assert via_hf.severity == "warning" and "through transformers" in via_hf.message
    custom = model("MyForCausalLM", auto_map={"AutoModel": "modeling_my.MyModel"})
    [via_code] = architecture_findings(custom, "--model-path", supported, "0.5.23", False)
    assert via_code.severity == "warning" and "auto_map" in via_code.message
    [unknown] = architecture_findings(model("MyForCausalLM"), "--model-path", supported, "0.5.23", None)
    assert unknown.severity == "warning" and "could not be read" in unknown.message


async def test_no_transformers_is_not_known(tmp_path: Path) -> None:
    assert await in_transformers(LocalHost(), str(tmp_path), "LlamaForCausalLM") is None
