"""The static rules of cockpit/sglang/preflight/rule_families.py against the real releases' source, and
against what real SGLang 0.5.23 did with a breaking and a passing flag set of each
(tests/data/dryrun/0.5.23-rule-*.json, recorded by benchmarks/check_dry_run_sglang.py --rules)."""

from __future__ import annotations

import ast
import json
import re

import pytest

from cockpit.sglang.catalog.flags import load_catalog
from cockpit.sglang.catalog.pysource import parse
from cockpit.sglang.preflight.preflight import check_static
from cockpit.sglang.preflight.rule_families import RULES, normalize, violations
from cockpit.sglang.preflight.rules import release_tuple
from tests.conftest import ROOT

RELEASES = ["0.4.6.post5", "0.5.2", "0.5.3", "0.5.9", "0.5.12", "0.5.13", "0.5.19", "0.5.23"]
DRY_RUNS = ROOT / "tests" / "data" / "dryrun"
_FUNCTIONS: dict[tuple[str, str], dict[str, list[str]]] = {}


def function_texts(root, version: str, file: str) -> dict[str, list[str]]:
    """Every function (methods included) of a release's file -> its normalized source texts."""
    key = (version, file)
    if key not in _FUNCTIONS:
        source = (root / file).read_text()
        lines = source.splitlines(keepends=True)
        found: dict[str, list[str]] = {}
        for node in ast.walk(parse(source, file)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                text = normalize("".join(lines[node.lineno - 1 : node.end_lineno]))
                found.setdefault(node.name, []).append(text)
        _FUNCTIONS[key] = found
    return _FUNCTIONS[key]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_the_check_is_in_the_function_named_in_every_release_claimed(sglang_root, rule) -> None:
    claimed = [v for v in RELEASES if rule.holds_for(v)]
    assert claimed and claimed[-1] == "0.5.23"
    for version in claimed:
        file, function = rule.location(version)
        bodies = function_texts(sglang_root(version), version, file).get(function, [])
        assert any(all(s in body for s in rule.statements) for body in bodies), (version, file, function)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_the_release_before_the_range_lacks_the_check_or_is_not_claimed(sglang_root, rule) -> None:
    """The lower bound is where the statements stop being found: the release before `since`
    does not hold them (in the functions the rule names), so the rule says nothing there."""
    earlier = [v for v in RELEASES if release_tuple(v) < release_tuple(rule.since)]
    if not earlier:
        return
    version = earlier[-1]
    file, function = rule.location(version)
    path = sglang_root(version) / file
    bodies = function_texts(sglang_root(version), version, file).get(function, []) if path.exists() else []
    assert not any(all(s in body for s in rule.statements) for body in bodies), version
    assert all(v.rule != rule.name for v in violations(version, {}))


def _recorded(name: str) -> dict:
    return json.loads((DRY_RUNS / f"0.5.23-rule-{name}.json").read_text())


def _real_outcome(recorded: dict) -> str:
    """ "passed", or the exception the probe died with (the traceback's last line)."""
    if "COCKPIT-PREFLIGHT-OK" in recorded["stdout"]:
        return "passed"
    lines = (recorded["stderr"] or recorded["stdout"]).strip().splitlines()
    last = lines[-1] if lines else ""
    if "error: argument" in last or "unrecognized arguments" in last:
        return f"SystemExit({recorded['returncode']})"
    m = re.match(r"([A-Za-z_.]+?)(?::|$)", last)
    return m.group(1).rsplit(".", 1)[-1] if m else last


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_static_verdict_agrees_with_real_0_5_23(sglang_root, rule) -> None:
    catalog = load_catalog(sglang_root("0.5.23"))
    broken, kept = _recorded(f"{rule.name}-break"), _recorded(f"{rule.name}-pass")
    assert _real_outcome(broken) == rule.exception
    assert _real_outcome(kept) == "passed"

    findings = check_static(broken["argv"], catalog)
    [mine] = [f for f in findings if f.rule == rule.name]
    errors = [f for f in findings if f.severity == "error"]
    if rule.sure:
        assert mine.severity == "error" and mine.would_raise == rule.exception
        assert errors[0] is mine  # nothing else the static layer says stops it first
        assert mine.message.startswith(f"SGLang 0.5.23 will stop at start-up: {rule.exception} in ")
    else:
        assert mine.severity == "info" and not errors  # the GPU or the model decides: never an error
        assert "the dry run decides" in mine.message
    assert mine.fix and set(mine.flags) <= set(rule.flags)

    assert [f for f in check_static(kept["argv"], catalog) if f.severity == "error"] == []


def test_a_rule_names_the_flags_given_first() -> None:
    [v] = violations("0.5.23", {"--enable-pdmux": None, "--pp-size": "2", "--chunked-prefill-size": "-1"})
    assert v.rule == "pdmux-pp" and v.flags == ("--enable-pdmux", "--pp-size")


def test_deprecated_dp_attention_spelling_counts_as_attention_dp() -> None:
    assert [
        v.rule for v in violations("0.5.23", {"--tp-size": "2", "--dp-size": "4", "--enable-dp-attention": None})
    ] == ["attn-dp-divides-tp"]
    assert violations("0.5.23", {"--tp-size": "4", "--dp-size": "2", "--enable-dp-attention": None}) == []
    # --dp-size 2 alone is two replicas, not attention DP: nothing to divide
    assert violations("0.5.23", {"--tp-size": "1", "--dp-size": "2"}) == []


def test_backend_dependent_rules_are_info_without_an_explicit_backend() -> None:
    flags = {
        "--speculative-algorithm": "NGRAM",
        "--page-size": "16",
    }
    [v] = violations("0.5.23", flags)
    assert v.rule == "ngram-topk-page-backend" and not v.sure
    [v] = violations("0.5.23", {**flags, "--attention-backend": "triton"})
    assert v.sure
    assert violations("0.5.23", {**flags, "--attention-backend": "flashinfer"}) == []


def test_a_served_name_on_object_storage_may_hold_a_colon() -> None:
    assert violations("0.5.23", {"--served-model-name": "s3://bucket/model"}) == []
    assert [v.rule for v in violations("0.5.9", {"--served-model-name": "org/model:v2"})] == ["served-name-colon"]
    assert violations("0.5.3", {"--served-model-name": "org/model:v2"}) == []  # not claimed before 0.5.9


def test_lora_paths_take_several_values_in_the_catalog(sglang_root) -> None:
    """0.5.23 registers --lora-paths through an action whose kwargs hold `type=str` (no literal):
    its nargs "*" must still be read, or each adapter after the first is a stray argument."""
    catalog = load_catalog(sglang_root("0.5.23"))
    assert catalog.get("--lora-paths").nargs == "*"
    findings = check_static(["--model-path", "/m", "--lora-paths", "a=/x", "b=/y"], catalog)
    assert [f for f in findings if f.severity == "error"] == []


def test_the_speculative_algorithms_are_the_releases(sglang_root) -> None:
    """SPEC_ALGORITHMS is 0.5.23's SpeculativeAlgorithm members and spec_registry's reserved aliases,
    read off its source: a member added in a release makes this fail, not a false error."""
    from cockpit.sglang.preflight.rule_families import SPEC_ALGORITHMS

    root = sglang_root("0.5.23") / "sglang" / "srt" / "speculative"
    tree = ast.parse((root / "spec_info.py").read_text())
    [enum] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeAlgorithm"]
    members = {t.id for n in enum.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    aliases = re.search(r"_RESERVED_ALIASES = frozenset\(\{([^}]*)\}\)", (root / "spec_registry.py").read_text())
    assert aliases is not None
    assert set(SPEC_ALGORITHMS) == members | set(re.findall(r'"(\w+)"', aliases.group(1)))
