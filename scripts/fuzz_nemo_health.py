"""Differential test of `gym-metrics health` against NeMo Gym 0.7.0's rollout health checks
(`run_health_checks`, what `gym eval health-check` runs) on random rollouts files: each seed makes
one run (one or two files) mixing rows with and without `ng_trajectory` (model calls with
statuses, token counts, finish reasons, errors and model_refs of odd types; references by call
id, by response id, to no call or to several; turns hollow or not; tool calls, gaps, timings),
rewards of every type, failure rows, duplicates, masked rows, several agents, tasks and repeats,
string / float / bool indices, unreadable and blank lines, odd values dropped anywhere in a
trajectory, conversation items of many kinds (some changed: NeMo Gym validates each as its typed
Responses-API input item), and sometimes ignored checks. NeMo Gym's reports
(scripts/make_nemo_health_reference.py's `nemo_reports`, workers=1, in a nemo-gym venv, one process for the batch) and ours (`check_health`)
are compared byte for byte: quality_summary.json, rollout_verdicts.jsonl and the report line.
A run NeMo Gym refuses (raises on) must be refused here too; such runs are counted apart.

    .venv/bin/python scripts/fuzz_nemo_health.py --seeds 0:500 --nemo-python /tmp/ngvenv/bin/python \
        [--ranges]     # ours in worker processes, each file cut into byte ranges
        [--keep DIR]   # DIR/<seed>/ gets each differing run's files and both sides' reports

Exit 0 when every run gives the same reports (or both refuse it, or NeMo Gym fails on a token sum
past 64 bits, which ours writes: tests/health/test_health_big_counts.py); 1 when one differs.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OVERFLOW = "Integer exceeds 64-bit range"
"""NeMo Gym's run fails writing a sum of token counts past 2**64; ours writes it (such runs are counted apart)."""
REPORTS = ("quality_summary.json", "rollout_verdicts.jsonl", "report.txt")
CHECKS = ("check_execution_error", "record_unreadable", "rollout_duplicate_identity", "rollout_missing_agent_turns",
          "rollout_ended_on_failed_model_call", "agent_turn_hollow", "model_call_zero_completion_tokens", "model_call_missing_token_counts",
          "trajectory_capture_mismatch", "model_call_failed", "rollout_token_count_mismatch", "model_call_runaway_generation",
          "task_consistently_unhealthy", "task_no_successful_model_calls")  # fmt: skip
POLICY, JUDGE = {"type": "responses_api_models", "name": "policy"}, {"type": "responses_api_models", "name": "judge"}
ODD: list[Any] = [None, "", " ", "x", "5", "-3", "1.5", -1, 0, 7, 2.5, 7.0, 1e300, True, False, [], {}, [1], {"a": 1}, 2**63, 2**64 + 1, "ünï"]
TEXT = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}
TOOL = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
ANSWERS: list[Any] = [[TEXT], [TOOL], [TEXT, TOOL], [], None, "hi", "  ", [{"foo": "bar"}], [{"tool_calls": [1]}], [{"content": [" "]}]]
RESPONSES: list[Any] = [{"output": [TEXT]}, {"output": []}, None, "cut", {"output_text": "x"}, {"content": " "}, {"output": [TOOL]},
                        {"choices": [{"message": {"content": "hi"}}]}, {"choices": [{"message": "hi"}]}, {"choices": [{"text": ""}]}]  # fmt: skip
CONVERSATION: list[Any] = [{"role": "user", "content": "q"}, {**TEXT, "id": "m"}, TOOL, {"type": "function_call_output", "call_id": "c", "output": "1"},
                           {"type": "reasoning", "id": "r", "summary": [{"type": "summary_text", "text": "t"}]}, {"foo": 1}, {"id": "m", "content": []},
                           {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}], "status": "completed"},
                           {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image", "detail": "auto"}]}, {"name": "f", "arguments": "{}"},
                           {**TOOL, "prompt_token_ids": [1], "generation_token_ids": [2], "generation_log_probs": [-0.5]}]  # fmt: skip
