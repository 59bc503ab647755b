"""Record NeMo Gym 0.7.0's per-rollout `ng_perf` (what its collection adds to a row whose
`ng_trajectory` it built, with observability on) for the trajectories of
tests/data/atif/cases.jsonl and variants of one of them that reach each of its rules, into
tests/data/nemo_gym_perf/cases.jsonl; tests/recording/test_rollout_perf.py checks gym-metrics'
`rollout_perf` against it. Some variants are what scripts/fuzz_nemo_perf.py found: counts NeMo
Gym reads as ints (numeric text, floats, bools), a reference's model_ref with a field of its own,
and trajectories it refuses.

A tool for producing test data, not part of gym-metrics: it imports nemo-gym (NOT a project
dependency, Python >= 3.13). Run it with a throwaway venv that has nemo-gym 0.7.0:

    PYTHONPATH=. /tmp/ngvenv/bin/python scripts/make_nemo_perf_reference.py

Each line: {"case", "trajectory", "latency_ms", "ng_perf"}, `ng_perf` the answer of NeMo Gym's
`nemo_gym.rollout_collection._build_ng_perf({"ng_trajectory": trajectory},
rollout_latency_ms=latency_ms)` (null: it adds none, as to a trajectory its `TrajectoryRecord`
refuses: those are kept too).
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


def _counts_as_text(t: Trajectory) -> None:
    """Counts as numeric text (NeMo Gym's TrajectoryRecord reads them as ints)."""
    first, second, third = (c["token_stats"] for c in t["model_calls"])
    first["prompt_tokens"], second["completion_tokens"], third["cached_tokens"] = "8", " 3 ", "1_000"


def _counts_as_floats_and_bools(t: Trajectory) -> None:
    """Counts as floats and bools (read as ints: sums of ints, 1 for true)."""
    first, second, third = (c["token_stats"] for c in t["model_calls"])
    first["prompt_tokens"], third["completion_tokens"], second["cached_tokens"] = 8.0, -0.0, 7.0
    first["reasoning_tokens"], second["reasoning_tokens"], third["reasoning_tokens"] = True, None, None


def _a_model_ref_with_a_field_of_its_own(t: Trajectory) -> None:
    """References by call id naming the calls' model server with a field more (NeMo Gym's
    ModelServerRef ignores it: the same server, the calls matched)."""
    for call in t["model_calls"]:
        call["response_metadata"]["model_ref"] = {"type": "responses_api_models", "name": "policy_model"}
    for ref in t["invocations"][0]["model_calls"]:
        ref["model_ref"] = {"type": "responses_api_models", "name": "policy_model", "region": "eu"}


def _a_negative_count(t: Trajectory) -> None:
    """A count below 0: not a TrajectoryRecord, no ng_perf."""
    t["model_calls"][0]["token_stats"]["prompt_tokens"] = -1


def _a_count_not_a_number(t: Trajectory) -> None:
    t["model_calls"][0]["token_stats"]["completion_tokens"] = "many"


def _an_unknown_invocation_status(t: Trajectory) -> None:
    t["invocations"][0]["status"] = "timeout"


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
    "token counts as numeric text": _counts_as_text,
    "token counts as floats and bools": _counts_as_floats_and_bools,
    "a reference's model_ref with a field of its own": _a_model_ref_with_a_field_of_its_own,
    "a negative token count (refused)": _a_negative_count,
    "a token count not a number (refused)": _a_count_not_a_number,
    "an invocation status NeMo Gym does not name (refused)": _an_unknown_invocation_status,
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


def nemo_perf(trajectory: Any, latency: Any) -> dict[str, Any]:
    """NeMo Gym's answer for one trajectory: {"valid": whether its TrajectoryRecord accepts it,
    "ng_perf": what `_build_ng_perf` gives}, or {"raised": the exception's name}."""
    from nemo_gym.rollout_collection import _build_ng_perf
    from nemo_gym.rollout_observability import TrajectoryRecord

    try:
        TrajectoryRecord.model_validate(trajectory)
        valid = True
    except Exception:
        valid = False
    try:
        return {"valid": valid, "ng_perf": _build_ng_perf({"ng_trajectory": trajectory}, rollout_latency_ms=latency)}
    except Exception as exc:
        return {"raised": type(exc).__name__}


def answer_stdin() -> int:
    """`--stdin`: one JSON line {"trajectory", "latency_ms"} in, NeMo Gym's `nemo_perf` line out
    (scripts/fuzz_nemo_perf.py, one process for its batch)."""
    for line in sys.stdin:
        case = json.loads(line)
        print(json.dumps(nemo_perf(case["trajectory"], case["latency_ms"])), flush=False)
    return 0


def main() -> int:
    if sys.argv[1:] == ["--stdin"]:
        return answer_stdin()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    kept, refused = [], []
    for name, trajectory, latency in cases():
        answer = nemo_perf(trajectory, latency)
        if not answer.get("valid"):
            refused.append(name)
        kept.append({"case": name, "trajectory": trajectory, "latency_ms": latency, "ng_perf": answer["ng_perf"]})
    OUT.write_text("".join(json.dumps(c) + "\n" for c in kept))
    print(f"{len(kept)} cases written to {OUT.relative_to(ROOT)}; not valid TrajectoryRecords (no ng_perf): {refused or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
