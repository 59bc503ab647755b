"""Record NeMo Gym 0.7.0's per-rollout `ng_perf` (what its collection adds to a row whose
`ng_trajectory` it built, with observability on) for the trajectories of
tests/data/atif/cases.jsonl and variants of one of them that reach each of its rules, into
tests/data/nemo_gym_perf/cases.jsonl; tests/recording/test_rollout_perf.py checks gym-metrics'
`rollout_perf` against it.

A tool for producing test data, not part of gym-metrics: it imports nemo-gym (NOT a project
dependency, Python >= 3.13). Run it with a throwaway venv that has nemo-gym 0.7.0:

    PYTHONPATH=. /tmp/ngvenv/bin/python scripts/make_nemo_perf_reference.py

Each line: {"case", "trajectory", "latency_ms", "ng_perf"}, `ng_perf` the answer of NeMo Gym's
`nemo_gym.rollout_collection._build_ng_perf({"ng_trajectory": trajectory},
rollout_latency_ms=latency_ms)` (null: it adds none). Only trajectories NeMo Gym's
`TrajectoryRecord` accepts are kept (it adds no `ng_perf` to the others; gym-metrics computes
it only for the trajectories it builds, which are valid).
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "data" / "atif" / "cases.jsonl"
OUT = ROOT / "tests" / "data" / "nemo_gym_perf" / "cases.jsonl"
LATENCY_MS = 1834.25

Trajectory = dict[str, Any]


def _no_turns(t: Trajectory) -> None:
    t["turns"] = []


def _nothing_referenced(t: Trajectory) -> None:
    t["turns"] = []
    for invocation in t["invocations"]:
        invocation["model_calls"] = []


def _no_cached_counts(t: Trajectory) -> None:
    for call in t["model_calls"]:
        call["token_stats"]["cached_tokens"] = None


def _no_token_counts(t: Trajectory) -> None:
    for call in t["model_calls"]:
        call["token_stats"] = {k: None for k in call["token_stats"]}


def _no_invocations(t: Trajectory) -> None:
    t["invocations"] = []
    t["turns"] = []
    t["tool_calls"] = []


def _refs_by_response_id(t: Trajectory) -> None:
    """Refs that name the model and response id, no model-call id."""
    model_ref = {"type": "responses_api_models", "name": "policy_model"}
    response_ids = {}
    for n, call in enumerate(t["model_calls"]):
        response_ids[call["model_call_id"]] = call["response_metadata"]["response_id"] = f"resp-{n}"
        call["response_metadata"]["model_ref"] = model_ref
    for holder in [*t["invocations"], *t["turns"]]:
        for ref in holder["model_calls"]:
            ref["response_id"], ref["model_call_id"], ref["model_ref"] = response_ids[ref["model_call_id"]], None, model_ref


def _one_response_id_twice(t: Trajectory) -> None:
    """Two calls with one response id, referenced by model and response id: ambiguous, not counted."""
    _refs_by_response_id(t)
    t["model_calls"][1]["response_metadata"]["response_id"] = "resp-0"
    for holder in [*t["invocations"], *t["turns"]]:
        for ref in holder["model_calls"]:
            if ref["response_id"] == "resp-1":
                ref["response_id"] = "resp-0"


def _one_ref_unknown(t: Trajectory) -> None:
    t["invocations"][0]["model_calls"][1]["model_call_id"] = "nowhere"


def _a_ref_twice(t: Trajectory) -> None:
    """One call referenced twice by the invocation: owned once."""
    refs = t["invocations"][0]["model_calls"]
    refs.append(copy.deepcopy(refs[0]))


def _a_subagent(t: Trajectory) -> None:
    """A second invocation, spawned by the first tool call, with a model call and a tool call of its own."""
    spawner = t["tool_calls"][0]["tool_call_id"]
    call = copy.deepcopy(t["model_calls"][-1])
    call["model_call_id"] = "sub-call-1"
    t["model_calls"].append(call)
    t["invocations"].append({
        "kind": "agent_invocation", "invocation_id": "sub", "parent_invocation_id": "root", "spawned_by_tool_call_id": spawner,
        "status": "completed", "duration_ms": None, "error_type": None,
        "model_calls": [{"model_call_id": "sub-call-1", "model_ref": None, "response_id": call["response_metadata"].get("response_id")}],
        "conversation": [],
    })  # fmt: skip
    tool = copy.deepcopy(t["tool_calls"][-1])
    tool["invocation_id"], tool["tool_call_id"] = "sub", "sub-tool-1"
    t["tool_calls"].append(tool)


def _a_subagent_without_turns(t: Trajectory) -> None:
    _a_subagent(t)
    t["invocations"][1]["model_calls"] = []


VARIANTS: dict[str, Callable[[Trajectory], None]] = {
    "no turns (turns counted by the calls each invocation owns)": _no_turns,
    "no turns and nothing referenced (one turn an invocation)": _nothing_referenced,
    "no cached counts": _no_cached_counts,
    "no token counts": _no_token_counts,
    "no invocations": _no_invocations,
    "references by model and response id": _refs_by_response_id,
    "two calls of one response id": _one_response_id_twice,
    "a reference to no call": _one_ref_unknown,
    "a call referenced twice": _a_ref_twice,
    "a subagent": _a_subagent,
    "a subagent that referenced nothing": _a_subagent_without_turns,
}


def cases() -> Iterator[tuple[str, Trajectory, float | None]]:
    rows = [json.loads(line) for line in SOURCE.read_text().splitlines() if line.strip()]
    base = None
    for case in rows:
        trajectory = case["row"].get("ng_trajectory")
        if trajectory is None:
            continue
        base = base or trajectory
        yield case["case"], trajectory, LATENCY_MS
    assert base is not None
    yield "no latency measured", base, None
    for name, change in VARIANTS.items():
        changed = copy.deepcopy(base)
        change(changed)
        yield name, changed, LATENCY_MS


def main() -> int:
    from nemo_gym.rollout_collection import _build_ng_perf
    from nemo_gym.rollout_observability import TrajectoryRecord

    OUT.parent.mkdir(parents=True, exist_ok=True)
    kept, refused = [], []
    for name, trajectory, latency in cases():
        try:
            TrajectoryRecord.model_validate(trajectory)
        except Exception:
            refused.append(name)
            continue
        perf = _build_ng_perf({"ng_trajectory": trajectory}, rollout_latency_ms=latency)
        kept.append({"case": name, "trajectory": trajectory, "latency_ms": latency, "ng_perf": perf})
    OUT.write_text("".join(json.dumps(c) + "\n" for c in kept))
    print(f"{len(kept)} cases written to {OUT.relative_to(ROOT)}; not valid TrajectoryRecords (left out): {refused or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
