"""The collection helpers environments import from NeMo Gym (gdpval's multistage orchestrator):
the attempt cap, elapsed time, terminal failures, the latency tracker, the invalid-judge
migration, the sidecar paths, deliverables and the observability flag give what NeMo Gym 0.7.0
gave (tests/data/nemo_gym_collection/helpers.json, recorded by
scripts/make_nemo_collection_helpers_reference.py), printed warnings and written files included."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gym_metrics.nemo_gym import base_responses_api_model, deliverables, path_utils, rollout_collection

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import make_nemo_collection_helpers_reference as reference  # noqa: E402

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "data" / "nemo_gym_collection" / "helpers.json").read_text())
API = SimpleNamespace(
    **{name: getattr(rollout_collection, name) for name in ("DispatchLatencyTracker", "get_max_rollout_attempts", "is_terminal_failure", "migrate_invalid_judge_main_rows", "observed_elapsed")},
    **{name: getattr(path_utils, name) for name in ("failures_path_for", "materialized_path_for", "aggregate_metrics_path_for")},
    is_deliverable=deliverables.is_deliverable,
    observability_enabled_from_config=base_responses_api_model.observability_enabled_from_config,
)
OURS = reference.record(API)


@pytest.mark.parametrize("probe", sorted(set(RECORDED) - {"nemo_gym"}))
def test_each_helper_answers_as_nemo_gym_s(probe: str) -> None:
    assert OURS[probe] == RECORDED[probe]