"""Conversation items (NeMo Gym validates each as its typed NeMoGymResponseInputItem); _mutate and
_conversation change them, so that some are refused (the trajectory unreadable) and some read otherwise.
Not made: items of the other types NeMo Gym names (computer_call, compaction, ...), which ours
accepts as any object (recording/_conversation_items.py) and NeMo Gym checks as the openai SDK's."""
GAPS = ["turns_unavailable", "trajectory_projection_failed", "turn_model_call_scope_incomplete", "model_calls_unavailable",
        "model_call_capture_incomplete", "model_call_reference_unmatched", "model_call_reference_ambiguous", "model_call_reference_conflict", "other"]  # fmt: skip


def _pick(rng: random.Random, usual: Any, odd: float = 0.08) -> Any:
    return rng.choice(ODD) if rng.random() < odd else usual


def _call(rng: random.Random, n: int) -> dict[str, Any]:
    metadata = {
        "response_id": rng.choice([f"resp-{n}", f"resp-{n}", "resp-shared", None]), "model_ref": rng.choice([POLICY, POLICY, JUDGE, None, {**POLICY, "x": 1}]),
        "status_code": rng.choice([200] * 6 + [500, 503, 429, 150, 302, None, "500", 200.0]), "finish_reason": rng.choice(["stop"] * 4 + ["length", "max_tokens", "max_output_tokens", None]),
        "error_category": rng.choice([None] * 8 + ["server_error", ""]), "response_status": rng.choice([None, "completed", "completed", "incomplete", "failed", "cancelled"]),
    }  # fmt: skip
    tokens = {"prompt_tokens": rng.choice([rng.randint(1, 40)] * 6 + [0, None, "7", 7.0]), "completion_tokens": rng.choice([rng.randint(1, 40)] * 6 + [0, None, "0", 3.0])}
    call = {"model_call_id": rng.choice([f"mc{n}"] * 5 + [None]), "started_at": rng.choice([float(n), float(10 - n), None, n]),
            "response_metadata": metadata, "token_stats": tokens, "response": rng.choice(RESPONSES)}  # fmt: skip
    for part in (call, metadata, tokens):
        if rng.random() < 0.15:
            part.pop(rng.choice(sorted(part)))
    return call


def _ref(rng: random.Random, call: dict[str, Any]) -> dict[str, Any]:
    metadata = call.get("response_metadata") or {}
    roll = rng.random()
    if roll < 0.08:
        return {"model_call_id": rng.choice(["ghost", "mc0"])}
    if roll < 0.3 and metadata.get("response_id"):
        return {"model_ref": metadata.get("model_ref") or rng.choice([POLICY, JUDGE]), "response_id": metadata["response_id"]}
    if roll < 0.36:
        return {"model_call_id": call.get("model_call_id") or "mcX", "model_ref": rng.choice([POLICY, JUDGE]), "response_id": metadata.get("response_id")}
    return {"model_call_id": call.get("model_call_id") or "mcX", "model_ref": None, "response_id": None}


def _trajectory(rng: random.Random, task_id: str, rollout_id: str) -> dict[str, Any]:
    calls = [_call(rng, n) for n in range(rng.choice([0, 1, 1, 2, 3, 4]))]
    turns = []
    for n in range(rng.choice([0, 1, 2, 2, 3])):
        refs = [_ref(rng, c) for c in rng.sample(calls, min(len(calls), rng.randint(0, 2)))]
        turns.append({"invocation_id": "root", "task_id": task_id, "rollout_id": rollout_id, "turn_no": n + 1 if rng.random() > 0.05 else 1,
                      "timestamp": float(n), "answer": rng.choice(ANSWERS), "reasoning_content": rng.choice([None, None, "thinking", [" "]]),
                      "step_count": n, "model_calls": refs})  # fmt: skip
    invocation = {"invocation_id": "root", "status": "completed", "model_calls": [_ref(rng, c) for c in calls if rng.random() < 0.7],
                  "conversation": _conversation(rng) if rng.random() < 0.5 else []}  # fmt: skip
    gaps = [{"code": rng.choice(GAPS), "invocation_id": rng.choice([None, "root"]), "detail": rng.choice([None, "model_calls:zz", "call:mc0", "", "a:b:c"])}
            for _ in range(rng.choice([0, 0, 0, 1, 2]))]  # fmt: skip
    tools = [{"invocation_id": "root", "tool_call_id": f"t{n}", "started_at": 1.0, "completed_at": rng.choice([2.0, 2.0, 2.0, 0.5, None]), "status": "completed"}
             for n in range(rng.randint(0, 2))]  # fmt: skip
    return copy.deepcopy({"schema_version": "1.0", "task_id": task_id, "rollout_id": rollout_id, "invocations": [invocation], "turns": turns,
                          "model_calls": calls, "tool_calls": tools, "gaps": gaps})  # fmt: skip  (a copy: _mutate changes it)


