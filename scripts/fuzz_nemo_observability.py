"""Differential test of the projection of a rollout's evidence against NeMo Gym 0.7.0 on random
`/run` answers: each seed makes one dispatched row and one answer carrying some of the agent's own
trajectory (`ng_trajectory`: absent, valid, mismatched or malformed), an observation bundle
(`ng_agent_observations`: invocations, tool calls, compactions, sandboxes, gaps; references by
call id, by server and response id, wrong, missing, duplicated) and the captured model calls
(`ng_model_call_capture`: calls missing, duplicated, shuffled, with odd ids, sessions, statuses,
timings, token counts and payloads of every JSON type; capture gaps of every shape). NeMo Gym's
collection runs on it as scripts/make_nemo_observability_reference.py runs it (join, then
`_attach_trajectory_record`, in one subprocess of the nemo-gym venv for the whole batch); ours as
tests/nemo_gym/test_observability.py runs it (`merge_model_call_capture`, then
`attach_trajectory_record`). The answers after must be the same JSON exactly (types, key sets,
list order), or both sides raise the same exception kind.

    .venv/bin/python scripts/fuzz_nemo_observability.py --seeds 0:2000 --nemo-python /tmp/ngvenv/bin/python \
        [--keep DIR]   # DIR gets each differing case with NeMo Gym's answer and ours beside it

Exit 0 when every case gives NeMo Gym's answer; 1 when one differs.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import make_nemo_observability_reference as ref_script  # noqa: E402  (its NeMo Gym runner and record maker)

from gym_metrics.nemo_gym.rollout_collection import attach_trajectory_record, merge_model_call_capture  # noqa: E402
from gym_metrics.testing._nemo_check import differences  # noqa: E402

SERVER, JUDGE = ref_script.SERVER, ref_script.JUDGE
NAMES = ["root", "sub", "critic", "", "Ünï"]
ODD: list[Any] = [None, "", 0, -1, 1.5, True, "x", [], {}, {"k": [1]}, float("nan"), 2**70, "Ünï ✓"]


def _pick(rng: random.Random, usual: Callable[[], Any], odd: float = 0.15, pool: list[Any] = ODD) -> Any:
    return rng.choice(pool) if rng.random() < odd else usual()


def _payload(rng: random.Random, n: int, kind: str) -> Any:
    """A request or response payload: the usual dict, or any JSON value."""
    roll = rng.random()
    if roll < 0.5:
        return None if kind == "response" and rng.random() < 0.2 else "default"
    if roll < 0.6:
        return {"messages": [{"role": "user", "content": "q"}]} if kind == "request" else {"id": f"chat-{n}", "choices": rng.choice([
            [{"message": {"role": "assistant", "content": "a", "reasoning": rng.choice([None, "r", ""]), "tool_calls": rng.choice([None, [{"id": "t"}], []])}}],
            [], [None], [{"message": None}], "x"])}  # fmt: skip
    if roll < 0.75 and kind == "response":
        items = [{"type": "reasoning", "summary": []}, {"type": "function_call", "call_id": f"tool-{n}", "name": "f", "arguments": "{}"},
                 {"type": "message", "content": []}, "text", None, {"no_type": 1}]  # fmt: skip
        return {"id": f"r{n}", "status": _pick(rng, lambda: rng.choice(["completed", "incomplete"])), "output": rng.sample(items, rng.randint(0, 4))}
    if roll < 0.85 and kind == "request":
        return {"input": rng.choice([[{"role": "user", "content": "q"}, {"type": "message", "role": "user", "content": []}, "s", 3], "plain", None, []])}
    return rng.choice(ODD) if rng.random() < 0.1 else rng.choice([None, {}, {"output": "x"}, {"input": None, "messages": 1}, {"status": 3, "output": []}])


_INT, _FLOAT, _TEXT = [None, -1, 0, 400, 2**70, True], [None, -3.0, 0.0, 1e12, float("nan"), 5], [None, "", "Ünï", "length", "completed"]
FIELDS: dict[str, list[Any]] = {
    **dict.fromkeys(["status_code", "upstream_status_code", "tokens_in", "tokens_out", "tokens_reasoning", "tokens_total", "cached_tokens"], _INT),
    **dict.fromkeys(["started_at", "completed_at", "latency_total_ms", "latency_ttft_ms"], _FLOAT),
    **dict.fromkeys(["response_status", "finish_reason", "error_category", "local_response_reason", "request_raw", "response_raw", "client_session_id", "model"], _TEXT),
    "response_source": [None, "local", "upstream"], "upstream_attempted": [None, True, False], "call_index": [0, 3, -1, 2**70],  # (an int: NeMo Gym's record has one, never a bool)
}  # fmt: skip
"""A captured call's fields and values of their types (NeMo Gym's ModelCallRecord)."""


def _call(rng: random.Random, n: int) -> dict[str, Any]:
    """A captured model call (the reference's shape), then mutated."""
    response_id = _pick(rng, lambda: rng.choice([f"resp-{n}", "resp-a", None]), 0.1, [None, "", "resp-0", "resp-0", 5][: 5 if rng.random() < 0.3 else 4])
    record = ref_script.call(n, session=rng.choice([None, *NAMES, "nobody"]), response_id=response_id,
                             model_ref=_pick(rng, lambda: rng.choice([SERVER, SERVER, JUDGE, None, {**SERVER, "extra": 1}]), 0.02, [{"type": "x", "name": "y"}, "policy"]),
                             dialect=rng.choice(["responses", "chat"]), request=None, response=_payload(rng, n, "response"), started=rng.choice([100.0, 0.0, -5.0]))  # fmt: skip
    request = _payload(rng, n, "request")
    if request != "default":
        record["request"] = request
    if rng.random() < 0.3:
        record["model_call_id"] = rng.choice([None, "", f"{(n + 1) % 3:032x}", "same", "Ünï", 7][: 5 if rng.random() < 0.9 else 6])
    for key in rng.sample(sorted(FIELDS), rng.randint(0, 4)):
        if rng.random() < 0.05:
            record.pop(key)
        else:
            record[key] = _pick(rng, lambda: rng.choice(FIELDS[key]), 0.04)  # (mostly of the record's type)
    if rng.random() < 0.05:
        record["unknown_field"] = 1
    return record


def _ref(rng: random.Random, calls: list[dict[str, Any]]) -> Any:
    """A model-call reference: to a captured call (by id, by server and response id, both), or to nothing."""
    call = rng.choice(calls) if calls and rng.random() < 0.85 else ref_script.call(rng.randint(0, 9), response_id=f"resp-{rng.randint(0, 9)}")
    shape = rng.choice(["id", "id", "response", "both", "id_server"]) if rng.random() < 0.95 else "bad"
    if shape == "bad":
        return rng.choice([{"response_id": "r"}, {}, {"model_call_id": ""}, {"model_call_id": 3}, "ref", {"model_call_id": "x", "extra": 1}])
    out: dict[str, Any] = {"model_call_id": call["model_call_id"] if shape in ("id", "both", "id_server") else None}
    out["model_ref"] = call["model_ref"] if shape in ("response", "both", "id_server") else None
    out["response_id"] = call["response_id"] if shape in ("response", "both") else None
    if not out["model_call_id"] and not (out["model_ref"] and out["response_id"]) and rng.random() < 0.9:  # (no join key: refused)
        out = {"model_call_id": "nobody"}
    return {k: v for k, v in out.items() if v is not None or rng.random() < 0.5}


CONVERSATION = [{"role": "user", "content": "q"}, {"type": "function_call_output", "call_id": "tool-0", "output": "42"},
                {"type": "function_call_output", "call_id": "tool-1", "output": [{"type": "input_text", "text": "t"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a", "annotations": []}], "id": "m", "status": "completed"}]  # fmt: skip
CONVERSATION_ODD = [{"type": "function_call_output", "call_id": "tool-0", "output": [{"type": "input_text", "text": "t", "extra": 1}]},
                    {"type": "function_call_output", "call_id": "tool-1", "output": [{"foo": 1}]}, {"type": "mystery"}, {"foo": 1}, "item",
                    {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "s"}]}, {"type": "function_call", "call_id": "tool-0", "name": "f", "arguments": "{}"},
                    {"role": "user", "content": [{"type": "input_text", "text": "q", "x": 1}]}, {"role": "assistant", "content": [{"type": "output_text", "text": "a"}], "id": "m2"},
                    {"role": "user", "content": "q", "status": "completed"}, {"type": "function_call_output", "call_id": "tool-9", "output": [{"type": "input_image", "image_url": "u"}]}]  # fmt: skip


def _records(rng: random.Random, calls: list[dict[str, Any]], names: list[str], odd: float) -> list[Any]:
    """A bundle's (or trajectory's) records, in no particular order; `odd`: how often a value is refused."""
    records: list[Any] = []
    for name in names:
        records.append({"kind": "agent_invocation", "invocation_id": name, "parent_invocation_id": rng.choice([None, None, *names[: names.index(name)], "gone", *(names if rng.random() < odd else [])]),
                        "status": _pick(rng, lambda: rng.choice(["completed", "failed", "unknown"]), odd),
                        "model_calls": [_ref(rng, calls) for _ in range(rng.randint(0, 3))],
                        "conversation": rng.sample(CONVERSATION + (CONVERSATION_ODD if rng.random() < 3 * odd else []), rng.randint(0, 3))})  # fmt: skip
        if rng.random() < odd:
            records[-1][rng.choice(["duration_ms", "error_type", "spawned_by_tool_call_id"])] = rng.choice(ODD)
    for _ in range(rng.randint(0, 3)):
        started = rng.choice([None, 1.0, 5.0 if rng.random() < 3 * odd else 1.0])
        records.append({"kind": "tool_call", "invocation_id": rng.choice(names or ["root"]), "tool_call_id": rng.choice(["tool-0", "tool-1", "tool-9"]),
                        "status": _pick(rng, lambda: rng.choice(["completed", "unknown", "timeout", "failed"]), odd),
                        "started_at": started, "completed_at": rng.choice([None, 2.0, 6.0]), "sandbox_id": rng.choice([None, "sb"]),
                        "duration_ms": _pick(rng, lambda: rng.choice([None, 10.0]), odd)})  # fmt: skip
    for _ in range(rng.randint(0, 2)):
        records.append({"kind": "context_compaction", "invocation_id": rng.choice(names or ["root"]), "tokens_before": _pick(rng, lambda: 100, odd),
                        "model_calls": [_ref(rng, calls) for _ in range(rng.randint(0, 2))],
                        "before_model_call": rng.choice([None, _ref(rng, calls)]), "after_model_call": rng.choice([None, _ref(rng, calls)])})  # fmt: skip
    if rng.random() < 0.3:
        records.append({"kind": "sandbox", "role": _pick(rng, lambda: rng.choice(["agent", "verifier"]), odd, ["x"]), "wall_time_s": _pick(rng, lambda: 3.5, odd)})
    if rng.random() < odd / 2:
        records.append(rng.choice([{"kind": "other"}, None, {"invocation_id": "x"}]))
    rng.shuffle(records)
    return records


def _gaps(rng: random.Random, invalid: bool = True) -> list[Any]:
    """Gaps as a bundle, trajectory or capture block holds them (with `invalid`, some not ObservationGaps)."""
    pool = [{"code": "model_call_reference_unmatched", "invocation_id": "root", "detail": "stale"}, {"code": "model_call_ownership_unavailable", "detail": "capture:old:call_index=9"},
            {"code": "model_call_ownership_unavailable", "invocation_id": "root", "detail": "capture:x"}, {"code": "kept"}, {"code": "kept", "detail": None},
            {"code": "model_call_capture_incomplete"}, {"code": "x", "extra": 1}, {"code": 5}, "not a gap", None, {}]  # fmt: skip
    return rng.sample(pool if invalid else pool[:6], rng.randint(0, 3))


def case_for(seed: int) -> dict[str, Any]:
    """The row and `/run` answer of seed `seed` (deterministic)."""
    rng = random.Random(seed)
    row: dict[str, Any] = dict(ref_script.ROW)
    for key, values in (("task_id", ["math-7", 7, None]), ("_ng_rollout_id", ["r-7", "0-0", "bad id", 3]), ("_ng_attempt_index", [0, 1])):
        if rng.random() < 0.08:
            row[key] = rng.choice(values)
    if rng.random() < 0.03:
        del row[rng.choice(["_ng_task_index", "_ng_rollout_index"])]
    calls = [_call(rng, n) for n in range(rng.randint(0, 5))]
    if calls and rng.random() < 0.1:
        calls.append(copy.deepcopy(rng.choice(calls)))  # a duplicate
    if rng.random() < 0.3:
        rng.shuffle(calls)
    result: dict[str, Any] = {"reward": 1.0}
    if rng.random() < 0.3:
        result["resolved"] = rng.choice([True, False, None, 1])
    names = rng.sample(NAMES, rng.randint(0, 3))
    if rng.random() < 0.05 and names:
        names.append(names[0])  # a duplicate invocation id
    if rng.random() < 0.75:
        result["ng_agent_observations"] = {"source": "fuzz", "records": _records(rng, calls, names, rng.choice([0.0, 0.0, 0.02, 0.1])), "gaps": _gaps(rng, rng.random() < 0.1)}
        if rng.random() < 0.05:
            result["ng_agent_observations"] = rng.choice([{"records": []}, {"source": "s", "extra": 1}, [], "bundle"])
    if rng.random() < 0.35:
        own = [r for r in _records(rng, calls, rng.sample(NAMES, rng.randint(0, 2)), rng.choice([0.0, 0.05])) if isinstance(r, dict) and r.get("kind") == "agent_invocation"]
        task, rollout = rng.choice([("0", "0-0"), ("0", "0-0"), ("other", "0-0"), ("math-7", "r-7")])
        trajectory: dict[str, Any] = {"schema_version": "1.0", "task_id": task, "rollout_id": rollout, "invocations": own, "gaps": _gaps(rng, rng.random() < 0.1)[:1]}
        trajectory["turns"] = [{"invocation_id": rng.choice(NAMES), "task_id": task, "rollout_id": rollout, "turn_no": rng.choice([1, 2, 2, 0]),
                                "timestamp": rng.choice([5.0, 1.0]), "step_count": rng.choice([0, 1]), "model_calls": [_ref(rng, calls)][: rng.randint(0, 1)]}
                               for _ in range(rng.randint(0, 3))]  # fmt: skip
        trajectory["model_calls"] = [{"model_call_id": rng.choice([c["model_call_id"] for c in calls] + ["own", None]), "request": {"kept": True},
                                      "response_metadata": {"model": "own", "finish_reason": rng.choice([None, "length"])},
                                      "token_stats": {"prompt_tokens": _pick(rng, lambda: 99, 0.1)}} for _ in range(rng.randint(0, 2))]  # fmt: skip
        trajectory["tool_calls"] = [{"kind": "tool_call", "invocation_id": "root", "tool_call_id": rng.choice(["tool-0", "tool-9"]), "status": "failed", "output": "old"}][: rng.randint(0, 1)]
        result["ng_trajectory"] = trajectory if rng.random() < 0.9 else rng.choice([[], "trajectory", {"task_id": "0"}, {**trajectory, "schema_version": "2.0"}])
    if rng.random() < 0.8:
        block: dict[str, Any] = {"rollout_id": "0-0", "metrics": {"num_calls": len(calls)}, "calls": calls}
        if rng.random() < 0.3:
            block["gaps"] = _gaps(rng)
        if rng.random() < 0.05:
            block["calls"] = rng.choice([None, "calls", [None, 3]])
        result["ng_model_call_capture"] = block
    return json.loads(json.dumps({"name": f"fuzz_{seed}", "row": row, "result": result}))


CALLS_VALID = r'''
for case in cases:  # does NeMo Gym's join take this case's calls (every one a ModelCallRecord)?
    capture = case["result"].get("ng_model_call_capture")
    try:
        [ModelCallRecord.model_validate(c) for c in (capture.get("calls") or [] if isinstance(capture, dict) else [])]
        case["calls_valid"] = True
    except Exception:
        case["calls_valid"] = False
json.dump(cases, open(sys.argv[2], "w"))
'''


def outside_join(case: dict[str, Any]) -> bool:
    """A bundle to join to calls that are not all ModelCallRecords: NeMo Gym's join takes only
    those (its collection drops an unreadable record when it reads the capture store, as
    `model_call_capture_records_unreadable`; the reference's runner fails the join instead), and
    ours joins the dicts it is given; not compared."""
    result = case["result"]
    return result.get("ng_agent_observations") is not None and result.get("ng_model_call_capture") is not None and not case["calls_valid"]


def ours(case: dict[str, Any]) -> Any:
    """Our answer after the join and the projection (as tests/nemo_gym/test_observability.py runs them)."""
    result = copy.deepcopy(case["result"])
    try:
        block = result.pop("ng_model_call_capture", None)
        if block is not None:
            merge_model_call_capture(result, block)
        attach_trajectory_record(case["row"], result)
    except Exception as exc:  # noqa: BLE001 - compared with NeMo Gym's
        return {"raised": type(exc).__name__}
    return json.loads(json.dumps(result))


def _ordered(answer: Any) -> str:
    """The answer as JSON, key order within each value kept (the rows file shows it), the
    top-level keys sorted (the harness puts the capture block back last: collect adds it)."""
    return json.dumps(dict(sorted(answer.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:500", help="FIRST:STOP (default 0:500)")
    parser.add_argument("--nemo-python", required=True, help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--keep", type=Path, help="write each differing case with both answers here")
    args = parser.parse_args(argv)
    first, stop = (int(x) for x in args.seeds.split(":"))
    cases = [case_for(seed) for seed in range(first, stop)]
    with tempfile.TemporaryDirectory(prefix="fuzz-observability-") as tmp:
        given, done, runner = Path(tmp) / "cases.json", Path(tmp) / "done.json", Path(tmp) / "run.py"
        given.write_text(json.dumps(cases))
        runner.write_text(ref_script.NEMO + CALLS_VALID)
        subprocess.run([args.nemo_python, str(runner), str(given), str(done)], check=True, capture_output=True)
        answered = json.loads(done.read_text())
    same = differing = outside = 0
    raised: Counter[str] = Counter()
    for case in answered:
        if outside_join(case):
            outside += 1
            continue
        theirs, mine = case["nemo"], ours(case)
        if "raised" in theirs:
            raised[theirs["raised"]] += 1
        if _ordered(theirs) == _ordered(mine):
            same += 1
            continue
        differing += 1
        found = differences(theirs, mine, case["name"]) or [f"{case['name']}: the same values, keys in another order"]
        print("\n".join(found[:5]))
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / f"{case['name']}.json").write_text(json.dumps({**case, "ours": mine}, indent=1) + "\n")
    for kind, count in raised.most_common():
        print(f"NeMo Gym raised {kind} on {count} cases")
    print(f"{len(answered)} cases: {same} the same as NeMo Gym's, {differing} differing, "
          f"{outside} with calls NeMo Gym's join does not take (not compared)")  # fmt: skip
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
