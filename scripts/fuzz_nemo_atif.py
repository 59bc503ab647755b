"""Differential test of the ATIF export against NeMo Gym 0.7.0 on random rollout rows. Each
seed builds one consistent row (system and user messages of text or parts; agent turns of
reasoning, function calls with their results in any order, or answers of output_text or refusal
parts; tool records; model calls with odd metadata, token counts, requests; turns joined by call
id or response id; surplus calls; rewards and metadata of every JSON type), then changes it 0-3
times: a value anywhere set to an odd one (null, bools, big numbers, NaN, blank or unpaired-
surrogate text, a hosted tool item) or to another it may well hold (ALT), keys dropped or added,
list items repeated or reversed, a conversation item changed alike in every turn's copy.

NeMo Gym's `gym_rollout_to_atif` and the file it writes (scripts/make_nemo_atif_reference.py
--rows, in a nemo-gym venv) against ours (`rollout_to_atif` on the row read as the API and as
`export --atif` reads it, then `atif_bytes`): a row both export must give the same JSON (types,
key order) and file bytes; a row one refuses the other must refuse (wording may differ: counted
apart). Rows NeMo Gym crashes on (neither its refusal nor a validation error) are counted apart.

    .venv/bin/python scripts/fuzz_nemo_atif.py --seeds 0:2000 --nemo-python /tmp/ngvenv/bin/python [--keep DIR]

Exit 0 when no row differs; 1 when one does (each printed; --keep writes row and both outcomes).
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
from gym_metrics.recording import AtifRefused, rollout_to_atif  # noqa: E402
from gym_metrics.recording._atif_json import atif_bytes, read_rows  # noqa: E402

TEXTS = ["hi", "", " ", "Task 1: add 1", "ünï ✓", "a\nb", "Done.", "\\"]
ODD = [None, True, False, 0, 1, -1, 7, 2**63, 2**64 + 1, -(2**70), 1.5, -0.0, 1e300, 1e-7, 12345678.25, float("nan"),
       "", " ", "x", "\ud800", "completed", "in_progress", "incomplete", "failed", "unknown", "message", "reasoning",
       "function_call", "function_call_output", "web_search_call", "assistant", "user", "system", "developer", "tool",
       "input_text", "output_text", "refusal", "summary_text", "reasoning_text", "text", "stop", "tool_calls", "length",
       "end_turn", "chat", "messages", "responses", "responses_api_models", "responses_api_agents", '{"a": 1}', "[1]",
       "call_0", "mc_0", "resp_0", "root", "commentary", "final_answer", [], [1], [None], {}, {"a": None}]  # fmt: skip
HOSTED = [{"type": "web_search_call", "id": "ws_0", "status": "completed", "action": {"type": "search", "query": "q"}},
          {"type": "mcp_call", "id": "mcp_0", "arguments": "{}", "name": "t", "server_label": "s"},
          {"type": "image_generation_call", "id": "ig_0", "status": "completed", "result": None},
          {"type": "custom_tool_call", "call_id": "c", "input": "i", "name": "n"}, {"role": "user", "content": "untyped"}]  # fmt: skip
MODEL_REF = {"type": "responses_api_models", "name": "policy"}
STATUSES = ["completed", "in_progress", "incomplete", None, "failed", "unknown", "timeout", "cancelled"]
ALT: dict[Any, list[Any]] = {  # plausible values of a field, beside the odd ones
    "status": STATUSES, "response_status": STATUSES, "role": ["assistant", "user", "system", "developer"], "phase": [None, "commentary", "final_answer"],
    "finish_reason": ["stop", "STOP", " tool_calls", "tool_use", "end_turn", "stop_sequence", "function_call", "length", "completed", "", None],
    "dialect": ["chat", "messages", "responses", None, "other"], "status_code": [200, 201, 299, 300, 404, None], "resolved": [True, False, None],
    "annotations": [[], None, [{"type": "url_citation", "url": "u", "title": "t", "start_index": 0, "end_index": 1}]], "logprobs": [[], None],
    "encrypted_content": [None, "", "x"], "summary": [[], [{"type": "summary_text", "text": "s"}]], "timing_source": ["executor", "artifact", "harness", None],
    "content": [[], "x", [{"type": "reasoning_text", "text": "r"}], [{"type": "input_text", "text": "t"}], [{"type": "output_text", "text": "o", "annotations": []}]],
    "output": ["x", "", [{"type": "input_text", "text": "x"}], [{"type": "input_image", "image_url": "u", "detail": "auto"}], None],
    "timestamp": [0, -1.5, 1.7e9 + 0.1234567, 1e11, 253402300800, 1e20], "duration_ms": [0, 0.0, 5, -1, None], "tool_name": [None, "add", "get", ""],
    "model": ["scripted", "other", " ", None], "error_category": [None, "server_error"], "error_type": [None, "E"], "sandbox_id": [None, "sb", ""],
    "response_source": ["upstream", "local", None], "id": [None, "", "x", "fc_0_0", "msg_0"], "type": ["message", "reasoning", "function_call", "function_call_output"],
    "prompt_tokens": [0, 5, 90, None], "completion_tokens": [0, 5, None], "cached_tokens": [0, 100, None], "total_tokens": [0, 200, None], "reasoning_tokens": [0, 50, None],
}  # fmt: skip
KEYS = [*ALT, "namespace", "prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts", "extra", "kind", "refusal", "text"]


def _json(rng: random.Random, depth: int = 0) -> Any:
    """A request, response or metadata value: any JSON, nulls and big numbers included."""
    if depth > 2 or rng.random() < 0.4:
        return rng.choice([None, True, 3, 2**64 + 5, -2.5, 1e-7, 1e16, "s", "\u00e9", ""])
    if rng.random() < 0.5:
        return [_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["a", "b", "input", "output", "usage", "n"] * 30 + ["\ud800"]  # an unpaired surrogate: a key NeMo Gym refuses
    return {rng.choice(keys) + str(i): _json(rng, depth + 1) for i in range(rng.randint(0, 3))}


def _parts(rng: random.Random, kind: str, n: int) -> list[dict[str, Any]]:
    part: dict[str, Any] = {"type": kind, **({"refusal": ""} if kind == "refusal" else {"text": ""}), **({"annotations": []} if kind == "output_text" else {})}
    return [{**part, "refusal" if kind == "refusal" else "text": rng.choice(TEXTS)} for _ in range(n)]


def _content(rng: random.Random) -> Any:
    return rng.choice(TEXTS) if rng.random() < 0.5 else _parts(rng, "input_text", rng.randint(1, 2))


def _message(rng: random.Random, role: str) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "message", "role": role, "content": _content(rng)}
    return {**item, "status": rng.choice(["completed"] * 4 + ["in_progress", None, "failed"])} if isinstance(item["content"], list) and rng.random() < 0.3 else item


def _reasoning(rng: random.Random, key: str) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{key}", "summary": _parts(rng, "summary_text", rng.choice([0] + [1] * 30 + [2]))}
    if rng.random() < 0.25:
        item["content"] = _parts(rng, "reasoning_text", rng.choice([0] + [1] * 9))
        item["summary"] = [] if rng.random() < 0.9 else item["summary"]
    if rng.random() < 0.03:
        item["encrypted_content"] = rng.choice([None, "xyz"])
    return item


def _arguments(rng: random.Random) -> str:
    bad = ["[]", "{count: 1", '{"a":1,"a":2}', "", '{"x": 0.10000000000000000001}', '{"x": 1e999}', '{"s": "\\ud800"}']
    return rng.choice(bad if rng.random() < 0.02 else ['{"count": 1}', "{}", '{"a": [1, 2.5, null], "b": {"c": "\\u00e9"}}', '{"x": 1e-7}',
                                                       '{"n": 18446744073709551621}', '{"x": 1.0}', '{"x": 1E2}', '{"x": -0.0}', '{"x": 1.5e300}'])  # fmt: skip


def _stats(rng: random.Random) -> dict[str, Any]:
    prompt, completion = rng.randint(0, 90), rng.randint(0, 40)
    stats = {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": rng.randint(0, 10),
             "reasoning_tokens": rng.choice([0, 0, 0, 0, 3, 50]), "total_tokens": prompt + completion + rng.choice([0, 0, 1])}  # fmt: skip
    return {k: v for k, v in stats.items() if rng.random() < 0.85} if rng.random() > 0.15 else {}


def build(rng: random.Random) -> dict[str, Any]:
    """A consistent row: the conversation, each turn's copies of it, tool records and model calls."""
    conv: list[dict[str, Any]] = [_message(rng, rng.choice(["user", "user", "system"])) for _ in range(rng.choice([0, 1, 1, 1, 2]))]
    tool_calls, model_calls, turns, refs = [], [], [], []
    n_turns, steps, by_response = rng.randint(1, 3), 0, rng.random() < 0.3
    for n in range(n_turns):
        question = copy.deepcopy(conv)
        reasoning = [_reasoning(rng, f"{n}_{j}") for j in range(rng.choice([0] * 15 + [1] * 24 + [2]))]
        tools = n < n_turns - 1 or rng.random() < 0.15
        answer: list[dict[str, Any]]
        if tools:
            answer = [{"type": "function_call", "call_id": f"call_{n}_{j}", "name": rng.choice(["add", "get"]), "arguments": _arguments(rng),
                       **({"id": f"fc_{n}_{j}"} if rng.random() < 0.8 else {}), **({"status": "completed"} if rng.random() < 0.7 else {})}
                      for j in range(rng.randint(1, 3))]  # fmt: skip
            outputs = [{"type": "function_call_output", "call_id": c["call_id"], "output": _content(rng),
                        **({"id": f"fco_{c['call_id']}"} if rng.random() < 0.2 else {}), **({"status": "completed"} if rng.random() < 0.2 else {})}
                       for c in answer]  # fmt: skip
            rng.shuffle(outputs)
            for out, start in ((o, rng.choice([5, 1.75e9, None])) for o in outputs):
                record = {"invocation_id": "root", "tool_call_id": out["call_id"], "status": "completed", "started_at": start,
                          "tool_name": rng.choice([None, *[c["name"] for c in answer if c["call_id"] == out["call_id"]] * 2]),
                          "completed_at": rng.choice([None, (start or 0) + rng.choice([0, 2, 0.5])]), "duration_ms": rng.choice([2, 0.25, None]),
                          "timing_source": rng.choice(["executor", None]), "sandbox_id": rng.choice([None, "sb"]), "output": rng.choice([out["output"], None])}  # fmt: skip
                tool_calls.append({k: v for k, v in record.items() if v is not None or rng.random() < 0.2})
            steps += len(answer)
        else:
            kind = rng.choice(["output_text"] * 24 + ["refusal"])
            answer = [{"type": "message", "role": "assistant", "id": f"msg_{n}", "content": _parts(rng, kind, rng.choice([1, 1, 2])),
                       **({"status": "completed"} if rng.random() < 0.8 else {})}]  # fmt: skip
            outputs = []
        conv += [*reasoning, *answer, *outputs]
        dialect = rng.choice(["responses", "chat", "messages", None])
        proper = {"chat": "tool_calls" if tools else "stop", "messages": "tool_use" if tools else "end_turn"}.get(str(dialect), "completed")
        metadata = {"response_id": f"resp_{n}", "model_ref": dict(MODEL_REF) if by_response or rng.random() < 0.3 else None,
                    "model": rng.choice(["scripted", "scripted", "other"]), "dialect": dialect, "status_code": rng.choice([200, None]),
                    "response_status": rng.choice(["completed", None]), "finish_reason": rng.choice([proper] * 12 + [None] * 4 + ALT["finish_reason"]),
                    "latency_ttft_ms": rng.choice([None, 3, 0.5]), "upstream_attempted": rng.choice([None, True])}  # fmt: skip
        model_calls.append({"model_call_id": f"mc_{n}", "started_at": 1.75e9 + n, "completed_at": 1.75e9 + n + 0.5, "duration_ms": rng.choice([500, 0.5]),
                            "request": _json(rng), "response": _json(rng), "response_metadata": {k: v for k, v in metadata.items() if v is not None},
                            "token_stats": _stats(rng)})  # fmt: skip
        ref = {"model_ref": dict(MODEL_REF), "response_id": f"resp_{n}"} if by_response else {"model_call_id": f"mc_{n}"}
        refs.append(ref)
        turns.append({"invocation_id": "root", "task_id": "t1", "rollout_id": "r0", "turn_no": n + 1, "timestamp": rng.choice([1.75e9 + n, 1_800_000_000 + n]),
                      "question": question, "answer": copy.deepcopy(answer), "reasoning_content": copy.deepcopy(reasoning) or None,
                      "resolved": rng.choice([None, True, False]), "step_count": steps, "model_calls": [copy.deepcopy(ref)]})  # fmt: skip
    if rng.random() < 0.15:
        model_calls.insert(rng.randint(0, len(model_calls)), {"model_call_id": "surplus", "request": _json(rng), "response_metadata": {"model": "scripted"}})
    invocation = {"invocation_id": "root", "status": "completed", "duration_ms": rng.choice([12, 3.5, None]), "model_calls": refs, "conversation": conv}
    trajectory = {"schema_version": "1.0", "task_id": "t1", "rollout_id": "r0", "invocations": [{k: v for k, v in invocation.items() if v is not None}],
                  "turns": turns, "model_calls": model_calls, "tool_calls": tool_calls, "gaps": []}  # fmt: skip
    agents: list[Any] = [{"type": "responses_api_agents", "name": "agent"}] * 8 + [{"name": "agent"}, None, "", 0, False, [], {}]
    row: dict[str, Any] = {"agent_ref": rng.choice(agents), "_ng_task_index": rng.choice([0, 3, 2**40]),
           "_ng_rollout_index": rng.choice([0, 1]), "reward": rng.choice([1.0, 0, True, None, "1", 0.5]), "ng_trajectory": trajectory}  # fmt: skip
    if not row["agent_ref"] or rng.random() < 0.2:
        row["_ng_environment_server"] = rng.choice(["env"] * 8 + ["", None])
    for name in rng.sample(["metadata", "responses_create_params", "verifier_metadata", "score"], rng.randint(0, 2)):
        row[name] = _json(rng)
    return row


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path inside `value` (object keys and list indices)."""
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return [p for key, child in children for p in [(*path, key), *_nodes(child, (*path, key))]]


def _change(rng: random.Random, value: Any, path: tuple[Any, ...]) -> tuple[str, tuple[Any, ...], Any]:
    """A change at `path` inside `value`: (operation, path, new value); a field ALT names is
    mostly given another value it may well hold."""
    if path[-1] in ALT and rng.random() < 0.6:
        return "set", path, copy.deepcopy(rng.choice(ALT[path[-1]]))
    op, key = rng.choice(["set", "set", "set", "drop", "add", "repeat", "reverse"]), rng.choice(KEYS)
    return op, path, rng.choice(ODD + HOSTED) if op != "add" else (key, rng.choice(ALT.get(key, ODD)))


def _apply(target: Any, change: tuple[str, tuple[Any, ...], Any]) -> None:
    op, path, new = change[0], change[1], copy.deepcopy(change[2])
    for key in path[:-1]:
        target = target[key]
    last = path[-1]
    if op == "set":
        target[last] = new
    elif op == "drop":
        del target[last]
    elif op == "add" and isinstance(target[last], dict):
        target[last][new[0]] = new[1]
    elif op == "repeat" and isinstance(target, list):
        target.insert(last, copy.deepcopy(target[last]))
    elif op == "reverse" and isinstance(target[last], list):
        target[last].reverse()


def _at(value: Any, *path: Any) -> Any:
    """value[path...], or None where a step is missing or of another type."""
    for key in path:
        ok = isinstance(value, dict) and key in value or isinstance(value, list) and isinstance(key, int) and key < len(value)
        value = value[key] if ok else None
    return value


def row_for(seed: int) -> dict[str, Any]:
    """Seed `seed`'s row (deterministic): built, then changed 0 to 3 times."""
    rng = random.Random(seed)
    row = build(rng)
    for _ in range(rng.choice([0, 0, 0, 1, 1, 1, 2, 3])):
        conv = _at(row, "ng_trajectory", "invocations", 0, "conversation")
        items = [i for i in conv if isinstance(i, dict) and i] if isinstance(conv, list) else []
        if items and rng.random() < 0.5:  # one item, and each turn's copy of it alike
            item = rng.choice(items)
            change = _change(rng, item, rng.choice(_nodes(item)))
            turns = _at(row, "ng_trajectory", "turns")
            copies = [i for n in range(len(turns) if isinstance(turns, list) else 0) for k in ("question", "answer", "reasoning_content")
                      for i in (_at(turns, n, k) if isinstance(_at(turns, n, k), list) else []) if i == item]  # fmt: skip
            for target in [item, *copies]:
                _apply(target, change)
        elif isinstance(conv, list) and rng.random() < 0.15:
            conv.insert(rng.randint(0, len(conv)), copy.deepcopy(rng.choice(HOSTED + [_message(rng, "assistant"), _message(rng, "user")])))
        else:
            _apply(row, _change(rng, row, rng.choice(_nodes(row))))
    return row