def _conversation(rng: random.Random) -> list[Any]:
    """A few items of CONVERSATION, one of them sometimes changed (a field dropped, or odd)."""
    items = copy.deepcopy(rng.sample(CONVERSATION, rng.randint(1, 3)))
    if rng.random() < 0.5:
        item = rng.choice(items)
        if rng.random() < 0.5:
            item[rng.choice(["type", "role", "id", "status", "content", "call_id", "phase", "generation_log_probs"])] = rng.choice([*ODD, "message", "user", "assistant", "bogus"])
        elif rng.random() < 0.5 and item:
            del item[rng.choice(sorted(item))]
        else:
            _mutate(rng, item)
    return items


def _healthy(rng: random.Random, task_id: str, rollout_id: str) -> dict[str, Any]:
    """A trajectory every check passes: each turn answers by one policy call it references."""
    n = rng.randint(1, 4)
    calls = [{"model_call_id": f"mc{i}", "started_at": float(i), "response": {"output": [TEXT]}, "token_stats": {"prompt_tokens": rng.randint(1, 40), "completion_tokens": rng.randint(1, 40)},
              "response_metadata": {"response_id": f"resp-{i}", "model_ref": POLICY, "status_code": 200, "finish_reason": "stop"}} for i in range(n)]  # fmt: skip
    turns = [{"invocation_id": "root", "task_id": task_id, "rollout_id": rollout_id, "turn_no": i + 1, "timestamp": float(i), "step_count": i,
              "answer": [TEXT] if i == n - 1 else [TOOL], "model_calls": [{"model_call_id": f"mc{i}"}]} for i in range(n)]  # fmt: skip
    invocation = {"invocation_id": "root", "model_calls": [{"model_call_id": f"mc{i}"} for i in range(n)], "conversation": _conversation(rng) if rng.random() < 0.3 else []}
    return copy.deepcopy({"task_id": task_id, "rollout_id": rollout_id, "invocations": [invocation], "turns": turns, "model_calls": calls})


def _fault(rng: random.Random, t: dict[str, Any]) -> None:
    """One thing gone wrong in a _healthy trajectory."""
    call, turn, kind = rng.choice(t["model_calls"]), rng.choice(t["turns"] or [{}]), rng.randrange(9)
    if kind == 0:
        call["response_metadata"].update(rng.choice([{"status_code": 500}, {"status_code": "503"}, {"error_category": "timeout"}, {"response_status": "failed"}, {"status_code": 150}]))
    elif kind == 1:
        call.setdefault("token_stats", {})[rng.choice(["prompt_tokens", "completion_tokens"])] = rng.choice([0, None, "0", "9", 5.0])
    elif kind == 2:
        call.update(response=rng.choice([None, {"output": []}, {"output_text": " "}]), response_metadata={**call["response_metadata"], "finish_reason": "length"})
    elif kind == 3:
        turn["model_calls"] = rng.choice([[], [{"model_call_id": "ghost"}], [{"model_ref": POLICY, "response_id": call["response_metadata"].get("response_id")}]])
    elif kind == 4:
        t["model_calls"].append({"model_call_id": "judge", "started_at": rng.choice([9.0, None]), "response_metadata": {"model_ref": JUDGE, "status_code": rng.choice([200, 500])}})
    elif kind == 5:
        t["gaps"] = [{"code": rng.choice(GAPS), "detail": rng.choice([None, "x:mc0"])}]
    elif kind == 6:
        turn["answer"] = rng.choice([[], None, "  ", [{"foo": 1}]])
    elif kind == 7:
        t["turns"] = rng.choice([[], t["turns"][:1]])
    else:
        call["started_at"] = rng.choice([None, -1.0, 99.0])


