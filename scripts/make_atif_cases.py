"""The rows tests/recording/test_atif_export.py converts to ATIF, written to
tests/data/atif/cases.jsonl ({"case", "row"} per line); scripts/make_nemo_atif_reference.py then
records what NeMo Gym 0.7.0's own converter makes of each.

    .venv/bin/python scripts/make_atif_cases.py          # collect the base rows anew, write every case
    .venv/bin/python scripts/make_atif_cases.py --add    # keep the recorded rows, add the cases not yet in the file

The base rows are real: multi-turn episodes of a counter environment (tests/_tool_envs.py, whose
verify here also says `resolved`) collected with `--trajectory` against the scripted policy, over
the Responses API and over chat (there also with token IDs). Each other case is a base row
changed in one way a rollout can differ: most of them something the strict profile refuses (a
gap, a developer message, a failed tool, a cut-short answer, ...), some it accepts (a system
message, multipart text, NeMo Gym's own join of turns to calls by response id, a surplus call).
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "collector")]
from _tool_envs import Counter, CounterRequest, CounterResponse  # noqa: E402
from test_collect_episodes import script, write_rows  # noqa: E402

from gym_metrics import ResourcesClient, Session  # noqa: E402
from gym_metrics.collector import CollectOptions, collect_async  # noqa: E402
from gym_metrics.targets import ModelTargetConfig  # noqa: E402
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment  # noqa: E402

OUT = ROOT / "tests" / "data" / "atif" / "cases.jsonl"
Row = dict[str, Any]


class ResolvedCounter(Counter):
    """The counter, whose verify also says whether the task was resolved (so no gap)."""

    async def verify(self, body: CounterRequest, session: Session | None = None) -> CounterResponse:  # type: ignore[override]
        answer = await super().verify(body, session)
        return CounterResponse(**answer.model_dump(), resolved=answer.reward == 1.0)


def reasoned(prompt: str) -> list[Any]:
    """The test script, thinking before its first call."""
    steps = script(prompt)
    first = steps[0]
    steps[0] = PolicyAnswer(tool_calls=first.tool_calls, reasoning="Add the first number.")
    return steps


async def base_rows(env: Counter, api: str, tokens: bool = False) -> Row:
    with tempfile.TemporaryDirectory() as tmp, ScriptedPolicyServer(reasoned) as policy:
        rows = write_rows(Path(tmp) / "rows.jsonl", tasks=2, repeats=1)
        target = ModelTargetConfig(url=policy.url, model="scripted", api=api)
        options = CollectOptions(target=target, trajectory=True, capture_tokens=tokens)
        async with serve_environment(env) as server, ResourcesClient(server.address) as client:
            await collect_async(client, rows, Path(tmp) / "out.jsonl", options)
        collected = [json.loads(line) for line in (Path(tmp) / "out.jsonl").read_text().splitlines()]
    row = next(r for r in collected if r["_ng_task_index"] == 1)  # task 1: two calls in one turn
    return {k: v for k, v in row.items() if k not in ("ng_model_call_capture", "response")}  # not read by the export


def on_every_copy(row: Row, change: Callable[[list[Any]], None]) -> Row:
    """`change` applied to the conversation and to every turn's question (they must agree)."""
    t = row["ng_trajectory"]
    change(t["invocations"][0]["conversation"])
    for turn in t["turns"]:
        change(turn["question"])
    return row


def first_call(row: Row) -> dict[str, Any]:
    return row["ng_trajectory"]["model_calls"][0]


def set_path(row: Row, path: list[Any], value: Any) -> Row:
    target = row
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return row


def on_every_item(row: Row, change: Callable[[dict[str, Any]], None]) -> Row:
    """`change` applied to each item of the conversation and of every turn's copies."""
    t = row["ng_trajectory"]
    for items in [t["invocations"][0]["conversation"], *(turn.get(k) or [] for turn in t["turns"] for k in ("question", "answer", "reasoning_content"))]:
        for item in items:
            change(item)
    return row


