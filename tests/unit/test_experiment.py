"""Experiments offline (issue 30): the file read as an operator writes it (and refused with its
line when it is wrong), variants applied to a real unit's text, the answer's arithmetic, the
note, and the measurer against a server of known behaviour: the stand-in's per-stream rate and
capacity make a knee, and its own account of each request is the truth the goodput is held to.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from cockpit.errors import UsageError
from cockpit.experiment.answer import answer, judge, per_load
from cockpit.experiment.note import markdown, svg
from cockpit.experiment.plan import Slo, parse_plan
from cockpit.load.results import RequestResult
from cockpit.load.runner import LoadConfig, Runner
from cockpit.systemd.unit import load_unit

UNIT = "/etc/systemd/system/sglang-demo.service"
UNIT_TEXT = """\
[Unit]
Description=SGLang demo

[Service]
Environment=HF_HOME=/srv/hf
ExecStart=/opt/sglang/bin/python -m sglang.launch_server --model-path /models/m --port 30000 \\
    --max-running-requests 64
Restart=on-failure
"""

PLAN = """\
name = "eagle-vs-plain"
host = "lab"
unit = "sglang-demo.service"

[workload]
concurrency = [8, 1, 2, 4]
requests = 16
input_len = [64, 128]
output_len = 32
repeats = 2

[slo]
ttft_p95_ms = 500
itl_p95_ms = 35

[[variants]]
name = "plain"

[[variants]]
name = "eagle3-3-1-4"
set.speculative-algorithm = "EAGLE3"
set.speculative-num-steps = 3
set.speculative-eagle-topk = 1
set.speculative-num-draft-tokens = 4