def _mutate(rng: random.Random, value: Any) -> None:
    """One odd value (or a key gone) somewhere inside `value`."""
    for _ in range(8):
        keys = list(value) if isinstance(value, dict) else list(range(len(value))) if isinstance(value, list) else []
        if not keys:
            return
        key = rng.choice(keys)
        child = value[key]
        if not isinstance(child, (dict, list)) or not child or rng.random() < 0.3:
            if isinstance(value, dict) and rng.random() < 0.2:
                del value[key]
            else:
                value[key] = rng.choice(ODD)
            return
        value = child


def _usage(rng: random.Random, trajectory: dict[str, Any] | None) -> Any:
    calls = trajectory.get("model_calls") if trajectory else []
    stats = [c["token_stats"] for c in calls if isinstance(c, dict) and isinstance(c.get("token_stats"), dict)] if isinstance(calls, list) else []
    sums = [sum(v for s in stats if type(v := s.get(k)) is int) for k in ("prompt_tokens", "completion_tokens")]
    prompt, completion = sums if rng.random() < 0.6 else (rng.randint(0, 80), rng.randint(0, 80))
    names = rng.choice([("input_tokens", "output_tokens"), ("prompt_tokens", "completion_tokens")])
    return {names[0]: _pick(rng, prompt), names[1]: _pick(rng, completion)} if rng.random() < 0.9 else rng.choice([None, {}, "u"])


