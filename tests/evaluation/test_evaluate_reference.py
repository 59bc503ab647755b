"""evaluate against NeMo Evaluator SDK's own results (issue 10, points 5-7; docs/metrics.md:
#scorer-results, #topic-adherence, #remote-scorers).

The reference files in tests/data/evaluator_reference/ were written by
scripts/make_evaluator_reference.py, which runs the SDK's code (nemo-platform 0.3.0,
`nemo_evaluator_sdk/`): its `aggregate_metrics` on score columns, and its `RemoteMetric` /
`NemoAgentToolkitRemoteMetric` through its own `score_row` against a real HTTP server. Here the
same columns go through `ScoreStats`, and the same endpoint answers are served on 127.0.0.1 to
gym-metrics' `remote` and `nemo-agent-toolkit-remote` metrics.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gym_metrics.evaluation import EvaluationScores, Histogram, HistogramBin, Percentiles, ScoreStats, evaluate_async

from gym_metrics.testing import Reply, ScriptedJudge

DATA = Path(__file__).parents[1] / "data" / "evaluator_reference"
AGGREGATES = json.loads((DATA / "aggregates.json").read_text())
REMOTE = json.loads((DATA / "remote.json").read_text())

EXACT = ("name", "count", "nan_count", "sum", "mean", "min", "max", "score_type", "percentiles", "histogram")
"""Fields equal to the last bit. `variance` and `std_dev` are compared to 1e-12: the SDK adds
the squared deviations with Python's `sum`, which is plain on 3.11 and compensated from 3.12,
so the SDK's own last bits depend on the interpreter."""

# Where gym-metrics deliberately differs from the SDK (README, "Deliberate differences"):
# an infinite score counts as missing (the SDK keeps it, and its statistics turn to inf/NaN).
DELIBERATE_REMOTE = {"infinity_string": {"value": None}, "overflowing_number": {"value": None}}
# A NeMo Agent Toolkit answer with `success: false` is a row error carrying the endpoint's
# error (the SDK gives NaN and says nothing); the score is NaN either way.
DELIBERATE_NAT = {"no_result": {"error": "evaluator 'similarity_eval' failed: evaluator crashed"}}


def stats_of(values: list[float | None], name: str = "x") -> dict[str, Any]:
    column = np.array([math.nan if v is None else v for v in values], dtype=np.float64)
    return ScoreStats.of(name, column).to_dict()


def assert_same_aggregate(ours: dict[str, Any], sdk: dict[str, Any]) -> None:
    assert list(ours) == list(sdk)  # same fields, same order
    for key in EXACT:
        assert ours[key] == sdk[key], key
    for key in ("variance", "std_dev"):
        if sdk[key] is None:
            assert ours[key] is None, key
        else:
            assert ours[key] == pytest.approx(sdk[key], rel=1e-12, abs=1e-300), key


@pytest.mark.parametrize("case", AGGREGATES, ids=[c["case"] for c in AGGREGATES])
def test_aggregate_scores_equal_the_sdk(case: dict[str, Any]) -> None:
    assert_same_aggregate(stats_of(case["values"]), case["sdk"])


def test_population_variance_as_in_the_issue() -> None:
    x = stats_of([1.0, 0.0, 0.5])
    assert round(x["std_dev"], 3) == 0.408 and x["variance"] == pytest.approx(1 / 6, rel=1e-15)
    assert x["score_type"] == "range"
    assert x["percentiles"] == {
        "p10": 0.0, "p20": 0.0, "p30": 0.09999999999999998, "p40": 0.30000000000000004, "p50": 0.5,
        "p60": 0.7, "p70": 0.8999999999999999, "p80": 1.0, "p90": 1.0, "p100": 1.0,
    }  # rank (p/100)(n+1)-1, linear between neighbours, clamped to the ends
    bins = x["histogram"]["bins"]
    assert len(bins) == 10 and [b["count"] for b in bins] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    assert (bins[0]["lower_bound"], bins[-1]["upper_bound"]) == (0.0, 1.0)


