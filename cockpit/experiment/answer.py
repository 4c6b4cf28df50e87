"""The answer an experiment is run for: where each variant stops meeting its SLOs (the knee),
how many requests a second it serves within them (goodput), and which variant wins.

Goodput is DistServe's: the requests of a level that met every target themselves (TTFT, end to
end, and their TPOT, the mean time per token after the first, against the ITL target), per
second of the level. A level meets the SLOs when its
p95s do and its failed share is within `error_rate`. The knee is the highest load at which the
level and every lower one met them, per axis (streams, arrival rate). A difference between two
variants smaller than the spread of the repeats of either is said to be none; with one run of
each, the spread is unknown and said so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cockpit.experiment.plan import Slo
from cockpit.load.results import LevelResult, RequestResult


def request_meets(r: RequestResult, slo: Slo) -> bool:
    if not r.ok or r.ttft_s is None or r.e2e_s is None:
        return False
    if slo.ttft_p95_ms is not None and r.ttft_s * 1000 > slo.ttft_p95_ms:
        return False
    if slo.e2e_p95_ms is not None and r.e2e_s * 1000 > slo.e2e_p95_ms:
        return False
    tpot = r.tpot_s
    return slo.itl_p95_ms is None or tpot is None or tpot * 1000 <= slo.itl_p95_ms


def judge(level: LevelResult, results: Sequence[RequestResult], slo: Slo) -> dict[str, Any]:
    """What the SLOs say of one measured level (kept with it: the requests themselves are not)."""
    meeting = sum(request_meets(r, slo) for r in results)
    missed = []
    for what, target, summary in (
        ("TTFT", slo.ttft_p95_ms, level.ttft_ms),
        ("ITL", slo.itl_p95_ms, level.itl_ms),
        ("E2E", slo.e2e_p95_ms, level.e2e_ms),
    ):
        p95 = summary.get("p95")
        if target is not None and p95 is not None and p95 > target:
            missed.append(f"{what} p95 {p95:.0f} ms > {target:g} ms")
    share = level.errors / level.requests if level.requests else 1.0
    if level.errors == level.requests:
        missed.append("no request succeeded")
    elif share > slo.error_rate:
        missed.append(f"{share:.1%} of requests failed > {slo.error_rate:.0%}")
    return {
        "goodput_rps": meeting / level.duration_s if level.duration_s > 0 else 0.0,
        "meeting": meeting,
        "slo_met": not missed,
        "missed": missed,
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _spread(values: Sequence[float]) -> float | None:
    """(max - min) / mean of the repeats: None for one run, whose noise is unknown."""
    if len(values) < 2:
        return None
    mean = _mean(values)
    return (max(values) - min(values)) / mean if mean > 0 else 0.0


def _order(level: dict[str, Any]) -> tuple[int, float]:
    rate = level["level"].get("rate")
    return (0, float(level["level"]["concurrency"])) if rate is None else (1, float(rate))


def per_load(levels: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The measured levels of one variant, repeats together, lowest load first per axis."""
    grouped: dict[tuple[int, float], list[dict[str, Any]]] = {}
    for record in sorted(levels, key=_order):
        grouped.setdefault(_order(record), []).append(record)
    out = []
    for (axis, load), runs in grouped.items():
        tok = [r["level"]["output_tokens_per_s"] for r in runs]
        good = [r["goodput_rps"] for r in runs]

        def p95(name: str, runs: list[dict[str, Any]] = runs) -> float | None:
            values = [r["level"][name]["p95"] for r in runs if r["level"][name].get("p95") is not None]
            return _mean(values) if values else None

        out.append(
            {
                "load": runs[0]["load"],
                "axis": "rate" if axis else "concurrency",
                "value": load,
                "repeats": len(runs),
                "output_tokens_per_s": _mean(tok),
                "tokens_spread": _spread(tok),
                "goodput_rps": _mean(good),
                "goodput_spread": _spread(good),
                "ttft_p95_ms": p95("ttft_ms"),
                "itl_p95_ms": p95("itl_ms"),
                "e2e_p95_ms": p95("e2e_ms"),
                "errors": sum(r["level"]["errors"] for r in runs),
                "slo_met": all(r["slo_met"] for r in runs),
                "missed": sorted({m for r in runs for m in r["missed"]}),
            }
        )
    return out