def rows_for(seed: int) -> tuple[list[list[str]], list[str]]:
    """Seed `seed`'s run: the lines of each of its files, and the checks it ignores."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    traced = rng.random()
    for task in rng.sample(range(30), rng.randint(1, 6)):
        for rollout in range(rng.randint(1, 4)):
            t = _pick(rng, task if rng.random() > 0.1 else str(task), 0.01) if rng.random() > 0.02 else rng.choice([float(task), True, "b"])
            r = _pick(rng, rollout, 0.01) if rng.random() > 0.03 else rng.choice(["x", "10", float(rollout)])
            row: dict[str, Any] = {"_ng_task_index": t, "_ng_rollout_index": r, "agent_ref": {"name": rng.choice(["alpha", "beta", "ünï"])},
                                   "reward": rng.choice([1.0, 0.0, rng.random(), True, 1, None, "1.0", [1]])}  # fmt: skip
            for key in ("_ng_task_index", "_ng_rollout_index"):
                if rng.random() < 0.02:
                    del row[key]
            trajectory = None
            if rng.random() < traced:
                made = rng.choice([_trajectory, _healthy, _healthy])
                trajectory = made(rng, str(task), f"{task}-{rollout}")
                for _ in range(rng.choice([0, 0, 1, 2]) if made is _healthy else 0):
                    _fault(rng, trajectory)
                if rng.random() < 0.1:
                    _mutate(rng, trajectory)
            if rng.random() < 0.95:
                row["response"] = {"usage": _usage(rng, trajectory)}
            if trajectory is not None or rng.random() < 0.05:
                row["ng_trajectory"] = trajectory if rng.random() > 0.03 else rng.choice(ODD)
            extra = {"_ng_rollout_id": rng.choice(["rid", "", None, 7]), "stage_index": rng.choice([0, 1, "s", None]), "mask_sample": rng.choice([True, False, 1]),
                     "_ng_failure_class": "timeout"}  # fmt: skip
            row.update((k, v) for k, v in extra.items() if rng.random() < 0.06)
            rows.append(row)
    for _ in range(rng.choice([0, 0, 1, 2])):
        rows.append(copy.deepcopy(rng.choice(rows)))
    rng.shuffle(rows)
    lines = [json.dumps(r, ensure_ascii=rng.random() < 0.5) for r in rows]
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        lines.insert(rng.randint(0, len(lines)), rng.choice(["not json", "[1,2]", "null", "", "   ", '{"a": NaN}', "{}", "\ufeff{}"]))
    cut = rng.randint(1, len(lines)) if rng.random() < 0.2 else len(lines)
    ignored = rng.sample(CHECKS, rng.randint(1, 3)) if rng.random() < 0.25 else []
    return [f for f in (lines[:cut], lines[cut:]) if f], ignored


def nemo_side(manifest: Path) -> None:
    """In the nemo-gym venv: NeMo Gym's reports of each run in `manifest`, or why it refused."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_nemo_health_reference import nemo_reports

    for run in json.loads(manifest.read_text()):
        out = Path(run["out"])
        try:
            texts = nemo_reports([Path(p) for p in run["paths"]], out, run["ignored"])
        except Exception as exc:
            out.mkdir(parents=True, exist_ok=True)
            texts = {"refused": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
        for name, text in texts.items():
            (out / name).write_text(text)


def ours(paths: list[Path], out: Path, ignored: list[str], ranges: bool) -> dict[str, str]:
    import gym_metrics.health._read as read
    from gym_metrics.health import check_health

    read.PARALLEL_BYTES = 0 if ranges else read.PARALLEL_BYTES
    try:
        health = check_health(paths, output_dir=out, ignore=ignored, workers=2 if ranges else 1)
    except Exception as exc:
        return {"refused": type(exc).__name__}
    return {"quality_summary.json": health.summary_path.read_text(), "rollout_verdicts.jsonl": health.verdicts_path.read_text(), "report.txt": health.line() + "\n"}


def _first_difference(a: str, b: str) -> str:
    for n, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), 1):
        if x != y:
            return f"line {n}:\n    nemo: {x}\n    ours: {y}"
    return f"lengths {len(a.splitlines())} vs {len(b.splitlines())} lines"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:200", help="FIRST:STOP (default 0:200)")
    parser.add_argument("--nemo-python", help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--ranges", action="store_true", help="check ours in worker processes over byte ranges")
    parser.add_argument("--keep", type=Path, help="write each differing run's files and both reports here")
    parser.add_argument("--nemo-side", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nemo_side:
        nemo_side(args.nemo_side)
        return 0
    if not args.nemo_python:
        parser.error("--nemo-python is required")
    first, stop = (int(x) for x in args.seeds.split(":"))
    with tempfile.TemporaryDirectory() as tmp:
        runs: list[dict[str, Any]] = []
        for seed in range(first, stop):
            files, ignored = rows_for(seed)
            paths = [Path(tmp) / f"{seed}" / f"rollouts_{n}.jsonl" for n in range(len(files))]
            for path, lines in zip(paths, files):
                path.parent.mkdir(exist_ok=True)
                path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            runs.append({"seed": seed, "paths": [str(p) for p in paths], "out": str(Path(tmp) / f"{seed}" / "nemo"), "ignored": ignored})
        (Path(tmp) / "manifest.json").write_text(json.dumps(runs))
        subprocess.run([args.nemo_python, __file__, "--nemo-side", str(Path(tmp) / "manifest.json")], check=True)
        same = differing = 0
        refused: Counter[str] = Counter()
        for run in runs:
            out = Path(run["out"])
            theirs = {p.name: p.read_text() for p in out.iterdir() if p.name in (*REPORTS, "refused")}
            mine_dir = out.parent / "ours"
            mine = {k: v.replace(str(mine_dir), "<dir>") for k, v in ours([Path(p) for p in run["paths"]], mine_dir, run["ignored"], args.ranges).items()}
            theirs = {k: v.replace(str(out), "<dir>") for k, v in theirs.items()}
            if "refused" in theirs and ("refused" in mine or OVERFLOW in theirs["refused"]):
                refused[theirs["refused"].split(":")[0] if "refused" in mine else "its orjson refused a sum past 64 bits, ours wrote it"] += 1
                continue
            wrong = [k for k in (*REPORTS, "refused") if theirs.get(k) != mine.get(k)]
            same += not wrong
            differing += bool(wrong)
            for k in wrong:
                print(f"seed {run['seed']} ({len(run['paths'])} files, ignored {run['ignored']}): {k} differs, "
                      + (_first_difference(theirs[k], mine[k]) if k in theirs and k in mine else f"nemo {theirs.get('refused')} ours {mine.get('refused')}"))  # fmt: skip
            if wrong and args.keep:
                shutil.copytree(out.parent, args.keep / str(run["seed"]), dirs_exist_ok=True)
        for reason, count in refused.most_common():
            print(f"NeMo Gym refused {count} runs: {reason}")
        print(f"{stop - first} runs: {same} the same as NeMo Gym's, {differing} differing, {sum(refused.values())} NeMo Gym refused (see above)")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