def roleless_answer(item: dict[str, Any]) -> None:
    if item.get("role") == "assistant":
        item.pop("role")
        item["note"] = "kept by no model"


def by_response_id(row: Row) -> Row:
    """Turns joined to calls as NeMo Gym's simple_agent joins them: model server and response id."""
    ref = {"type": "responses_api_models", "name": "policy"}
    t = row["ng_trajectory"]
    for n, call_ in enumerate(t["model_calls"]):
        call_["response_metadata"].update(model_ref=ref, response_id=f"resp_{n}")
    refs = [{"model_call_id": None, "model_ref": ref, "response_id": f"resp_{n}"} for n in range(len(t["model_calls"]))]
    for turn, r in zip(t["turns"], refs):
        turn["model_calls"] = [r]
    t["invocations"][0]["model_calls"] = refs
    return row


def two_summaries(row: Row) -> Row:
    for item in [*row["ng_trajectory"]["invocations"][0]["conversation"], *sum((t["question"] for t in row["ng_trajectory"]["turns"]), [])]:
        if item.get("type") == "reasoning":
            item["summary"] = [*item["summary"], {"type": "summary_text", "text": "Then the second."}]
    for turn in row["ng_trajectory"]["turns"]:
        for item in turn["reasoning_content"] or []:
            item["summary"] = [*item["summary"], {"type": "summary_text", "text": "Then the second."}]
    return row


def arguments_not_json(row: Row) -> Row:
    for item in [*row["ng_trajectory"]["invocations"][0]["conversation"], *sum((t["question"] + t["answer"] for t in row["ng_trajectory"]["turns"]), [])]:
        if item.get("type") == "function_call":
            item["arguments"] = "{count: 1"
            break
    return row


def surplus_call(row: Row) -> Row:
    extra = copy.deepcopy(first_call(row))
    extra["model_call_id"] = "retried-attempt"
    row["ng_trajectory"]["model_calls"].insert(0, extra)
    return row