def knees(loads: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Per axis, the highest load that met the SLOs with every lower one meeting them too."""
    out: dict[str, float | None] = {}
    for axis in ("concurrency", "rate"):
        on_axis = [x for x in loads if x["axis"] == axis]
        if not on_axis:
            continue
        knee = None
        for x in on_axis:
            if not x["slo_met"]:
                break
            knee = x["value"]
        out[axis] = knee
    return out


def knee_words(knee: dict[str, float | None]) -> str:
    said = []
    for axis, value in knee.items():
        if value is None:
            said.append("none (its lowest load missed)" if axis == "concurrency" else "no rate met them")
        else:
            said.append(f"c{value:g}" if axis == "concurrency" else f"{value:g}/s")
    return ", ".join(said)


def speedups(base: Sequence[dict[str, Any]], other: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Output tok/s of `other` over `base` at each load both measured, with the noise the
    repeats showed and what the difference amounts to."""
    base_at = {x["load"]: x for x in base}
    out = []
    for x in other:
        b = base_at.get(x["load"])
        if b is None or not b["output_tokens_per_s"]:
            continue
        ratio = x["output_tokens_per_s"] / b["output_tokens_per_s"]
        spreads = [s for s in (x["tokens_spread"], b["tokens_spread"]) if s is not None]
        noise = max(spreads) if len(spreads) == 2 else None
        if noise is None:
            said = "one run each: noise not measured"
        elif abs(ratio - 1) <= noise:
            said = "no difference (within the noise)"
        else:
            said = "faster" if ratio > 1 else "slower"
        out.append({"load": x["load"], "speedup": ratio, "noise": noise, "said": said})
    return out


def answer(variants: Sequence[dict[str, Any]], base: str) -> dict[str, Any]:
    """Each measured variant's loads, knee and goodput (the most of a load up to its knee);
    the speedups against `base`; the winner (the most goodput) and why, or why there is none."""
    measured = {v["name"]: per_load(v["levels"]) for v in variants if v.get("levels")}
    results: dict[str, Any] = {}
    for name, loads in measured.items():
        knee = knees(loads)
        # Up to the knee: a load past a miss that met the SLOs again is luck, not capacity.
        within = [x for x in loads if (k := knee.get(x["axis"])) is not None and x["value"] <= k]
        best = max(within, key=lambda x: x["goodput_rps"], default=None)
        results[name] = {
            "loads": loads,
            "knee": knee,
            "goodput_rps": best["goodput_rps"] if best else 0.0,
            "goodput_at": best["load"] if best else None,
            "speedup": speedups(measured[base], loads) if base in measured and name != base else [],
        }
    return {"base": base, "variants": results, **_winner(results, base)}


def _winner(results: dict[str, Any], base: str) -> dict[str, Any]:
    if not results:
        return {"winner": None, "why": "no variant was measured"}
    ranked = sorted(results.items(), key=lambda kv: kv[1]["goodput_rps"], reverse=True)
    name, best = ranked[0]
    if best["goodput_rps"] <= 0:
        return {"winner": None, "why": "no variant served a request within the SLOs at any load"}
    why = f"{name} serves {best['goodput_rps']:.2f} req/s within the SLOs"
    why += f" (at {best['goodput_at']}; knee {knee_words(best['knee'])})"
    if len(ranked) > 1:
        second_name, second = ranked[1]
        at = next((x for x in best["loads"] if x["load"] == best["goodput_at"]), None)
        noise = at["goodput_spread"] if at is not None else None
        gap = (best["goodput_rps"] - second["goodput_rps"]) / best["goodput_rps"]
        if noise is not None and gap <= noise:
            return {
                "winner": None,
                "why": f"no clear winner: {name} and {second_name} differ by {gap:.0%} of goodput, "
                f"within the repeats' noise ({noise:.0%})",
            }
        why += f"; {second_name} {second['goodput_rps']:.2f} req/s (knee {knee_words(second['knee'])})"
        if noise is None:
            why += "; one run of each load: the noise is not measured"
    if name != base and base in results and results[base]["goodput_rps"] > 0:
        why += f"; {best['goodput_rps'] / results[base]['goodput_rps']:.2f}x the base, {base}"
    return {"winner": name, "why": why}