[[variants]]
name = "fewer-running"
set = { "--max-running-requests" = "8", "--served-model-name" = "it's 100% $HOME" }
environment = { SGLANG_LOG = "a b" }
unset_environment = ["HF_HOME"]
"""


def test_a_plan_reads_as_written() -> None:
    plan = parse_plan(PLAN, Path("exp.toml"))
    assert [v.name for v in plan.variants] == ["plain", "eagle3-3-1-4", "fewer-running"]
    assert plan.base == "plain" and plan.end == "restore" and (plan.host, plan.unit) == ("lab", "sglang-demo.service")
    assert plan.workload.concurrency == (1, 2, 4, 8) and plan.workload.input_len == (64, 128)
    assert plan.workload.output_len == (32, 32) and plan.workload.repeats == 2
    assert plan.slo == Slo(ttft_p95_ms=500.0, itl_p95_ms=35.0, e2e_p95_ms=None, error_rate=0.0)
    assert plan.variants[1].flags["speculative-num-steps"] == "3"
    assert plan.variants[1].words().startswith("--speculative-algorithm EAGLE3, --speculative-num-steps 3")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (("name = \"fewer-running\"", "name = \"plain\""), "exp.toml:27: variants.3.name: 'plain' names an earlier"),
        (("unset_environment", "unset_envirnoment"), "exp.toml:30: variants.3.unset_envirnoment: unknown key"),
        (("itl_p95_ms = 35", "itl_p95_ms = -1"), "exp.toml:14: slo.itl_p95_ms: expected milliseconds > 0, got -1"),
        (("repeats = 2", "repeats = 0"), "exp.toml:10: workload.repeats: expected a whole number of at least 1"),
        (("output_len = 32", "output_len = [9, 3]"), "exp.toml:9: workload.output_len: expected tokens as a whole"),
        (('"8"', '"8\\nExecStartPre=/bin/rm"'), "exp.toml:28: variants.3.set.--max-running-requests: expected a value"),
        (('name = "eagle-vs-plain"', 'name = "x"\nend = "eagle"'), "exp.toml:2: end: expected 'restore' or a"),
        (("[slo]\nttft_p95_ms = 500\nitl_p95_ms = 35", "[slo]"), "exp.toml:12: slo: give at least one latency target"),
        (("requests = 16", "requests = 16\nrequests = 4"), "exp.toml:8: not valid TOML: Cannot overwrite a value"),
        (("requests = 16", "requests = 16\nduration = 30"), "exp.toml:8: workload.duration: give requests or"),
        (("requests = 16", "duration = 0"), "exp.toml:7: workload.duration: expected seconds > 0, got 0"),
    ],
)  # fmt: skip
def test_a_mistake_is_said_with_its_file_line_and_key(change: tuple[str, str], said: str) -> None:
    text = PLAN.replace(*change)
    assert text != PLAN
    with pytest.raises(UsageError) as e:
        parse_plan(text, Path("exp.toml"))
    assert str(e.value).startswith(said), str(e.value)


def test_variants_change_the_unit_as_found_and_keep_every_other_byte() -> None:
    plan = parse_plan(PLAN, Path("exp.toml"))
    unit = load_unit({UNIT: UNIT_TEXT}, UNIT)
    plain, eagle, fewer = (v.applied(unit) for v in plan.variants)
    assert plain.changed() == {}
    eagle_text = eagle.changed()[UNIT]
    assert eagle.exec()[-8:] == [
        "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
    ]  # fmt: skip
    assert eagle_text.startswith("[Unit]\nDescription=SGLang demo\n\n[Service]\nEnvironment=HF_HOME=/srv/hf\n")
    assert eagle_text.endswith("Restart=on-failure\n")
    argv = fewer.exec()
    assert argv[argv.index("--max-running-requests") + 1] == "8"  # in place, not appended twice
    assert argv[argv.index("--served-model-name") + 1] == "it's 100% $HOME"  # as SGLang will get it
    assert fewer.environment() == {"SGLANG_LOG": "a b"}


def test_edits_built_into_a_plan_run_as_they_were_edited(tmp_path: Path) -> None:
    """The flag editor's `v`: each edit becomes a variant of the unit's plan file (started with the
    unit as found), which reads back and, applied to the unit as found, gives the edit's exact
    command line and environment; a value with quotes, `%`, `$` and several values survive; the
    same edit twice, no edit, and a line break are each refused in one sentence, the file kept."""
    from cockpit.experiment.builder import add_variant
    from cockpit.experiment.plan import read_plan
    from cockpit.sglang.catalog.flags import Catalog, Flag

    catalog = Catalog(None, [Flag("--cuda-graph-bs", "cuda_graph_bs", nargs="+")])  # as the app's units hold one
    loaded = load_unit({UNIT: UNIT_TEXT}, UNIT, catalog=catalog)
    path = tmp_path / "plan.toml"
    eagle = (
        loaded.set_flag("--speculative-algorithm", "EAGLE3").set_flag("--speculative-num-steps", "3")
        .set_flag("--served-model-name", 'it\'s "100%" $HOME').set_flag("--cuda-graph-bs", ("1", "2", "4"))
        .unset_flag("--max-running-requests").set_env("SGLANG_LOG", "a b").unset_env("HF_HOME")
    )  # fmt: skip
    assert add_variant("lab", "sglang-demo.service", loaded, eagle, path)[1:] == (
        "speculative-algorithm-EAGLE3-speculative",
        2,
    )
    fewer = loaded.set_flag("--max-running-requests", "8")
    assert add_variant("lab", "sglang-demo.service", loaded, fewer, path)[1:] == ("max-running-requests-8", 3)
    plan = read_plan(path)
    assert [v.name for v in plan.variants] == [
        "as-found",
        "speculative-algorithm-EAGLE3-speculative",
        "max-running-requests-8",
    ]
    assert (plan.name, plan.host, plan.unit) == ("sglang-demo tuning", "lab", "sglang-demo.service")
    assert (plan.base, plan.end) == ("as-found", "restore")
    for variant, edited in zip(plan.variants, (loaded, eagle, fewer), strict=True):
        ran = variant.applied(loaded)
        assert ran.exec() == edited.exec() and ran.environment() == edited.environment()
    kept = path.read_text()
    for edited, said in (
        (fewer, "already holds this change as variant 'max-running-requests-8'"),
        (loaded, "the editor holds no change"),
        (loaded.set_flag("--served-model-name", "a\nExecStartPre=/bin/rm"), "expected a value on one line"),
    ):
        with pytest.raises(UsageError, match=said):
            add_variant("lab", "sglang-demo.service", loaded, edited, path)
        assert path.read_text() == kept


def _result(ttft: float, gaps: list[float], ok: bool = True) -> RequestResult:
    r = RequestResult(ok=ok)
    if ok:
        r.ttft_s, r.chunk_gaps_s, r.chunk_tokens = ttft, gaps, [1] * (len(gaps) + 1)
        r.e2e_s, r.output_tokens = ttft + sum(gaps), len(gaps) + 1
    return r


def _level(load: int, tok_s: float, goodput: float, met: bool, repeat: int = 0) -> dict:
    summary = {"p95": 10.0}
    return {
        "load": f"c{load}",
        "repeat": repeat,
        "level": {"concurrency": load, "rate": None, "output_tokens_per_s": tok_s, "errors": 0,
                  "ttft_ms": summary, "itl_ms": summary, "e2e_ms": summary},
        "goodput_rps": goodput,
        "slo_met": met,
        "missed": [] if met else ["ITL p95 50 ms > 35 ms"],
    }  # fmt: skip


def test_judge_counts_the_requests_that_met_every_target_themselves() -> None:
    from cockpit.load.results import LevelResult

    slo = Slo(ttft_p95_ms=100, itl_p95_ms=30)
    results = [
        _result(0.05, [0.02] * 9),
        _result(0.2, [0.02] * 9),
        _result(0.05, [0.02] * 8 + [0.2]),
        _result(0, [], ok=False),
    ]
    level = LevelResult.from_results(4, results, 2.0)
    said = judge(level, results, slo)
    # the second is late to its first token; the third's TPOT is 40 ms (one 200 ms gap); the fourth failed
    assert said["meeting"] == 1 and said["goodput_rps"] == 0.5
    # the level's ITL p95 is over every token of the level: one slow gap of 26 is not its p95
    assert said["missed"] == ["TTFT p95 200 ms > 100 ms", "25.0% of requests failed > 0%"]


def test_the_knee_is_the_last_load_before_the_first_miss_and_small_differences_are_none() -> None:
    base = [_level(1, 40, 2.0, True), _level(2, 80, 4.0, True), _level(4, 100, 3.0, False), _level(8, 160, 7.0, True)]
    base += [
        _level(1, 41, 2.0, True, 1),
        _level(2, 76, 4.1, True, 1),
        _level(4, 98, 3.2, False, 1),
        _level(8, 150, 7.0, True, 1),
    ]
    fast = [
        _level(1, 40.5, 2.1, True),
        _level(2, 120, 6.0, True),
        _level(4, 200, 9.0, True),
        _level(8, 210, 9.5, False),
    ]
    fast += [
        _level(1, 40.1, 2.0, True, 1),
        _level(2, 118, 6.2, True, 1),
        _level(4, 190, 9.2, True, 1),
        _level(8, 215, 9.6, False, 1),
    ]
    loads = per_load(base)
    assert [x["load"] for x in loads] == ["c1", "c2", "c4", "c8"] and loads[1]["repeats"] == 2
    assert loads[1]["tokens_spread"] == pytest.approx(4 / 78)
    said = answer([{"name": "plain", "levels": base}, {"name": "eagle", "levels": fast}], "plain")
    assert said["variants"]["plain"]["knee"] == {"concurrency": 2}  # c8 met again, but c4 missed first
    assert said["variants"]["eagle"]["knee"] == {"concurrency": 4}
    speedup = {s["load"]: s for s in said["variants"]["eagle"]["speedup"]}
    assert speedup["c1"]["said"] == "no difference (within the noise)"  # 1.0x within a 2.5% spread
    assert speedup["c2"]["said"] == "faster" and speedup["c2"]["speedup"] == pytest.approx(119 / 78)
    assert said["winner"] == "eagle" and said["why"].startswith(
        "eagle serves 9.10 req/s within the SLOs (at c4; knee c4); plain 4.05 req/s (knee c2); 2.25x the base"
    )  # plain's c8 met the SLOs past its miss at c4: not counted


def test_no_winner_when_the_best_two_are_within_the_noise() -> None:
    a = [_level(1, 40, 5.0, True), _level(1, 40, 4.0, True, 1)]
    b = [_level(1, 40, 4.3, True), _level(1, 40, 4.3, True, 1)]
    said = answer([{"name": "a", "levels": a}, {"name": "b", "levels": b}], "a")
    assert said["winner"] is None and said["why"].startswith("no clear winner: a and b differ by 4% of goodput")


def test_the_note_escapes_what_the_host_named_and_plots_each_variant() -> None:
    levels = [_level(1, 40, 2.0, True), _level(2, 70, 3.0, False)]
    record = {
        "experiment": "x", "host": "lab", "unit": "u.service", "release": "0.5.23",
        "plan": {"slo": {"itl_p95_ms": 35.0, "ttft_p95_ms": None}},
        "variants": [
            {"name": "a|b", "changes": "as found", "outcome": "measured", "levels": levels},
            {"name": "crash", "changes": "--x 1", "outcome": "crashed on start", "reason": "exit 1\n| evil",
             "traceback": {"lines": ["Traceback (most recent call last):", "AssertionError"]}},
        ],
        "end": {"left_on": "original", "unit_as_asked": True},
    }  # fmt: skip
    record["answer"] = answer([record["variants"][0]], "a|b")
    text = markdown(record, "x.svg")
    assert "| a\\|b | as found | measured | c1 | 2.00 req/s at c1 |" in text
    assert "| crash | --x 1 | crashed on start: exit 1 \\| evil | - | - |" in text
    assert "```\nTraceback (most recent call last):\nAssertionError\n```" in text
    picture = svg(record)
    assert picture is not None and picture.count("<polyline") == 2 and "a|b</text>" in picture


def _delivered(url: str) -> list[tuple[float, float, float, int]]:
    with urllib.request.urlopen(f"{url}/standin/delivered", timeout=10) as resp:
        return [tuple(r) for r in json.loads(resp.read())["requests"]]


def _delivered_goodput(served: list[tuple[float, float, float, int]], slo: Slo) -> tuple[float, float]:
    """The goodput the stand-in's own account allows, as a range: a request whose TTFT or ITL on
    the server's clock lies within 10% of its target may be seen on either side of it by a client
    that reads it through HTTP on a busy machine (in stop 43's CI, one of the two requests that met
    the ITL target at 40/s was seen just past it by the client, and the goodput halved). Below: the
    requests that meet the targets with 10% to spare; above: those within 10% past them."""
    window = max(r[2] for r in served) - min(r[0] for r in served)

    def meeting(slack: float) -> int:
        ttft, itl = (slo.ttft_p95_ms or 0) * slack, (slo.itl_p95_ms or 0) * slack
        return sum((f - a) * 1000 <= ttft and (last - f) / (n - 1) * 1000 <= itl for a, f, last, n in served)

    return meeting(0.9) / window, meeting(1.1) / window


def _holds_to_delivered(said: dict, served: list[tuple[float, float, float, int]], slo: Slo, level: str) -> None:
    """The measured goodput within 5% of the range the stand-in's account allows."""
    low, high = _delivered_goodput(served, slo)
    print(f"{level}: goodput {said['goodput_rps']:.3f} req/s measured, {low:.3f}-{high:.3f} delivered")
    assert low * 0.95 - 1e-9 <= said["goodput_rps"] <= high * 1.05 + 1e-9