CHANGES: dict[str, Callable[[Row], Row]] = {
    "a system message first": lambda r: on_every_copy(r, lambda items: items.insert(0, {"role": "system", "content": "Count.", "type": "message"})),
    "a developer message first": lambda r: on_every_copy(r, lambda items: items.insert(0, {"role": "developer", "content": "Count.", "type": "message"})),
    "user text as parts": lambda r: on_every_copy(r, lambda items: items[0].update(content=[{"type": "input_text", "text": items[0]["content"]}])),
    "a message without its type": lambda r: on_every_copy(r, lambda items: items[0].pop("type")),
    "turns joined by response id": by_response_id,
    "a surplus model call": surplus_call,
    "integer timestamps": lambda r: [t.update(timestamp=1_800_000_000 + t["turn_no"]) for t in r["ng_trajectory"]["turns"]] and r,
    "a later user message": lambda r: r["ng_trajectory"]["invocations"][0]["conversation"].insert(6, {"role": "user", "content": "More?", "type": "message"}) or r,
    "a failed tool call": lambda r: r["ng_trajectory"]["tool_calls"][0].update(status="failed", error_type="tool_error") or r,
    "a tool output unlike the record": lambda r: r["ng_trajectory"]["tool_calls"][0].update(output="something else") or r,
    "an unreferenced tool record": lambda r: r["ng_trajectory"]["tool_calls"].append({**r["ng_trajectory"]["tool_calls"][0], "tool_call_id": "call_orphan"}) or r,
    "an answer cut at length": lambda r: set_path(r, ["ng_trajectory", "model_calls", 0, "response_metadata", "finish_reason"], "length"),
    "a content filter": lambda r: set_path(r, ["ng_trajectory", "model_calls", 0, "response_metadata", "finish_reason"], "content_filter"),
    "a stop finish with tool calls": lambda r: set_path(r, ["ng_trajectory", "model_calls", 0, "response_metadata", "finish_reason"], "stop"),
    "a 500 status": lambda r: set_path(r, ["ng_trajectory", "model_calls", 0, "response_metadata", "status_code"], 500),
    "an error category": lambda r: set_path(r, ["ng_trajectory", "model_calls", 0, "response_metadata", "error_category"], "server_error"),
    "cached above prompt": lambda r: set_path(r, ["ng_trajectory", "model_calls", 0, "token_stats", "cached_tokens"], 10**6),
    "two reasoning summaries": two_summaries,
    "encrypted reasoning": lambda r: on_every_copy(r, lambda items: [i.update(encrypted_content="xyz") for i in items if i.get("type") == "reasoning"]),
    "arguments not JSON": arguments_not_json,
    "an unknown item field": lambda r: on_every_copy(r, lambda items: items[0].update(foo=1)),
    "a message phase": lambda r: on_every_copy(r, lambda items: items[0].update(phase="final")),
    "a turn missing": lambda r: r["ng_trajectory"]["turns"].pop() and r,
    "a wrong step count": lambda r: set_path(r, ["ng_trajectory", "turns", 0, "step_count"], 7),
    "an unknown model call": lambda r: set_path(r, ["ng_trajectory", "turns", 0, "model_calls", 0, "model_call_id"], "nope"),
    "an incomplete invocation": lambda r: set_path(r, ["ng_trajectory", "invocations", 0, "status"], "incomplete"),
    "a blank task id": lambda r: [t.update(task_id=" ") for t in [r["ng_trajectory"], *r["ng_trajectory"]["turns"]]] and r,
    "a turn of another task": lambda r: set_path(r, ["ng_trajectory", "turns", 1, "task_id"], "other"),
    "no task index": lambda r: r.pop("_ng_task_index") and r,
    "an agent_ref of another type": lambda r: set_path(r, ["agent_ref", "type"], "resources_servers"),
    "no trajectory": lambda r: r.pop("ng_trajectory") and r,
    # found by scripts/fuzz_nemo_atif.py:
    "an answer without role, with a field more": lambda r: on_every_item(r, roleless_answer),  # NeMo Gym: an answer, the field left out
    "an empty agent_ref beside the environment stamp": lambda r: r.update(agent_ref="", _ng_environment_server="env") or r,
    "a request holding an integer past 64 bits": lambda r: first_call(r)["request"].update(seed=2**70) or r,
    "user text as parts with a status no item has": lambda r: on_every_copy(r, lambda items: items[0].update(
        content=[{"type": "input_text", "text": items[0]["content"]}], status="failed")),  # NeMo Gym: a message without status
    "that status in the conversation only": lambda r: on_every_copy(r, lambda items: items[0].update(content=[{"type": "input_text", "text": items[0]["content"]}]))
    and r["ng_trajectory"]["invocations"][0]["conversation"][0].update(status="failed") or r,
}


def add_new() -> int:
    """The cases of CHANGES not yet in the file, made from its recorded responses row, appended
    (the recorded rows, their timestamps and ids, stay as they are)."""
    lines = OUT.read_text().splitlines()
    recorded = {json.loads(line)["case"]: json.loads(line)["row"] for line in lines}
    new = [(name, change(copy.deepcopy(recorded["collected over responses"]))) for name, change in CHANGES.items() if name not in recorded]
    OUT.write_text("".join(line + "\n" for line in lines) + "".join(json.dumps({"case": name, "row": row}) + "\n" for name, row in new))
    print(f"added {len(new)} cases to {OUT}")
    return 0


async def main() -> int:
    if "--add" in sys.argv[1:]:
        return add_new()
    responses = await base_rows(ResolvedCounter(), "responses")
    cases = [("collected over responses", responses), ("collected over chat", await base_rows(ResolvedCounter(), "chat")),
             ("collected over chat with token ids", await base_rows(ResolvedCounter(), "chat", tokens=True)),
             ("collected without resolved (a gap)", await base_rows(Counter(), "responses"))]  # fmt: skip
    cases += [(name, change(copy.deepcopy(responses))) for name, change in CHANGES.items()]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("".join(json.dumps({"case": name, "row": row}) + "\n" for name, row in cases))
    print(f"wrote {len(cases)} cases to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
