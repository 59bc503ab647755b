"""Conformance with nemo-gym 0.7.0 (docs/metrics.md#aggregate-metrics): our aggregate metrics
vs nemo-gym's, file by file.

Every `tests/data/nemo_gym*/NAME.jsonl` has beside it `NAME_aggregate_metrics.json`, what
nemo-gym 0.7.0 produced for it (`nemo_gym/`: its collector and route; `nemo_gym_extra/`:
scripts/make_nemo_reference.py over the cases scripts/make_conformance_cases.py generates).

Compared: every number in agent_metrics, key_metrics, each group and each repeat entry, to a
relative difference of 1e-9 (absolute where one side is 0); the key sets of every dict; the order
of agents, groups, rollout_infos and repeats; and in rollout_infos the JSON type of every value
too (`4` is not `4.0`, `true` is not `1`: nemo-gym copies values as the row typed them). Not
compared (deliberate differences, docs/metrics.md#aggregate-differences): `sample` (NeMo Gym
sends a placeholder) and NeMo Gym's `_ng_environment_server` bookkeeping; our extra per-agent
`non_finite_counts` / `non_numeric_counts` are allowed, and so are the uncertainty keys
gym-metrics adds to agent_metrics, each of which must be `<prefix>/<field>` with a prefix from
the documented list (`gym_metrics.aggregate.ADDED_AGENT_METRICS`, docs/statistics.md) and a
field NeMo Gym reports a mean of.

The references are what nemo-gym's route computes from rows sent as its client sends them (JSON
through orjson, so a NaN arrives as null: scripts/make_nemo_reference.py). Its rollout_infos
(RewardProfiler.rollout_info_from_result) are reproduced exactly, quirks included: `reward` as
the row holds it (`true`, `"1.0"`, `null`), and a row's own top-level number where its
`response.usage` has the same key (the stats use usage's).

Each case runs twice: as the reader chooses (its columnar fast path when the file allows it)
and forced through its per-line path; both must match.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gym_metrics.aggregate import ADDED_AGENT_METRICS, aggregate_file
from gym_metrics.rollouts import _reader

DATA = Path(__file__).parents[1] / "data"
CASE_DIRS = ("nemo_gym", "nemo_gym_extra")
CASES = sorted(p for d in CASE_DIRS for p in (DATA / d).glob("*.jsonl"))

IGNORED_KEYS = frozenset({"sample", "_ng_environment_server"})
ALLOWED_EXTRA_AGENT_KEYS = frozenset({"non_finite_counts", "non_numeric_counts"})
REL_TOL = 1e-9
ABS_TOL_AT_ZERO = 1e-12


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _fmt(x: Any) -> str:
    return json.dumps(x, allow_nan=True)[:200]


def numbers_close(expected: float, actual: float) -> bool:
    if expected == actual:
        return True
    if math.isnan(expected) or math.isnan(actual) or math.isinf(expected) or math.isinf(actual):
        return False
    diff = abs(expected - actual)
    if expected == 0 or actual == 0:
        return diff <= ABS_TOL_AT_ZERO
    return diff <= REL_TOL * max(abs(expected), abs(actual))


def first_mismatch(expected: Any, actual: Any, path: str = "$", allowed_extra: frozenset[str] = frozenset()) -> str | None:
    """Where `actual` first departs from `expected` ("<path>: <what>"), or None if it conforms."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {_fmt(actual)}"
        want = set(expected) - IGNORED_KEYS
        have = set(actual) - IGNORED_KEYS - allowed_extra
        if want != have:
            missing, extra = sorted(want - have), sorted(have - want)
            return f"{path}: key sets differ (missing {missing}, unexpected {extra})"
        for key in expected:  # expected order, so the report is stable
            if key in IGNORED_KEYS:
                continue
            found = first_mismatch(expected[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: expected an array, got {_fmt(actual)}"
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} entries, got {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            found = first_mismatch(e, a, f"{path}[{i}]", allowed_extra if path == "$" else frozenset())
            if found:
                return found
        return None
    if isinstance(expected, float) and math.isnan(expected):
        if actual is None or (isinstance(actual, float) and math.isnan(actual)):
            return None  # NaN has no JSON form: written as null
        return f"{path}: expected NaN (null), got {_fmt(actual)}"
    if _is_number(expected):
        if not _is_number(actual) or (".rollout_infos[" in path and type(expected) is not type(actual)):
            return f"{path}: expected {_fmt(expected)}, got {_fmt(actual)}"
        if not numbers_close(float(expected), float(actual)):
            return f"{path}: expected {expected!r}, got {actual!r}"
        return None
    if expected != actual or type(expected) is not type(actual):
        return f"{path}: expected {_fmt(expected)}, got {_fmt(actual)}"
    return None


def compare_files(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> str | None:
    if isinstance(actual, list) and isinstance(expected, list):
        actual = [without_added(e, a) for e, a in zip(expected, actual)] + actual[len(expected):]
    return first_mismatch(expected, actual, "$", ALLOWED_EXTRA_AGENT_KEYS)


def without_added(expected: Any, actual: Any) -> Any:
    """`actual` without the keys gym-metrics adds to agent_metrics, after checking each is a
    documented `<prefix>/<field>` of a field NeMo Gym reports a mean of (else left in, so the
    key-set comparison names it)."""
    if not (isinstance(actual, dict) and isinstance(actual.get("agent_metrics"), dict) and isinstance(expected, dict)):
        return actual
    means = {k.split("/", 1)[1] for k in expected.get("agent_metrics", {}) if k.startswith("mean/")}
    def added(key: str) -> bool:
        prefix, _, name = key.partition("/")
        return prefix in ADDED_AGENT_METRICS and name in means
    kept = {k: v for k, v in actual["agent_metrics"].items() if k in expected.get("agent_metrics", {}) or not added(k)}
    return {**actual, "agent_metrics": kept}


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))  # stdlib: reads the NaN literal


def expected_path(case: Path) -> Path:
    return case.with_name(f"{case.stem}_aggregate_metrics.json")


def run_ours(case: Path, tmp_path: Path) -> list[dict[str, Any]]:
    src = tmp_path / case.name
    shutil.copyfile(case, src)
    out, _, _ = aggregate_file(src)
    assert out == tmp_path / f"{case.stem}_aggregate_metrics.json"
    return load_json(out)


@pytest.fixture(params=["default", "per_line"])
def reader_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "per_line":
        monkeypatch.setattr(_reader, "_read_fast", lambda *args: None)
    return request.param


def test_cases_found() -> None:
    assert len([c for c in CASES if c.parent.name == "nemo_gym"]) >= 6
    assert len([c for c in CASES if c.parent.name == "nemo_gym_extra"]) >= 20
    for case in CASES:
        assert expected_path(case).exists(), f"no nemo-gym reference for {case}"


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_matches_nemo_gym(case: Path, tmp_path: Path, reader_path: str) -> None:
    expected = load_json(expected_path(case))
    actual = run_ours(case, tmp_path)
    mismatch = compare_files(expected, actual)
    assert mismatch is None, f"{case.parent.name}/{case.name} ({reader_path} reader): {mismatch}"


def test_index_aliases_match_nemo_gym(tmp_path: Path) -> None:
    """`task_index` / `rollout_index` rows aggregate as the `_ng_` spelling does (nemo-gym's numbers).

    nemo-gym itself has no reference for the aliases (it reads only `_ng_task_index`), so the
    aliased file is compared with nemo-gym's output for the same rows spelled with `_ng_` keys.
    """
    case = DATA / "nemo_gym" / "worked_example.jsonl"
    aliased = tmp_path / "aliased.jsonl"
    lines = []
    for i, line in enumerate(case.read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        if i % 2:  # half the rows aliased, half not: both spellings in one file
            row["task_index"] = row.pop("_ng_task_index")
            row["rollout_index"] = row.pop("_ng_rollout_index")
        lines.append(json.dumps(row))
    aliased.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, _, _ = aggregate_file(aliased)
    assert compare_files(load_json(expected_path(case)), load_json(out)) is None


def test_rollout_info_quirks_are_reproduced(tmp_path: Path) -> None:
    """nemo-gym's rollout_infos quirks, value for value: the raw reward, the top-level number
    beside a usage one, ints as ints; the stats of the same rows follow
    docs/metrics.md#numeric-fields."""
    cases = {
        "bool_reward": (0, 0, "reward", False),
        "none_reward": (0, 1, "reward", None),
        "usage_clash": (0, 0, "total_tokens", 7),
        "bools_and_ints": (0, 1, "mixed", 9),
    }
    for stem, (group, rollout, key, value) in cases.items():
        actual = run_ours(DATA / "nemo_gym_extra" / f"{stem}.jsonl", tmp_path)
        info = actual[0]["group_level_metrics"][group]["rollout_infos"][rollout]
        assert key in info and info[key] == value and type(info[key]) is type(value), (stem, info)
    usage = run_ours(DATA / "nemo_gym_extra" / "usage_clash.jsonl", tmp_path)[0]
    assert usage["group_level_metrics"][0]["mean/total_tokens"] == 116.0  # the stats: usage's 111 and 121



def test_quantiles_of_integers_far_apart_stay_within_their_values(tmp_path: Path) -> None:
    """A deliberate difference (docs/metrics.md#aggregate-differences): NeMo Gym's pandas
    interpolates p25 of int64 values 2**63 or more apart in int64 and overflows (-1.04e19 here,
    below the minimum: scripts/fuzz_nemo_aggregate.py found it); here in float64."""
    values = [-(2**63) + 1, 2**62]
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": 1.0, "n": values[t]}
            for t in range(2) for r in range(2)]  # fmt: skip
    src = tmp_path / "far.jsonl"
    src.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out, _, _ = aggregate_file(src)
    first_repeat = load_json(out)[0]["repeat_level_metrics"][0]
    assert first_repeat["p25/n"] == float(np.percentile(np.array(values, dtype=np.float64), 25)) == -5.764607523034235e18
    assert min(values) <= first_repeat["p25/n"] <= first_repeat["p75/n"] <= max(values)

# --- the comparison itself must be able to fail ------------------------------------------


@pytest.fixture
def reference() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    expected = load_json(expected_path(DATA / "nemo_gym" / "multi_agent.jsonl"))
    return expected, json.loads(json.dumps(expected))


def test_mutated_expected_value_fails_a_real_run(tmp_path: Path) -> None:
    case = DATA / "nemo_gym" / "worked_example.jsonl"
    expected = load_json(expected_path(case))
    actual = run_ours(case, tmp_path)
    assert compare_files(expected, actual) is None
    expected[0]["repeat_level_metrics"][2]["ci_low_95/reward"] *= 1 + 1e-8
    assert compare_files(expected, actual).startswith("$[0].repeat_level_metrics[2].ci_low_95/reward: expected ")


def test_identical_passes(reference: Any) -> None:
    expected, actual = reference
    assert compare_files(expected, actual) is None


def test_mutated_group_stat_is_reported_with_its_path(reference: Any) -> None:
    expected, actual = reference
    actual[1]["group_level_metrics"][3]["std/reward"] *= 1 + 1e-7
    assert compare_files(expected, actual).startswith("$[1].group_level_metrics[3].std/reward: expected ")


def test_mutated_agent_metric_is_reported(reference: Any) -> None:
    expected, actual = reference
    key = "ci_high_95_across_repeats/mean/reward"
    actual[0]["agent_metrics"][key] += 1e-6
    assert compare_files(expected, actual).startswith(f"$[0].agent_metrics.{key}: expected ")


def test_mutated_rollout_info_and_repeat_are_reported(reference: Any) -> None:
    expected, actual = reference
    actual[0]["group_level_metrics"][0]["rollout_infos"][1]["latency_s"] = 0.0
    assert compare_files(expected, actual).startswith("$[0].group_level_metrics[0].rollout_infos[1].latency_s:")
    expected, actual = reference[0], json.loads(json.dumps(reference[0]))
    actual[1]["repeat_level_metrics"][0]["p75/reward"] += 0.5
    assert compare_files(expected, actual).startswith("$[1].repeat_level_metrics[0].p75/reward:")


def test_missing_or_extra_key_is_reported(reference: Any) -> None:
    expected, actual = reference
    del actual[0]["key_metrics"]["mean/reward"]
    assert "missing ['mean/reward']" in compare_files(expected, actual)
    actual = json.loads(json.dumps(expected))
    actual[0]["group_level_metrics"][0]["std/extra"] = 0.0
    assert "unexpected ['std/extra']" in compare_files(expected, actual)
    actual = json.loads(json.dumps(expected))
    actual[0]["non_finite_counts"] = {}  # allowed per agent, nowhere else
    assert compare_files(expected, actual) is None
    actual[0]["agent_metrics"]["non_finite_counts"] = {}
    assert "unexpected ['non_finite_counts']" in compare_files(expected, actual)


def test_order_is_checked(reference: Any) -> None:
    expected, actual = reference
    groups = actual[0]["group_level_metrics"]
    groups[0], groups[1] = groups[1], groups[0]
    assert compare_files(expected, actual).startswith("$[0].group_level_metrics[0]")
    actual = json.loads(json.dumps(expected))
    actual.reverse()
    assert compare_files(expected, actual).startswith("$[0].agent_ref.name")


def test_number_rules() -> None:
    assert numbers_close(0.5222329678670935, 0.5222329678670935 * (1 + 5e-10))
    assert not numbers_close(0.5222329678670935, 0.5222329678670935 * (1 + 5e-9))
    assert numbers_close(0.0, 1e-13) and not numbers_close(0.0, 1e-9)
    assert first_mismatch(float("nan"), None) is None
    assert first_mismatch(float("nan"), 0.0) is not None
    assert first_mismatch(1, 1.0) is None
    assert first_mismatch(1, 1.0, "$.rollout_infos[0].x") is not None  # typed where nemo-gym copies
    assert first_mismatch(1, True) is not None
    assert first_mismatch(None, 0.0) is not None


def test_perf_summary_is_nemo_gyms_to_the_byte(tmp_path: Path) -> None:
    """`perf_summary` (the agents' `ng_perf` blocks summarized): keys in NeMo Gym's order, its
    JSON types (an integer total, a median `true`), its values; none for an agent without blocks."""
    src = DATA / "nemo_gym_extra" / "perf_blocks.jsonl"
    want = {e["agent_ref"]["name"]: e.get("perf_summary") for e in json.loads(src.with_name("perf_blocks_aggregate_metrics.json").read_text())}
    out, _, _ = aggregate_file(shutil.copyfile(src, tmp_path / src.name), tmp_path / "m.json")
    got = {e["agent_ref"]["name"]: e.get("perf_summary") for e in json.loads(out.read_text())}
    assert json.dumps(got) == json.dumps(want) and want["unobserved"] is None and want["all_observed"]