async def test_knee_and_goodput_against_a_server_of_known_behaviour(standin) -> None:
    """40 tok/s per stream, 160 for the server: one token every 25 ms up to 4 streams, 50 ms at
    8, 100 ms at 16. With ITL p95 at most 35 ms the knee is 4 streams; the goodput of each level
    is held to the stand-in's own account of the same requests (its clock: arrival, first and
    last token), within 5%."""
    sp = standin(env={"COCKPIT_STANDIN_TOKENS_PER_S": "40", "COCKPIT_STANDIN_CAPACITY": "160"})
    slo = Slo(ttft_p95_ms=400, itl_p95_ms=35)
    levels = []
    for c in (1, 2, 4, 8, 16):
        results: list[RequestResult] = []
        config = LoadConfig(url=sp.url, concurrency=(c,), requests=max(8, c), warmup=0, input_len=16, output_len=12)
        seen = len(_delivered(sp.url))
        [level] = await Runner(config, on_request=lambda _c, r, got=results: got.append(r)).run()
        said = judge(level, results, slo)
        served = _delivered(sp.url)[seen:]
        assert len(served) == len(results)
        meets = [
            (first - arrived) * 1000 <= slo.ttft_p95_ms and (last - first) / (n - 1) * 1000 <= slo.itl_p95_ms
            for arrived, first, last, n in served
        ]
        _holds_to_delivered(said, served, slo, f"c{c}")
        levels.append({"load": level.load, "repeat": 0, "level": level.to_json(), **said, "truth_met": all(meets)})
    got = answer([{"name": "standin", "levels": levels}], "standin")["variants"]["standin"]
    steps = [1, 2, 4, 8, 16]
    truth_knee = None
    for lv in levels:  # the same rule over the stand-in's own account
        if not lv["truth_met"]:
            break
        truth_knee = lv["level"]["concurrency"]
    assert got["knee"] == {"concurrency": truth_knee}
    assert truth_knee is not None and abs(steps.index(truth_knee) - steps.index(4)) <= 1  # the settings' knee: 4


