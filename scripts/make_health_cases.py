"""Rollout files for the rollout health checks (issue 40): tests/data/health/<case>.jsonl, which
scripts/make_nemo_health_reference.py runs NeMo Gym 0.7.0's own checks over.

    .venv/bin/python scripts/make_health_cases.py [--shapes]

The base rows are real: multi-turn episodes of the counter environment whose verify says
`resolved` (scripts/make_atif_cases.py's), collected with `--trajectory` against the scripted
policy over the Responses API, 3 tasks x 2 repeats. Cases:

- clean.jsonl: the base rows as collected;
- no_trajectory.jsonl: the same without `ng_trajectory` (what a run without recording writes);
- faults.jsonl: one row per fault, each its own task (10 on), each changed one way a rollout can
  go wrong (a failed last model call, a hollow turn, zero or missing token counts, usage that
  disagrees with the calls, a generation cut at length with nothing kept, no turns, a reference to no captured
  call, a trajectory that is not one); a task whose two repeats both failed; a task none of
  whose calls succeeded; an unreadable line; a row twice;
- shapes.jsonl: one row per way a trajectory can be written that NeMo Gym reads only once it has
  validated and dumped it (a status or token counts as numeric strings, a model_ref with a key
  ModelServerRef does not name, a payload nested deeper than the dump allows and one level
  less), and per way its references, gaps, call order and cut generations decide a verdict
  (`shapes`; `--shapes` rebuilds this file alone from the committed clean.jsonl's rows).
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from make_atif_cases import ResolvedCounter, reasoned  # noqa: E402

sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "collector")]
from test_collect_episodes import write_rows  # noqa: E402

from gym_metrics import ResourcesClient  # noqa: E402
from gym_metrics.collector import CollectOptions, collect_async  # noqa: E402
from gym_metrics.targets import ModelTargetConfig  # noqa: E402
from gym_metrics.testing import ScriptedPolicyServer, serve_environment  # noqa: E402

OUT = ROOT / "tests" / "data" / "health"
Row = dict[str, Any]


def counted(prompt: str) -> list[Any]:
    """make_atif_cases' script, each tool-call turn reporting the tokens a model spends on its
    calls (the scripted policy counts the words of an answer's text: 0 for calls alone, which
    NeMo Gym's model_call_zero_completion_tokens rightly flags)."""
    steps = reasoned(prompt)
    for step in steps:
        if step.tool_calls and not step.text and step.output_tokens is None:
            step.output_tokens = 9 * len(step.tool_calls)
    return steps


async def base_rows() -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp, ScriptedPolicyServer(counted) as policy:
        rows = write_rows(Path(tmp) / "rows.jsonl", tasks=3, repeats=2)
        options = CollectOptions(target=ModelTargetConfig(url=policy.url, model="scripted", api="responses"), trajectory=True)
        async with serve_environment(ResolvedCounter()) as server, ResourcesClient(server.address) as client:
            await collect_async(client, rows, Path(tmp) / "out.jsonl", options)
        collected = [json.loads(line) for line in (Path(tmp) / "out.jsonl").read_text().splitlines()]
    return sorted(collected, key=lambda r: (r["_ng_task_index"], r["_ng_rollout_index"]))


def calls(row: Row) -> list[dict[str, Any]]:
    return row["ng_trajectory"]["model_calls"]


def failed_last_call(row: Row) -> Row:
    metadata = calls(row)[-1]["response_metadata"]
    metadata.update(status_code=500, error_category="upstream_error", response_status=None)
    return row


def all_calls_failed(row: Row) -> Row:
    for call in calls(row):
        call["response_metadata"].update(status_code=503, error_category="upstream_error")
    return row


def hollow_turn(row: Row) -> Row:
    turn = row["ng_trajectory"]["turns"][1]
    turn.update(answer=[], reasoning_content=None)
    return row


def no_turns(row: Row) -> Row:
    row["ng_trajectory"]["turns"] = []
    row["ng_trajectory"]["invocations"][0]["model_calls"] = []
    return row


def set_call(index: int, **changes: Any) -> Callable[[Row], Row]:
    def change(row: Row) -> Row:
        call = calls(row)[index]
        for key, value in changes.items():
            if key == "token_stats":
                call["token_stats"] = value
            elif key in ("finish_reason", "status_code"):
                call["response_metadata"][key] = value
            else:
                call[key] = value
        return row

    return change


def cut_at_length(row: Row) -> Row:
    call = calls(row)[0]
    call["response_metadata"]["finish_reason"] = "length"
    call["response"] = {**call["response"], "output": []}
    return row


def more_usage(row: Row) -> Row:
    row["response"]["usage"]["output_tokens"] += 100
    return row


def not_a_trajectory(row: Row) -> Row:
    row["ng_trajectory"] = {"schema_version": "1.0", "turns": "none"}
    return row


FAULTS: dict[str, Callable[[Row], Row]] = {
    "a failed last model call": failed_last_call,
    "a hollow turn": hollow_turn,
    "zero completion tokens": set_call(0, token_stats={"prompt_tokens": 12, "completion_tokens": 0, "total_tokens": 12}),
    "no token counts": set_call(1, token_stats={}),
    "usage above the calls": more_usage,
    "a generation cut at length, nothing kept": cut_at_length,
    "no turns": no_turns,
    "a reference to no captured call": set_call(0, model_call_id="not-referenced"),
    "not a trajectory": not_a_trajectory,
}


POLICY = {"type": "responses_api_models", "name": "policy"}


def every_reference(row: Row) -> list[dict[str, Any]]:
    trajectory = row["ng_trajectory"]
    return [ref for item in (*trajectory["turns"], *trajectory["invocations"]) for ref in item["model_calls"]]


def as_text(*fields: str) -> Callable[[Row], Row]:
    """Write the given response_metadata / token_stats numbers of every call as numeric strings."""

    def change(row: Row) -> Row:
        for c in calls(row):
            for part in ("response_metadata", "token_stats"):
                c[part].update({k: str(v) for k, v in c[part].items() if k in fields})
        return row

    return change


def policy_ref_with(**extra: Any) -> Callable[[Row], Row]:
    """Each call answers for the policy model; each reference names it with other keys too."""

    def change(row: Row) -> Row:
        for c in calls(row):
            c["response_metadata"]["model_ref"] = dict(POLICY)
        for ref in every_reference(row):
            ref["model_ref"] = {**POLICY, **extra}
        return row

    return change


def by_response(shared: bool) -> Callable[[Row], Row]:
    """References name (model_ref, response_id) and no call id; each call its own response id
    unless `shared` (then all four answer the one response)."""

    def change(row: Row) -> Row:
        ids = {c["model_call_id"]: "resp-policy" if shared else f"resp-{n}" for n, c in enumerate(calls(row))}
        for c in calls(row):
            c["response_metadata"].update(model_ref=dict(POLICY), response_id=ids[c["model_call_id"]])
        for ref in every_reference(row):
            ref.update(model_call_id=None, model_ref={**POLICY, "region": "eu"}, response_id=ids[ref["model_call_id"]])
        return row

    return change


def nested_answer(levels: int) -> Callable[[Row], Row]:
    def change(row: Row) -> Row:
        value: Any = "deep"
        for _ in range(levels):
            value = [value]
        row["ng_trajectory"]["turns"][1]["answer"] = value
        return row

    return change


def gap(code: str, **fields: Any) -> Callable[[Row], Row]:
    def change(row: Row) -> Row:
        row["ng_trajectory"]["gaps"].append({"code": code, **fields})
        return row

    return change


def cut_last_call(response: Any) -> Callable[[Row], Row]:
    def change(row: Row) -> Row:
        calls(row)[-1]["response_metadata"]["finish_reason"] = "length"
        calls(row)[-1]["response"] = response
        return row

    return change


def start_times_dropped(which: slice, failed: int) -> Callable[[Row], Row]:
    def change(row: Row) -> Row:
        for c in calls(row)[which]:
            c["started_at"] = None
        calls(row)[failed]["response_metadata"]["status_code"] = 500
        return row

    return change


def anonymous_calls(row: Row) -> Row:
    for c in calls(row):
        c["model_call_id"] = None
        c["response_metadata"]["response_id"] = None
    return row


def then(*changes: Callable[[Row], Row]) -> Callable[[Row], Row]:
    def change(row: Row) -> Row:
        for one in changes:
            row = one(row)
        return row

    return change


SHAPES: dict[str, Callable[[Row], Row]] = {
    "the last call's status 500 as a numeric string": set_call(-1, status_code="500"),
    "the first call's status 503 as a numeric string, the rest 200 as strings": then(as_text("status_code"), set_call(0, status_code="503")),
    "every status 200 as a numeric string": as_text("status_code"),
    "token counts as numeric strings": as_text("prompt_tokens", "completion_tokens", "total_tokens"),
    "token counts as numeric strings, a zero among them": then(as_text("prompt_tokens", "completion_tokens"),
                                                               set_call(0, token_stats={"prompt_tokens": "8", "completion_tokens": "0"})),
    "references by call id, their model_ref with another key": policy_ref_with(region="eu"),
    "references by response id, their model_ref with another key": by_response(shared=False),
    "references by response id, four calls answering each": by_response(shared=True),
    "a payload nested 255 levels": nested_answer(255),
    "a payload nested 254 levels": nested_answer(254),
    "a contradiction gap": gap("model_call_reference_conflict", invocation_id="root", detail="call:elsewhere"),
    "cut at length, the response a string": cut_last_call("cut short"),
    "cut at length, output_text kept": cut_last_call({"output_text": "Done."}),
    "cut at length, a choice's message a string": cut_last_call({"choices": [{"message": "Done."}]}),
    "cut at length, no response captured": cut_last_call(None),
    "no start times, the first call failed": start_times_dropped(slice(None), 0),
    "one start time missing, the last call failed": start_times_dropped(slice(0, 1), -1),
    "turns unavailable": gap("turns_unavailable"),
    "turn scope incomplete, usage above the calls": then(gap("turn_model_call_scope_incomplete"), more_usage),
    "calls with neither id": anonymous_calls,
}  # fmt: skip


def shapes(base: list[Row]) -> list[Row]:
    """One row per SHAPES entry, each the first base row changed that one way, its own task."""
    rows = []
    for task, (name, change) in enumerate(SHAPES.items()):
        row = change(copy.deepcopy(base[0]))
        rows.append({**row, "_ng_task_index": task, "_ng_rollout_index": 0, "gm_case": name})
    return rows


def lines(rows: Iterable[Row]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


async def main() -> int:
    if sys.argv[1:] == ["--shapes"]:
        committed = [json.loads(line) for line in (OUT / "clean.jsonl").read_text().splitlines()]
        (OUT / "shapes.jsonl").write_text(lines(shapes(committed)))
        print(f"wrote {OUT}/shapes.jsonl ({len(SHAPES)} lines)")
        return 0
    base = await base_rows()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "shapes.jsonl").write_text(lines(shapes(base)))
    (OUT / "clean.jsonl").write_text(lines(base))
    (OUT / "no_trajectory.jsonl").write_text(lines({k: v for k, v in r.items() if k != "ng_trajectory"} for r in base))
    faults = []
    for task, (name, change) in enumerate(FAULTS.items(), start=10):
        row = change(copy.deepcopy(base[0]))
        row.update(_ng_task_index=task, _ng_rollout_index=0, gm_case=name)
        faults.append(row)
    for repeat in (0, 1):  # a task whose repeats both failed
        faults.append({**failed_last_call(copy.deepcopy(base[repeat])), "_ng_task_index": 30, "gm_case": "both repeats failed"})
    for repeat in (0, 1):  # a task none of whose calls succeeded
        faults.append({**all_calls_failed(copy.deepcopy(base[repeat])), "_ng_task_index": 31, "gm_case": "no call succeeded"})
    text = lines(faults) + "{not json\n" + json.dumps({**base[2], "gm_case": "a row twice"}) + "\n" + lines(base[2:4])
    (OUT / "faults.jsonl").write_text(text)
    print(f"wrote {OUT}/clean.jsonl, no_trajectory.jsonl, shapes.jsonl, faults.jsonl ({len(faults) + 4} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
