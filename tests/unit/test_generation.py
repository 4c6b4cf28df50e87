"""Whether a health endpoint generates a token, read from each release's own source (its
http_server.py's routes and its environ.py's switches) and the unit's environment, and a probe's
words for it (the real server: tests/lab/test_real_sglang_health_lab.py)."""

from __future__ import annotations

import pytest

from cockpit.sglang.catalog.generation import BYPASS, SWITCH, HealthRoutes, env_bool, generation, routes_from_sources
from cockpit.systemd.readiness import GENERATE, HEALTH, Probe


def routes(sglang_root, version: str) -> HealthRoutes:
    srt = sglang_root(version) / "sglang" / "srt"
    environ = srt / "environ.py"
    server = srt / "entrypoints" / "http_server.py"
    return routes_from_sources(version, environ.read_text() if environ.exists() else None, server.read_text())


@pytest.mark.parametrize(
    ("version", "generates", "why"),
    [
        ("0.4.6.post5", False, "SGLang 0.4.6.post5's /health is a handler of its own"),
        ("0.5.2", True, "SGLang 0.5.2's /health is its /health_generate"),
        ("0.5.3", True, "SGLang 0.5.3's /health is its /health_generate"),  # an environ.py, not this switch yet
        ("0.5.9", True, f"{SWITCH} is on, SGLang 0.5.9's default"),
        ("0.5.23", True, f"{SWITCH} is on, SGLang 0.5.23's default"),
    ],
)
def test_health_of_each_release_as_its_source_says(sglang_root, version: str, generates: bool, why: str) -> None:
    said = generation(routes(sglang_root, version), {}, HEALTH)
    assert (said.generates, said.why) == (generates, why)
    assert generation(routes(sglang_root, version), {}, GENERATE).generates is True


@pytest.mark.parametrize(
    ("value", "generates", "why"),
    [
        ("0", False, f"{SWITCH}=0 in the unit's environment"),
        ("No", False, f"{SWITCH}=No in the unit's environment"),  # EnvBool lowers the value
        ("y", True, f"{SWITCH}=y in the unit's environment"),
        ("off", True, f"{SWITCH}='off' in the unit's environment is no boolean to SGLang: on, its default"),
    ],
)
def test_the_units_environment_turns_the_switch(sglang_root, value: str, generates: bool, why: str) -> None:
    said = generation(routes(sglang_root, "0.5.23"), {SWITCH: value}, HEALTH)
    assert (said.generates, said.why) == (generates, why)


def test_the_switch_means_nothing_to_a_release_without_it(sglang_root) -> None:
    said = generation(routes(sglang_root, "0.5.3"), {SWITCH: "0"}, HEALTH)
    assert said.generates is True


def test_the_diagnostic_bypass_answers_both_without_the_model_where_the_release_has_it(sglang_root) -> None:
    release = routes(sglang_root, "0.5.23")
    assert release.switches[BYPASS] is False and release.switches[SWITCH] is True
    for path in (HEALTH, GENERATE):
        said = generation(release, {BYPASS: "1"}, path)
        assert (said.generates, said.why) == (
            False,
            f"{BYPASS}=1 in the unit's environment: SGLang 0.5.23 answers 200 at once",
        )
    assert generation(routes(sglang_root, "0.5.9"), {BYPASS: "1"}, HEALTH).generates is True  # 0.5.9 has no bypass


def test_an_unread_release_knows_only_what_the_path_says() -> None:
    assert generation(None, {}, HEALTH).generates is None
    assert generation(None, {}, GENERATE).generates is True
    unreadable = routes_from_sources("9.9", "def (:", "class")
    assert (unreadable.health_generates, unreadable.switches) == (None, {})
    assert generation(unreadable, {}, HEALTH).generates is None


def test_env_bool_is_sglangs_parse() -> None:
    assert [env_bool(v) for v in ("TRUE", "1", "yes", "Y", "false", "0", "NO", "n", "", "2", "on")] == [
        *[True] * 4,
        *[False] * 4,
        None,
        None,
        None,
    ]


def test_a_probe_says_which_endpoint_answered_in_how_long_and_what_it_cost() -> None:
    generating = Probe(
        HEALTH, 200, seconds=1.0051, generates=True, generation=f"{SWITCH} is on, SGLang 0.5.23's default"
    )
    assert (
        generating.words()
        == f"/health answered 200 in 1.01 s (generates a token: {SWITCH} is on, SGLang 0.5.23's default)"
    )
    quiet = Probe(
        HEALTH, 200, "whose listener could not be read", 0.004, False, f"{SWITCH}=0 in the unit's environment"
    )
    assert quiet.words() == (
        f"/health answered 200 in 0.00 s (asks the model nothing: {SWITCH}=0 in the unit's environment; "
        "whose listener could not be read)"
    )
    assert (
        Probe(GENERATE, 503, seconds=20.2, generates=True).words()
        == "/health_generate answered 503 in 20.20 s (generates a token)"
    )
    assert Probe(HEALTH, None, "no answer within 10 s", generates=True).words() == "/health: no answer within 10 s"
