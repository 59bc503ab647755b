"""How scripts/make_nemo_env_reference.py turns an environment's example data into the rows of
its conformance reference (the rules are ROWS_DOC). Runs in the nemo-gym venv (imports nemo_gym)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

BUDGET = 150_000
"""Bytes of rollouts.jsonl + verify.jsonl an environment may take (tasks are dropped beyond it)."""

ROWS_DOC = """\
1. A rollout of data/example_rollouts.jsonl is paired with the task of data/example.jsonl that has
   the same prompt (the last user message's text); the verify request is that task row (without
   agent_ref and _ng_ keys) plus the rollout's `response`: what NeMo Gym's collection sends for the
   task after the policy answered. A rollout with no such task keeps its own fields minus those
   its verify response adds (reward and the response model's fields the request model lacks) and
   minus agent_ref / _ng_ keys; if the request model then still misses a required field the
   environment is dropped (its example rollouts cannot be re-verified).
2. responses_create_params: a top-level key whose null value the request model rejects
   (NeMoGymResponseCreateParamsNonStreaming: parallel_tool_calls, tool_choice) is removed, so the
   field takes its default as when the dataset row omits it. Nothing else is changed.
3. Extra rollouts per task (example data has 5 rows, one per task), deterministic, task-major
   (each task's rollouts adjacent, as NeMo Gym's collection orders repeats): rollout 0 the
   recorded response; rollout 1 the recorded response of the next task (cyclic), a well-formed
   but usually wrong answer; rollout 2 the recorded response with every output_text part's text
   set to "" and every function_call's arguments set to "{}" (a no-answer).
4. When the rows exceed the size budget, tasks are dropped, largest first (at least 2 kept).
5. agent_ref is {"name": <the config's agent instance whose resources_server is this server>}."""



def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]



def prompt(row: dict[str, Any]) -> str:
    """The last user message's text: how a rollout finds its task."""
    items = row["responses_create_params"]["input"]
    if isinstance(items, str):
        return items
    texts: list[str] = []
    for item in items:
        if item.get("role") == "user":
            content = item.get("content")
            texts = [content] if isinstance(content, str) else [c.get("text", "") for c in content if isinstance(c, dict)]
    return "\n".join(texts)


_OWN_KEYS = ("agent_ref", "_ng_task_index", "_ng_rollout_index", "reward")


def sanitise_params(params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Rule 2: drop top-level null values the request-params model rejects."""
    from pydantic import ValidationError

    from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming as Params

    dropped = []
    for key in [k for k, v in params.items() if v is None]:
        try:
            Params.model_validate({"input": "x", key: None})
        except ValidationError:
            dropped.append(key)
    return {k: v for k, v in params.items() if k not in dropped}, dropped


def task_rows(env: Any, data: Path) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], set[str]]:
    """Rule 1: (task, recorded response) pairs, and the rules applied."""
    by_prompt = {prompt(t): t for t in read_jsonl(data / "example.jsonl")}
    output_only = env.response_only_fields()
    pairs, applied = [], set()
    for rollout in read_jsonl(data / "example_rollouts.jsonl"):
        task = by_prompt.get(prompt(rollout))
        if task is None:
            applied.add("rollout without a task in example.jsonl: its own fields minus verify outputs")
            task = {k: v for k, v in rollout.items() if k not in output_only and k != "response"}
        else:
            applied.add("task from example.jsonl (same prompt) + the rollout's response")
        task = {k: v for k, v in task.items() if k not in _OWN_KEYS}
        task["responses_create_params"], dropped = sanitise_params(task["responses_create_params"])
        applied.update(f"responses_create_params.{k}: null removed" for k in dropped)
        pairs.append((task, rollout["response"]))
    return pairs, applied


def blank(response: dict[str, Any]) -> dict[str, Any]:
    """Rule 3's no-answer: output_text texts "" and function_call arguments "{}"."""
    out = copy.deepcopy(response)
    for item in out.get("output") or []:
        if item.get("type") == "function_call":
            item["arguments"] = "{}"
        for part in item.get("content") or [] if item.get("type") == "message" else []:
            if part.get("type") == "output_text":
                part["text"] = ""
    return out


def build_rows(env: Any, data: Path) -> tuple[list[dict[str, Any]], set[str]]:
    """Rules 3-5: the rows of rollouts.jsonl, with their task and rollout indices."""
    pairs, applied = task_rows(env, data)
    tasks: dict[str, int] = {}
    for task, _ in pairs:
        tasks.setdefault(json.dumps(task, sort_keys=True), len(tasks))
    pairs = sorted(pairs, key=lambda p: tasks[json.dumps(p[0], sort_keys=True)])
    n = len(pairs)
    rows, next_rollout = [], {}
    for i, (task, response) in enumerate(pairs):
        t = tasks[json.dumps(task, sort_keys=True)]
        for answer in (response, pairs[(i + 1) % n][1], blank(response)):
            r = next_rollout[t] = next_rollout.get(t, -1) + 1
            rows.append({**task, "response": answer, "agent_ref": {"name": env.agent},
                         "_ng_task_index": t, "_ng_rollout_index": r})  # fmt: skip
    applied.add("3 rollouts per task: recorded, next task's response, blanked")
    while len({r["_ng_task_index"] for r in rows}) > 2 and size(rows) > BUDGET:
        largest = max({r["_ng_task_index"] for r in rows}, key=lambda t: size([r for r in rows if r["_ng_task_index"] == t]))
        rows = [r for r in rows if r["_ng_task_index"] != largest]
        applied.add("tasks dropped for size (largest first)")
    return renumber(rows), applied


def renumber(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Task indices dense again after a drop, in order of first appearance (as the collection counts)."""
    order: dict[int, int] = {}
    return [r | {"_ng_task_index": order.setdefault(r["_ng_task_index"], len(order))} for r in rows]


def size(rows: list[dict[str, Any]]) -> int:
    """Bytes of rollouts.jsonl plus (roughly) verify.jsonl, which stores no echoed keys."""
    return sum(len(json.dumps(r, ensure_ascii=False)) + 600 for r in rows)


def request_of(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ("agent_ref", "_ng_task_index", "_ng_rollout_index")}
