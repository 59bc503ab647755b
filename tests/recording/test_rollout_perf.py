"""A rollout's `ng_perf` (docs/pipelines.md#recording) against NeMo Gym 0.7.0's own, computed by
its collection's code for the trajectories of tests/data/nemo_gym_perf/cases.jsonl (recorded by
scripts/make_nemo_perf_reference.py: real collected trajectories, and variants that reach each of
its rules: references by id or by model and response id, ambiguous and unknown references, a
call referenced twice, a subagent, no turns, no token counts, no latency, no invocation; and what
scripts/fuzz_nemo_perf.py found: counts NeMo Gym reads as ints from text, floats and bools, a
reference's model_ref with a field of its own, and trajectories NeMo Gym refuses, which get none)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.recording import rollout_perf

CASES = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "nemo_gym_perf" / "cases.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_ng_perf_is_nemo_gyms(case: dict[str, Any]) -> None:
    ours = rollout_perf(case["trajectory"], case["latency_ms"])
    assert json.dumps(ours) == json.dumps(case["ng_perf"])  # keys, order, values and their JSON types (3, not 3.0)


def test_the_cases_reach_every_rule() -> None:
    perfs = [c["ng_perf"] for c in CASES]
    assert None in perfs and any(p and "total_latency_ms" not in p for p in perfs)
    assert {p["token_observability_coverage"] for p in perfs if p} >= {0.0, 1.0, 0.75, 1 / 3}
    assert any(p and "prompt_tokens" not in p for p in perfs) and any(p and "cached_prompt_tokens" not in p and "prompt_tokens" in p for p in perfs)
    refused = {c["case"] for c in CASES if c["ng_perf"] is None and c["trajectory"].get("invocations")}
    assert {"a negative token count (refused)", "a message phase"} <= refused
