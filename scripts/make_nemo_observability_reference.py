"""Record NeMo Gym 0.7.0's own projection of a rollout's evidence on cases made to reach each of
its rules, for tests/nemo_gym/test_observability.py to hold gym_metrics.nemo_gym's port to.

Each case is a dispatched row and an agent's `/run` answer carrying some of: its own trajectory
(`ng_trajectory`), an observation bundle (`ng_agent_observations`) and the captured model calls
(`ng_model_call_capture`, payloads in). NeMo Gym's collection is run on it as it runs on a real
answer: the bundle joined to the calls (`join_model_call_observations`, the calls as its
`ModelCallRecord`s), then `_attach_trajectory_record` (the projection, then the payloads dropped).
Written: {"cases": [{"name", "row", "result", "nemo": the answer after, or {"raised": ...}}]}.

    .venv/bin/python scripts/make_nemo_observability_reference.py --nemo-python /tmp/ngvenv/bin/python \\
        --out tests/data/nemo_gym_observability.json
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

SERVER = {"type": "responses_api_models", "name": "policy_model"}
JUDGE = {"type": "responses_api_models", "name": "judge_model"}

NEMO = r'''
import json, sys
from nemo_gym.base_responses_api_model import ModelCallRecord
from nemo_gym.rollout_collection import _attach_trajectory_record
from nemo_gym.rollout_observability import AgentObservationBundle, ObservationGap, join_model_call_observations

cases = json.load(open(sys.argv[1]))
for case in cases:
    result = json.loads(json.dumps(case["result"]))
    try:
        capture = result.get("ng_model_call_capture")
        if capture is not None and result.get("ng_agent_observations") is not None:
            try:
                bundle = AgentObservationBundle.model_validate(result["ng_agent_observations"])
                calls = [ModelCallRecord.model_validate(c) for c in capture.get("calls") or []]
                result["ng_agent_observations"] = join_model_call_observations(bundle, calls).model_dump(mode="json")
            except Exception:
                capture.setdefault("gaps", []).append(ObservationGap(code="agent_observation_join_failed").model_dump(mode="json", exclude_none=True))
        _attach_trajectory_record(case["row"], result)
        case["nemo"] = result
    except Exception as exc:
        case["nemo"] = {"raised": type(exc).__name__}
json.dump(cases, open(sys.argv[2], "w"))
'''


def call(n: int, *, session: str | None = None, response_id: str | None = "resp-a", model_ref: Any = SERVER, dialect: str = "responses",
         request: Any = None, response: Any = "default", started: float = 100.0) -> dict[str, Any]:  # fmt: skip
    """A model-call record as NeMo Gym's capture writes it (payloads in)."""
    if response == "default":
        response = {"id": response_id, "status": "completed", "output": [
            {"type": "reasoning", "id": f"rs{n}", "summary": [{"type": "summary_text", "text": "thinking"}]},
            {"type": "function_call", "id": f"fc{n}", "call_id": f"tool-{n}", "name": "lookup", "arguments": "{}", "status": "completed"},
            {"type": "message", "id": f"msg{n}", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": f"answer {n}", "annotations": []}]},
        ]}  # fmt: skip
    return {
        "model_call_id": f"{n:032x}", "response_id": response_id, "client_session_id": session, "call_index": n, "model_ref": model_ref,
        "model": "scripted", "dialect": dialect, "status_code": 200 if response is not None else 500, "response_status": None,
        "finish_reason": "stop", "upstream_attempted": None, "response_source": None, "upstream_status_code": None, "local_response_reason": None,
        "started_at": started + n, "completed_at": started + n + 0.5, "tokens_in": 10 + n, "tokens_out": 2, "tokens_reasoning": 1, "tokens_total": 12 + n,
        "request": request if request is not None else {"input": [{"role": "user", "content": f"question {n}"}]},
        "response": response, "request_raw": None, "response_raw": None if response is not None else "upstream failed",
        "tool_calls": [], "reasoning_content": None, "cache_hit": False, "cached_tokens": 0, "cache_creation_tokens": None,
        "error_category": None if response is not None else "upstream_error", "latency_total_ms": 500.0, "latency_ttft_ms": 20.0,
    }  # fmt: skip


def capture(*calls: dict[str, Any], gaps: list[Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"rollout_id": "0-0", "metrics": {"num_calls": len(calls)}, "calls": list(calls)}
    if gaps is not None:
        block["gaps"] = gaps
    return block


def ref(n: int | None = None, response_id: str | None = None, model_ref: Any = None) -> dict[str, Any]:
    return {"model_call_id": None if n is None else f"{n:032x}", "model_ref": model_ref, "response_id": response_id}


def invocation(name: str, *refs: dict[str, Any], parent: str | None = None, conversation: list[Any] | None = None, status: str = "completed") -> dict[str, Any]:
    return {"kind": "agent_invocation", "invocation_id": name, "parent_invocation_id": parent, "status": status, "model_calls": list(refs),
            "conversation": conversation or []}  # fmt: skip


def tool(name: str, call_id: str, status: str = "completed", **more: Any) -> dict[str, Any]:
    return {"kind": "tool_call", "invocation_id": name, "tool_call_id": call_id, "tool_name": "lookup", "status": status, **more}


def bundle(*records: dict[str, Any], gaps: list[Any] | None = None) -> dict[str, Any]:
    return {"source": "case", "records": list(records), "gaps": gaps or []}


def trajectory(task: str = "0", rollout: str = "0-0", **parts: Any) -> dict[str, Any]:
    return {"schema_version": "1.0", "task_id": task, "rollout_id": rollout, **parts}


ROW = {"_ng_task_index": 0, "_ng_rollout_index": 0, "responses_create_params": {"input": "question"}}
CONVERSATION = [{"role": "user", "content": "question 0"}, {"type": "function_call_output", "call_id": "tool-0", "output": "42"}]


def cases() -> list[dict[str, Any]]:
    """(name, row, result) made to reach each rule of NeMo Gym's projection and join."""
    made = [
        ("capture_only", ROW, {"reward": 1.0, "ng_model_call_capture": capture(call(0), call(1, response_id="resp-b"))}),
        ("resolved_on_last_turn", ROW, {"reward": 1.0, "resolved": True, "ng_model_call_capture": capture(call(0), call(1, response_id="resp-b", response=None), call(2, response_id="resp-c")),
                                        "ng_agent_observations": bundle(invocation("root", ref(0), ref(1), ref(2), conversation=CONVERSATION))}),
        ("chat_dialect", ROW, {"ng_model_call_capture": capture(call(0, dialect="chat", request={"messages": [{"role": "user", "content": "q"}]}, response={
            "id": "chat-1", "choices": [{"message": {"role": "assistant", "content": "a", "reasoning_content": "r", "tool_calls": [{"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]})),
            "ng_agent_observations": bundle(invocation("root", ref(0)))}),
        ("adopted_by_session", ROW, {"ng_model_call_capture": capture(call(0, session="root"), call(1, session="critic", response_id="resp-b"), call(2, session="nobody", response_id="resp-c")),
                                     "ng_agent_observations": bundle(invocation("root", conversation=CONVERSATION), invocation("critic", parent="root"))}),
        ("already_referenced_by_response", ROW, {"ng_model_call_capture": capture(call(0, session="root")),
                                                 "ng_agent_observations": bundle(invocation("root", ref(None, "resp-a", SERVER)))}),
        ("unmatched_ambiguous_conflict", ROW, {"ng_model_call_capture": capture(call(0), call(1), call(2, response_id="resp-c", model_ref=JUDGE)),
                                               "ng_agent_observations": bundle(
                                                   invocation("root", ref(None, "resp-a", SERVER), ref(2, "resp-wrong"), ref(2)),
                                                   invocation("judge", ref(2, None, JUDGE), parent="root"),
                                                   gaps=[{"code": "model_call_reference_unmatched", "invocation_id": "root", "detail": "stale"},
                                                         {"code": "model_call_ownership_unavailable", "detail": "capture:old:call_index=9"},
                                                         {"code": "kept", "invocation_id": None, "detail": None}])}),  # fmt: skip
        ("compaction", ROW, {"ng_model_call_capture": capture(call(0), call(1, response_id="resp-b"), call(2, response_id="resp-c"), call(3, response_id="resp-d")),
                             "ng_agent_observations": bundle(
                                 invocation("root", ref(0), ref(1)), invocation("sub", ref(2), parent="root"),
                                 {"kind": "context_compaction", "invocation_id": "root", "trigger": "tokens", "tokens_before": 100, "tokens_after": 10,
                                  "outcome": "completed", "model_calls": [ref(1), ref(2), ref(3), ref(None, "resp-zzz", SERVER)],
                                  "before_model_call": ref(None, "resp-a", SERVER), "after_model_call": ref(2)},
                                 {"kind": "context_compaction", "invocation_id": "root", "before_model_call": ref(3), "after_model_call": ref(None, "resp-none", SERVER)},
                                 {"kind": "sandbox", "role": "agent", "provider": "local", "outcome": "completed", "wall_time_s": 3.5})}),  # fmt: skip
        ("tool_calls_merged", ROW, {"ng_trajectory": trajectory(
            invocations=[invocation("root", ref(0), conversation=CONVERSATION)], tool_calls=[{**tool("root", "tool-0"), "output": "old"}, tool("root", "tool-9", "failed", error_type="x")]),
            "ng_agent_observations": bundle(tool("root", "tool-0", "unknown", started_at=1.0, completed_at=2.0), tool("root", "tool-9", "timeout"), tool("root", "tool-new", sandbox_id="sb"),
                                            invocation("extra", parent="root")),
            "ng_model_call_capture": capture(call(0))}),  # fmt: skip
        ("producer_identity_mismatch", {**ROW, "task_id": "math-7", "_ng_rollout_id": "r-7"}, {"ng_trajectory": trajectory(
            "other", "0-0", invocations=[invocation("root", ref(0))], gaps=[{"code": "own_gap"}],
            turns=[{"invocation_id": "root", "task_id": "other", "rollout_id": "0-0", "turn_no": 2, "timestamp": 5.0, "step_count": 1, "model_calls": [ref(0)]},
                   {"invocation_id": "root", "task_id": "other", "rollout_id": "0-0", "turn_no": 1, "timestamp": 5.0, "step_count": 0}]),
            "ng_model_call_capture": capture(call(0))}),  # fmt: skip
        ("producer_no_turns", ROW, {"ng_trajectory": trajectory(invocations=[invocation("root")]), "ng_model_call_capture": capture(call(0))}),
        ("producer_invalid", ROW, {"ng_trajectory": trajectory(turns=[{"invocation_id": "root", "task_id": "x", "rollout_id": "y", "turn_no": 1, "timestamp": 0, "step_count": 0}]),
                                   "ng_model_call_capture": capture(call(0))}),
        ("producer_calls_completed_by_capture", ROW, {"ng_trajectory": trajectory(
            invocations=[invocation("root", ref(0))], model_calls=[{"model_call_id": f"{0:032x}", "request": {"kept": True}, "response_metadata": {"model": "own", "finish_reason": "length"},
                                                                  "token_stats": {"prompt_tokens": 99}}]),
            "ng_model_call_capture": capture({**call(0), "finish_reason": None, "tokens_in": -1}, call(1, response_id="resp-b"))}),  # fmt: skip
        ("capture_gaps", ROW, {"ng_model_call_capture": capture(call(0), gaps=[{"code": "model_call_capture_incomplete"}, {"code": "x", "extra": 1}, "not a gap"])}),
        ("projection_fails", ROW, {"ng_model_call_capture": capture(call(0), call(0))}),
        ("producer_invalid_duplicate_calls", ROW, {"ng_agent_observations": bundle(invocation("root")),
                                                   "ng_trajectory": trajectory(model_calls=[{"model_call_id": "same"}, {"model_call_id": "same"}])}),
        ("observations_invalid", ROW, {"ng_model_call_capture": capture(call(0)),
                                       "ng_agent_observations": bundle(invocation("a", parent="b"), invocation("b", parent="a"))}),
        ("no_calls", ROW, {"ng_agent_observations": bundle(invocation("root", conversation=CONVERSATION))}),
        ("raw_payloads", ROW, {"ng_model_call_capture": capture({**call(0), "request": None, "request_raw": "not json", "response": None, "response_raw": "<html>"})}),
        # found by scripts/fuzz_nemo_observability.py
        ("row_without_task_index", {"_ng_rollout_index": 0, "task_id": "math-7"}, {"ng_model_call_capture": capture(call(0))}),
        ("bad_rollout_id_nowhere_to_say", {**ROW, "_ng_rollout_id": "bad id"}, {"reward": 1.0}),
        ("producer_not_an_object", ROW, {"ng_trajectory": [], "ng_model_call_capture": capture(call(0))}),
        ("conversation_typed_parts", ROW, {"ng_model_call_capture": capture(call(0)), "ng_agent_observations": bundle(invocation("root", ref(0), conversation=[
            {"type": "function_call_output", "call_id": "tool-0", "output": [{"type": "input_text", "text": "t", "extra": 1}]}, {"foo": 1},
            {"type": "mcp_call", "arguments": "{}", "name": "n"}]), tool("root", "tool-0"))}),
        ("conversation_part_refused", ROW, {"ng_model_call_capture": capture(call(0)), "ng_agent_observations": bundle(invocation("root", ref(0), conversation=[
            {"type": "function_call_output", "call_id": "tool-0", "output": [{"foo": 1}]}]))}),
    ]  # fmt: skip
    return [{"name": name, "row": row, "result": copy.deepcopy(result)} for name, row, result in made]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo-python", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="observability-ref-") as tmp:
        given, done, runner = Path(tmp) / "cases.json", Path(tmp) / "done.json", Path(tmp) / "run.py"
        given.write_text(json.dumps(cases()))
        runner.write_text(NEMO)
        subprocess.run([args.nemo_python, str(runner), str(given), str(done)], check=True, timeout=300)
        recorded = json.loads(done.read_text())
    args.out.write_text(json.dumps({"cases": recorded}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(recorded)} cases, {sum('raised' in c['nemo'] for c in recorded)} raised")


if __name__ == "__main__":
    main()