def test_no_value_gives_null_sum_percentiles_and_no_bins() -> None:
    assert stats_of([None, None]) == {
        "name": "x", "count": 0, "nan_count": 2, "sum": None, "mean": None, "min": None, "max": None,
        "std_dev": None, "variance": None, "score_type": "range", "percentiles": None, "histogram": {"bins": []},
    }


def test_one_value_and_equal_values_give_one_bin() -> None:
    for values in ([0.25], [0.25, 0.25, 0.25]):
        x = stats_of(values)
        assert (x["variance"], x["std_dev"]) == (0.0, 0.0)
        assert x["histogram"] == {"bins": [{"lower_bound": 0.25, "upper_bound": 0.25, "count": len(values)}]}
        assert set(x["percentiles"].values()) == {0.25}


def test_statistics_are_attributes_too() -> None:
    """SDK users read `score.percentiles.p50` and `score.histogram.bins[i].count`."""
    result = EvaluationScores("m", ("a",), np.array([[0.0], [np.nan], [1.0], [0.5]]))
    (a,) = result.stats
    assert (a.count, a.nan_count, a.score_type, a.percentiles.p50) == (3, 1, "range", 0.5)  # type: ignore[union-attr]
    assert [b.count for b in a.histogram.bins] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    assert isinstance(a.percentiles, Percentiles) and isinstance(a.histogram, Histogram)
    assert a.histogram.bins[-1] == HistogramBin(0.9, 1.0, 1)
    assert result.to_dict()["aggregate_scores"][0]["percentiles"]["p100"] == 1.0


def test_sum_adds_in_row_order_as_the_sdk() -> None:
    """The SDK keeps a running sum (`total = total + value`, left to right); pairwise summation,
    and Python 3.12+'s compensated built-in `sum`, differ in the last bit."""
    values = [0.1] * 10
    running = 0.0
    for value in values:
        running += value
    assert stats_of(values)["sum"] == running == 0.9999999999999999
    assert float(np.sum(np.array(values))) == 1.0  # what a pairwise sum would have written