async def test_open_loop_levels_send_at_their_rate_and_find_the_rate_knee(standin) -> None:
    """Poisson arrivals, nothing capping the streams: at 2 requests/s the server (one token
    every 25 ms per stream, 160 tok/s in all) keeps up; at 40/s about twelve streams share it
    and each token takes 75 ms, past the 35 ms target. The goodput against the stand-in's own
    account, as for the closed loop."""
    sp = standin(env={"COCKPIT_STANDIN_TOKENS_PER_S": "40", "COCKPIT_STANDIN_CAPACITY": "160"})
    slo = Slo(ttft_p95_ms=400, itl_p95_ms=35)
    records = []
    for rate in (2.0, 40.0):
        results: list[RequestResult] = []
        config = LoadConfig(
            url=sp.url, concurrency=(), rates=(rate,), requests=24, warmup=1, input_len=16, output_len=12
        )
        seen = len(_delivered(sp.url)) + 1  # after the warm-up
        [level] = await Runner(config, on_request=lambda _c, r, got=results: got.append(r)).run()
        served = _delivered(sp.url)[seen:]
        assert (level.rate, level.concurrency, level.load, level.requests) == (rate, 0, f"{rate:g}/s", 24)
        said = judge(level, results, slo)
        _holds_to_delivered(said, served, slo, f"{rate}/s")
        records.append({"load": level.load, "repeat": 0, "level": level.to_json(), **said})
    got = answer([{"name": "open", "levels": records}], "open")["variants"]["open"]
    assert got["knee"] == {"rate": 2.0} and got["goodput_at"] == "2/s"