def ours(text: str, parsed: bool = False) -> dict[str, Any]:
    """Our trajectory and file of the row, read as the API reads it (json.loads) or, `parsed`, as
    `export --atif` reads each line (`read_rows`); or our refusal, or what we raised."""
    try:
        row = next(read_rows([text.encode("utf-8")]))[1] if parsed else json.loads(text)
        if isinstance(row, AtifRefused):
            raise row
        atif = rollout_to_atif(row, session_id="run-1", agent_version="0.1", exporter_version="test", parsed=parsed)
        body = atif_bytes(atif).decode("utf-8")
    except AtifRefused as exc:
        return {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001  (a crash is a difference)
        return {"error": repr(exc), "raised": type(exc).__name__}
    atif["extra"]["nemo_gym"]["exporter"] = "<exporter>"
    return {"atif": atif, "file": body}


def _kind(nemo: dict[str, Any], mine: dict[str, Any]) -> str:
    if nemo.get("raised") not in (None, "AtifExportError", "ValidationError"):
        return f"NeMo Gym crashed ({nemo['raised']}), ours {'exported' if 'atif' in mine else 'refused'}"
    if "atif" in nemo and "atif" in mine:
        same = json.dumps(nemo["atif"]) == json.dumps(mine["atif"]) and nemo["file"] == mine["file"]
        return "both exported, same JSON and bytes" if same else "DIFFERS: both exported, differently"
    if "error" in nemo and "error" in mine:
        return "DIFFERS: ours crashed" if "raised" in mine else "both refused" + (", same words" if nemo["error"] == mine["error"] else "")
    return "DIFFERS: " + ("NeMo Gym exported, ours refused" if "atif" in nemo else "NeMo Gym refused, ours exported")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:500", help="FIRST:STOP (default 0:500)")
    parser.add_argument("--nemo-python", required=True, help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--keep", type=Path, help="write each differing row and both outcomes here")
    args = parser.parse_args(argv)
    first, stop = (int(x) for x in args.seeds.split(":"))
    texts = [json.dumps(row_for(seed)) for seed in range(first, stop)]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "rows.jsonl").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        made = subprocess.run([args.nemo_python, str(ROOT / "scripts" / "make_nemo_atif_reference.py"), "--rows", str(Path(tmp) / "rows.jsonl")],
                              capture_output=True, text=True, check=True)  # fmt: skip
    theirs = [json.loads(line) for line in made.stdout.splitlines()]
    assert len(theirs) == len(texts), made.stderr
    tally: Counter[str] = Counter()
    for seed, text, nemo in zip(range(first, stop), texts, theirs):
        for reader, mine in (("API", ours(text)), ("export", ours(text, parsed=True))):
            kind = _kind(nemo, mine)
            tally[f"{kind} ({reader} reading)"] += 1
            if not kind.startswith("DIFFERS"):
                continue
            print(f"seed {seed} ({reader} reading): {kind}: NeMo Gym: {str(nemo.get('error', 'exported'))[:160]!r}; ours: {str(mine.get('error', 'exported'))[:160]!r}")
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"seed_{seed}.json").write_text(json.dumps({"row": json.loads(text), "nemo": nemo, "ours": mine}, indent=1) + "\n")
    for kind, count in sorted(tally.items()):
        print(f"{count:6d}  {kind}")
    differing = sum(n for kind, n in tally.items() if kind.startswith("DIFFERS"))
    print(f"{stop - first} rows, each read two ways: {differing} readings differ")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