def test_values_whose_squares_overflow_keep_what_a_float_can_hold_and_are_named(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK raises OverflowError on such a value (its running sum of squares, `value**2`);
    the standard deviation was infinite (null), and a range past the largest float made NaN
    histogram bounds."""
    with caplog.at_level("WARNING"):
        x = stats_of([1e200, 2e200, None, 3e200])
    assert (x["count"], x["nan_count"], x["sum"], x["mean"], x["variance"]) == (3, 1, 6e200, 2e200, None)
    assert x["std_dev"] == pytest.approx(math.sqrt(2 / 3) * 1e200, rel=1e-12)
    assert "score 'x': the square of row 0's value (1e+200) is too large for a float" in caplog.text
    wide = stats_of([-1.5e308, 1.5e308, 0.0])
    assert (wide["sum"], wide["mean"]) == (0.0, 0.0)
    bins = wide["histogram"]["bins"]
    assert all(math.isfinite(b["lower_bound"]) and math.isfinite(b["upper_bound"]) for b in bins) and sum(b["count"] for b in bins) == 3
    assert (bins[0]["lower_bound"], bins[-1]["upper_bound"]) == (-1.5e308, 1.5e308)
    with caplog.at_level("WARNING"):
        caplog.clear()
        stats_of([1.3e154, -1.3e154])  # squares a float holds: the SDK's path, nothing said
    assert not caplog.text

# ---------------------------------------------------------------- remote metrics

def _server_for(answers: dict[str, str], n: int) -> ScriptedJudge:
    def reply(body: dict[str, Any]) -> Reply:
        case = body.get("case") or body["item"]["case"]
        return Reply(200, answers[case], {"Content-Type": "application/json"})

    return ScriptedJudge([reply] * n)


def _outcome(result: EvaluationScores, i: int, name: str) -> dict[str, Any]:
    failure = result.errors.get(i)
    if failure is not None:
        return {"error": failure.reason}
    value = float(result.column(name)[i])
    return {"value": None if math.isnan(value) else value}


async def _run_remote(cases: list[dict[str, Any]], path_of: Any) -> list[tuple[dict[str, Any], EvaluationScores, int]]:
    """Each case through `remote` with its own JSONPath; the endpoint answers the SDK's answers."""
    out = []
    with _server_for({c["case"]: c["answer"] for c in cases}, len(cases)) as server:
        for case in cases:
            cfg = {
                "url": f"{server.url}/chat/completions", "body": {"case": "{{ item.case }}"}, "max_retries": 0,
                "scores": [{"name": "s", "parser": {"type": "json", "json_path": path_of(case)}}],
            }
            result = await evaluate_async("remote", [{"case": case["case"]}], config=cfg)
            out.append((case, result, 0))
    return out


async def test_remote_scores_are_parsed_as_the_sdk_does() -> None:
    differences = []
    for case, result, i in await _run_remote(REMOTE["remote"], lambda c: c["json_path"]):
        ours, sdk = _outcome(result, i, "s"), DELIBERATE_REMOTE.get(case["case"], case["sdk"])
        if ("error" in ours) != ("error" in sdk) or ours.get("value") != sdk.get("value"):
            differences.append((case["case"], case["answer"], ours, sdk))
    assert differences == []


async def test_remote_booleans_and_several_matches() -> None:
    by_case = {c["case"]: c for c in REMOTE["remote"]}
    picked = [by_case[name] for name in ("true", "false", "several_matches", "several_matches_first_bool", "null", "text")]
    got = {c["case"]: _outcome(r, i, "s") for c, r, i in await _run_remote(picked, lambda c: c["json_path"])}
    assert got["true"] == {"value": 1.0} and got["false"] == {"value": 0.0}
    assert got["several_matches"] == {"value": 0.2}  # the first match
    assert got["several_matches_first_bool"] == {"value": 1.0}
    assert "is null" in got["null"]["error"]  # still a row error, as the SDK fails the row
    assert "not a number: 'high'" in got["text"]["error"]


async def test_remote_aggregate_equals_the_sdk() -> None:
    reference = REMOTE["aggregate"]
    by_case = {c["case"]: c for c in REMOTE["remote"]}
    rows = [{"case": name} for name in reference["cases"]]
    with _server_for({name: by_case[name]["answer"] for name in reference["cases"]}, len(rows)) as server:
        cfg = {
            "url": f"{server.url}/chat/completions", "body": {"case": "{{ item.case }}"}, "max_retries": 0,
            "scores": [{"name": "s", "parser": {"type": "json", "json_path": "$.result.score"}}],
        }
        result = await evaluate_async("remote", rows, config=cfg, parallelism=1)
    (ours,) = result.aggregate_scores
    assert_same_aggregate(ours, reference["sdk"])


async def test_nat_score_is_named_after_the_evaluator_and_parsed_as_the_sdk_does() -> None:
    cases = REMOTE["nat"]
    name = REMOTE["evaluator_name"]
    rows = [{"case": c["case"]} for c in cases]
    with _server_for({c["case"]: c["answer"] for c in cases}, len(rows)) as server:
        cfg = {"url": f"{server.url}/chat/completions", "evaluator_name": name, "max_retries": 0}
        result = await evaluate_async("nemo-agent-toolkit-remote", rows, config=cfg, parallelism=1)
    assert result.score_names == tuple(cases[0]["score_names"]) == (name,)
    assert [s["name"] for s in result.aggregate_scores] == [name]
    differences = []
    for i, case in enumerate(cases):
        ours, sdk = _outcome(result, i, name), DELIBERATE_NAT.get(case["case"], case["sdk"])
        if ("error" in ours) != ("error" in sdk) or ours.get("value") != sdk.get("value"):
            differences.append((case["case"], ours, sdk))
    assert differences == []
    assert result.errors[len(cases) - 1].reason == DELIBERATE_NAT["no_result"]["error"]