async def test_a_level_of_a_duration_measures_every_request_sent_in_it(standin) -> None:
    """`duration`: each stream sends its next request until the time is up (closed loop), or
    the Poisson arrivals within it (open); every request the stand-in served is measured, the
    last of them sent within the level's time, and the level lasts at least that long."""
    sp = standin(env={"COCKPIT_STANDIN_TOKENS_PER_S": "40", "COCKPIT_STANDIN_CAPACITY": "160"})
    plan = parse_plan(PLAN.replace("requests = 16", "duration = 1.5"), Path("exp.toml"))
    assert plan.workload.duration_s == 1.5
    for concurrency, rates in (((2,), ()), ((), (8.0,))):
        config = LoadConfig(
            url=sp.url, concurrency=concurrency, rates=rates, duration_s=1.5, warmup=0, input_len=16, output_len=8
        )
        seen = len(_delivered(sp.url))
        [level] = await Runner(config).run()
        served = _delivered(sp.url)[seen:]
        assert level.requests == len(served) >= 4 and level.errors == 0
        sent = sorted(arrived for arrived, _first, _last, _n in served)
        assert sent[-1] - sent[0] <= 1.5 + 0.15  # none sent after the level's time (the stand-in's clock)
        assert level.duration_s >= 1.5


async def test_a_read_only_host_refuses_the_experiment_before_anything_is_read(tmp_path: Path) -> None:
    from cockpit.config import Config
    from cockpit.experiment.run import ExperimentRun
    from cockpit.remote.base import ReadOnlyError
    from cockpit.session import Session
    from cockpit.targets import Target

    session = Session(Config(), Target("gpu-9.invalid", "sglang.service"), read_only=True)
    try:
        run = ExperimentRun(session, parse_plan(PLAN, Path("exp.toml")), root=tmp_path)
        with pytest.raises(ReadOnlyError, match=r"^gpu-9.invalid is read-only here: no experiment was run$"):
            await run.run()
        assert run.record == {} and not run.path.exists()  # nothing recorded, nothing connected
    finally:
        await session.close()
