"""Rollout files for the rollout health checks (issue 40): tests/data/health/<case>.jsonl, which
scripts/make_nemo_health_reference.py runs NeMo Gym 0.7.0's own checks over.

    .venv/bin/python scripts/make_health_cases.py

The base rows are real: multi-turn episodes of the counter environment whose verify says
`resolved` (scripts/make_atif_cases.py's), collected with `--trajectory` against the scripted
policy over the Responses API, 3 tasks x 2 repeats. Cases:

- clean.jsonl: the base rows as collected;
- no_trajectory.jsonl: the same without `ng_trajectory` (what a run without recording writes);
- faults.jsonl: one row per fault, each its own task (10 on), each changed one way a rollout can
  go wrong (a failed last model call, a hollow turn, zero or missing token counts, usage that
  disagrees with the calls, a generation cut at length with nothing kept, no turns, a reference to no captured
  call, a trajectory that is not one); a task whose two repeats both failed; a task none of
  whose calls succeeded; an unreadable line; a row twice.
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


async def main() -> int:
    base = await base_rows()
    OUT.mkdir(parents=True, exist_ok=True)
    lines = lambda rows: "".join(json.dumps(r) + "\n" for r in rows)  # noqa: E731
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
    print(f"wrote {OUT}/clean.jsonl, no_trajectory.jsonl, faults.jsonl ({len(faults) + 4} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
