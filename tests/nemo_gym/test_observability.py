"""NeMo Gym's observation contracts as ported (gym_metrics.nemo_gym.rollout_observability,
rollout_collection): on cases made to reach each rule (a call adopted by its session, a
reference unmatched, ambiguous or held by two invocations, compactions, tool calls merged, an
agent's own trajectory valid, mismatched or invalid, capture gaps, a projection that fails,
chat-dialect calls, raw payloads), the join of an agent's observations to its captured calls and
the projection of `ng_trajectory` give what NeMo Gym 0.7.0's own functions gave
(tests/data/nemo_gym_observability.json, scripts/make_nemo_observability_reference.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pydantic
import pytest

from gym_metrics.nemo_gym.rollout_collection import attach_trajectory_record, merge_model_call_capture
from gym_metrics.nemo_gym.rollout_observability import AgentObservationBundle, ModelCallRef, TrajectoryRecord, join_model_call_observations
from gym_metrics.testing._nemo_check import differences

CASES = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_observability.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_evidence_is_joined_and_projected_as_nemo_gym_does(case: dict[str, Any]) -> None:
    result = copy.deepcopy(case["result"])
    block = result.pop("ng_model_call_capture", None)
    if block is not None:
        merge_model_call_capture(result, block)
    attach_trajectory_record(case["row"], result)
    assert differences(case["nemo"], result, case["name"]) == []


def test_the_cases_reach_the_rules_they_are_for() -> None:
    """The recorded cases hold what they were made for (a case that stopped reaching its rule
    would pass unseen)."""
    by_name = {c["name"]: c["nemo"] for c in CASES}

    def codes(answer: dict[str, Any], where: str = "ng_trajectory") -> set[str]:
        return {g["code"] for g in answer[where]["gaps"]}

    joined = by_name["unmatched_ambiguous_conflict"]["ng_agent_observations"]["gaps"]
    assert {g["code"] for g in joined} >= {"model_call_reference_ambiguous", "model_call_reference_unmatched", "model_call_reference_conflict", "kept"}
    assert "stale" not in {g["detail"] for g in joined}  # the bundle's own join gaps are replaced
    assert {"turns_unavailable", "conversation_unavailable"} <= codes(by_name["capture_only"])
    assert "producer_trajectory_invalid" in codes(by_name["producer_invalid"]) and "producer_trajectory_identity_mismatch" in codes(by_name["producer_identity_mismatch"])
    assert by_name["projection_fails"]["ng_model_call_capture"]["gaps"][-1] == {"code": "trajectory_projection_failed", "detail": "ValidationError"}
    assert "producer_trajectory_invalid" in codes(by_name["producer_invalid_duplicate_calls"])
    assert {"agent_observation_join_failed"} <= {g["code"] for g in by_name["observations_invalid"]["ng_model_call_capture"]["gaps"]}
    assert by_name["resolved_on_last_turn"]["ng_trajectory"]["turns"][-1]["resolved"] is True
    tools = {t["tool_call_id"]: t for t in by_name["tool_calls_merged"]["ng_trajectory"]["tool_calls"]}
    assert tools["tool-0"]["status"] == "completed" and tools["tool-0"]["output"] == "42" and tools["tool-9"]["status"] == "timeout"
    # found by scripts/fuzz_nemo_observability.py
    assert by_name["row_without_task_index"]["ng_model_call_capture"]["gaps"] == [{"code": "trajectory_projection_failed", "detail": "KeyError"}]
    assert by_name["bad_rollout_id_nowhere_to_say"] == {"reward": 1.0}  # no trajectory, the answer kept
    assert "turns_unavailable" in codes(by_name["producer_not_an_object"])
    typed = by_name["conversation_typed_parts"]["ng_trajectory"]["invocations"][0]["conversation"]
    assert typed[0]["output"] == [{"text": "t", "type": "input_text"}] and typed[1]["type"] == "mcp_list_tools"
    assert "agent_observations_invalid" in codes(by_name["conversation_part_refused"])


def test_the_contracts_refuse_what_nemo_gym_refuses() -> None:
    with pytest.raises(pydantic.ValidationError, match="model_call_id or both model_ref and response_id"):
        ModelCallRef(response_id="r")
    with pytest.raises(pydantic.ValidationError, match="cycle"):
        AgentObservationBundle.model_validate({"source": "s", "records": [
            {"kind": "agent_invocation", "invocation_id": "a", "parent_invocation_id": "b"},
            {"kind": "agent_invocation", "invocation_id": "b", "parent_invocation_id": "a"},
        ]})  # fmt: skip
    with pytest.raises(pydantic.ValidationError, match="completed_at must not precede"):
        AgentObservationBundle.model_validate({"source": "s", "records": [{"kind": "tool_call", "invocation_id": "a", "tool_call_id": "t", "started_at": 2, "completed_at": 1}]})
    with pytest.raises(pydantic.ValidationError, match="turn number must be unique"):
        turn = {"invocation_id": "a", "task_id": "t", "rollout_id": "r", "turn_no": 1, "timestamp": 0, "step_count": 0}
        TrajectoryRecord(task_id="t", rollout_id="r", turns=[turn, turn])  # type: ignore[list-item]
    with pytest.raises(pydantic.ValidationError, match="Extra inputs"):
        AgentObservationBundle.model_validate({"source": "s", "unknown": 1})


def test_the_join_leaves_the_bundle_it_was_given_unchanged() -> None:
    bundle = AgentObservationBundle.model_validate({"source": "s", "records": [{"kind": "agent_invocation", "invocation_id": "root"}]})
    calls = [{"model_call_id": "c1", "client_session_id": "root", "call_index": 0, "model_ref": None, "response_id": None}]
    joined = join_model_call_observations(bundle, calls)
    assert [r.model_call_id for r in joined.records[0].model_calls] == ["c1"]  # type: ignore[union-attr]
    assert bundle.records[0].model_calls == []  # type: ignore[union-attr]


def test_items_put_in_without_validation_are_dumped_as_they_are_without_warnings() -> None:
    """An agent's `model_copy(update={"conversation": ...})` (NeMo Gym's demo agents make one)
    puts in items never validated: its own typed items and plain dicts. NeMo Gym's union dumps
    its own items by their class; here they are foreign to the mirror's union, which warned
    for each and every dump. They are dumped by their own class (a dict as the JSON it is),
    with no warning; validated items are dumped as before."""
    import warnings

    from gym_metrics.nemo_gym.openai_utils import NeMoGymEasyInputMessage
    from gym_metrics.nemo_gym.rollout_observability import AgentInvocation

    message = NeMoGymEasyInputMessage(role="user", content="hi")
    output = {"type": "function_call_output", "call_id": "c1", "output": "{'detail': 'Not Found'}"}
    valid = AgentInvocation(invocation_id="root", conversation=[{"type": "message", "role": "assistant", "content": "ok"}])
    copied = valid.model_copy(update={"conversation": [*valid.conversation, message, output]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dumped = copied.model_dump(mode="json")["conversation"]
    assert dumped == [valid.model_dump(mode="json")["conversation"][0], message.model_dump(mode="json"), output]
