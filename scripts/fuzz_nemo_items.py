"""Differential test of `recording._items.as_dumped` against NeMo Gym 0.7.0: each seed makes one
conversation item of a kind a policy answer or an agent's conversation holds (messages of every
role with text or part lists and odd parts, function calls and their outputs with odd ids and
outputs, reasoning with or without summary, content and encrypted content, training variants
with token fields whole, partial or mistyped, unknown types, items that are not objects), then
NeMo Gym's `AgentInvocation(conversation=[item]).model_dump(mode="json")` (through
scripts/make_nemo_items_reference.py's `nemo_dumped`, in a nemo-gym venv, one subprocess for the
batch) and ours are compared as tests/recording/test_trajectory_items.py compares them: the same
JSON text (keys in the model's order, the same JSON types) where NeMo Gym keeps every field,
the item back unchanged where NeMo Gym refuses it or drops a field (counted apart). An item of a
type whose model is the openai SDK's (web search, custom tool calls, ...: recording/_sdk_items.py)
is compared the same way where the SDK is installed, and kept whole (counted apart) where not.

    .venv/bin/python scripts/fuzz_nemo_items.py --seeds 0:5000 --nemo-python /tmp/ngvenv/bin/python \
        [--keep DIR]   # DIR/differences.jsonl gets each differing item with both answers

Exit 0 when every item gives what NeMo Gym gives; 1 when one differs.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "recording"))
from test_trajectory_items import _dropped_or_refused  # type: ignore[import-not-found]  # noqa: E402  (the test's rule)

from gym_metrics.recording._sdk_items import SDK_MODELS, sdk_model  # noqa: E402
from gym_metrics.recording._items import as_dumped  # noqa: E402
from _fuzzing import maybe, nemo_answers, odd  # noqa: E402  (scripts/, this script's folder)

NAN = float("nan")
STATUSES = ["completed", "in_progress", "incomplete", "failed", None, "", 1]
ODD: list[Any] = [None, 0, 1, True, 2.5, "", "x", [], {}, "Ünï ✓", 2**70, NAN]
INPUT_PARTS = ["input_text", "input_text", "input_image", "input_file", "input_video"]
ALL_PARTS = ["input_text", "output_text", "refusal", "summary_text", "reasoning_text", "input_image", "input_file", "input_video"]
OTHER: list[dict[str, Any]] = [
    {"type": "mcp_call", "id": "mc_1", "arguments": "{}", "name": "n", "server_label": "s"},
    {"type": "mcp_list_tools", "id": "ml_1", "server_label": "s", "tools": [{"name": "t", "input_schema": {}}]},
    {"type": "compaction", "id": "cp_1", "encrypted_content": "e"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
    {"type": "custom_tool_call", "call_id": "c", "input": "i", "name": "n"},
    {"type": "custom_tool_call_output", "call_id": "c", "output": "o"},
    {"type": "mcp_approval_request", "id": "ar_1", "arguments": "{}", "name": "n", "server_label": "s"},
    {"type": "mcp_approval_request", "arguments": "{}", "name": "n"},
    {"type": "mcp_approval_response", "approval_request_id": "ar_1", "approve": True},
    {"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed", "results": [{"text": "t", "score": 0.5}]},
    {"type": "computer_call", "id": "cc_1", "call_id": "c", "action": {"type": "click", "button": "left", "x": 1, "y": 2},
     "pending_safety_checks": [], "status": "completed"},
    {"type": "computer_call_output", "call_id": "c", "output": {"type": "computer_screenshot", "image_url": "data:,"}},
    {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "b64"},
    {"type": "code_interpreter_call", "id": "ci_1", "code": "1+1", "container_id": "k", "outputs": [{"type": "logs", "logs": "2"}],
     "status": "completed"},
    {"type": "local_shell_call", "id": "ls_1", "call_id": "c", "action": {"type": "exec", "command": ["ls"], "env": {}}, "status": "completed"},
    {"type": "local_shell_call_output", "id": "lo_1", "output": "o"},
    {"type": "shell_call", "id": "sh_1", "call_id": "c", "action": {"commands": ["ls"]}, "status": "completed"},
    {"type": "shell_call_output", "call_id": "c", "output": [{"stdout": "o", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]},
    {"type": "apply_patch_call", "id": "ap_1", "call_id": "c", "operation": {"type": "delete_file", "path": "p"}, "status": "completed"},
    {"type": "apply_patch_call_output", "id": "ao_1", "call_id": "c", "status": "completed"},
    {"type": "tool_search_call", "id": "ts_1", "arguments": {}, "status": "completed"},
    {"type": "tool_search_output", "id": "to_1", "tools": [], "status": "completed"},
    {"type": "compaction_trigger"},
    {"type": "additional_tools", "tools": [], "role": "developer"},
]


def _odd(rng: random.Random, usual: Any, p: float = 0.07) -> Any:
    return odd(rng, usual, ODD, p)


def _text(rng: random.Random) -> str:
    return rng.choice(["4", "", "hi there", "Ünï ✓ 😀", "a\nb", "{\"a\": 2}", "x" * 40])


def _part(rng: random.Random, fitting: list[str]) -> Any:
    """One content part: mostly of a kind its list holds (`fitting`), else any kind, sometimes odd."""
    kind = rng.choice(fitting if rng.random() < 0.85 else [*ALL_PARTS, None, "weird"])
    if rng.random() < 0.04:
        return rng.choice(["text", 3, None, ["x"]])
    part: dict[str, Any] = {} if kind is None else {"type": kind}
    if kind == "output_text":
        part["text"] = _odd(rng, _text(rng), 0.08)
        ann = [{"type": "url_citation", "url": "u", "title": "t", "start_index": 0, "end_index": 1},
               {"type": "file_path", "file_id": "f", "index": 0}, {"type": "bogus"}, {"type": "file_citation"}]  # fmt: skip
        maybe(rng, part, "annotations", _odd(rng, rng.sample(ann[:2], rng.randint(0, 2)) + ann[2:][: rng.random() < 0.15], 0.1), 0.85)
        maybe(rng, part, "logprobs", rng.choice([[], None, [{"token": "4", "logprob": -0.5, "bytes": [52], "top_logprobs": []}],
                                                   [{"token": "4", "logprob": 1, "bytes": [], "top_logprobs": []}], [{"token": "4"}]]), 0.3)  # fmt: skip
    elif kind == "refusal" or (kind is None and rng.random() < 0.5):
        part["refusal"] = _odd(rng, _text(rng), 0.08)
    elif kind == "input_image":
        maybe(rng, part, "image_url", "http://x/i.png", 0.7)
        maybe(rng, part, "detail", rng.choice(["auto", "low", "high", "huge"]), 0.7)
    elif kind == "input_file":
        maybe(rng, part, "file_id", "f", 0.5)
        maybe(rng, part, "filename", "a.txt", 0.5)
    elif kind == "input_video":
        maybe(rng, part, rng.choice(["video_url", "video"]), rng.choice(["http://v", "", {"url": "http://v"}]), 0.8)
    else:
        maybe(rng, part, "text", _odd(rng, _text(rng), 0.08), 0.92)
    if rng.random() < 0.06:
        part[rng.choice(["extra", "status", "id"])] = _odd(rng, "e", 0.3)
    return part


def _parts(rng: random.Random, fitting: list[str]) -> list[Any]:
    return [_part(rng, fitting) for _ in range(rng.choice([0, 1, 1, 1, 2, 3]))]


def _tokens(rng: random.Random, item: dict[str, Any]) -> None:
    """All three token fields, some of them, or mistyped ones; routed experts now and then."""
    values = {"prompt_token_ids": [1, 2], "generation_token_ids": [3], "generation_log_probs": [-0.25]}
    for key in rng.sample(sorted(values), 3 if rng.random() < 0.8 else rng.randint(0, 2)):
        value = values[key]
        if rng.random() < 0.2:
            value = rng.choice([[], [1.0], [True], ["2"], [NAN], [1], [2**70], None, "1", [0.5]])
        item[key] = value
    if rng.random() < 0.3:
        item["routed_experts"] = rng.choice([[[[0, 1]]], "nrlre1:int8:1x1x2:AAE=", None, [], [[0]], 5])


def item_for(seed: int) -> Any:
    """Seed `seed`'s item (deterministic)."""
    rng = random.Random(seed)
    kind = rng.choice(["message"] * 6 + ["answer"] * 4 + ["function_call", "function_call_output"] * 3
                      + ["reasoning"] * 3 + ["other"] * 2 + ["not_object"])  # fmt: skip
    item: dict[str, Any] = {}
    if kind == "not_object":
        return rng.choice(["hello", 1, None, [], [{"role": "user", "content": "x"}], True])
    if kind in ("message", "answer"):
        item["role"] = _odd(rng, "assistant" if kind == "answer" else rng.choice(["user", "system", "developer", "assistant", "tool"]), 0.06)
        if kind == "answer" or rng.random() < 0.3:
            maybe(rng, item, "id", _odd(rng, "msg_1", 0.15), 0.85)
        fitting = ["output_text", "output_text", "refusal"] if item["role"] == "assistant" else INPUT_PARTS
        item["content"] = _odd(rng, _parts(rng, fitting) if kind == "answer" or rng.random() < 0.5 else _text(rng), 0.08)
        maybe(rng, item, "status", rng.choice(STATUSES[:3]) if rng.random() < 0.8 else rng.choice(STATUSES), 0.5)
        maybe(rng, item, "phase", rng.choice(["commentary", "final_answer", None, "other"]), 0.2)
        maybe(rng, item, "type", _odd(rng, "message", 0.1), 0.7)
    elif kind == "function_call":
        item.update(type="function_call", arguments=_odd(rng, "{\"a\": 2}"), call_id=_odd(rng, "call_0"), name=_odd(rng, "add"))
        for key, value in (("id", "fc_1"), ("status", rng.choice(STATUSES)), ("namespace", rng.choice(["tools", None]))):
            maybe(rng, item, key, _odd(rng, value), 0.35)
    elif kind == "function_call_output":
        item.update(type="function_call_output", call_id=_odd(rng, "call_0"), output=_odd(rng, _parts(rng, INPUT_PARTS) if rng.random() < 0.4 else _text(rng)))
        maybe(rng, item, "id", _odd(rng, "fco_1"), 0.35)
        maybe(rng, item, "status", rng.choice(STATUSES), 0.35)
    elif kind == "reasoning":
        item["type"] = "reasoning"
        maybe(rng, item, "id", _odd(rng, "rs_1", 0.1), 0.9)
        maybe(rng, item, "summary", _odd(rng, _parts(rng, ["summary_text"]), 0.1), 0.85)
        maybe(rng, item, "content", _odd(rng, _parts(rng, ["reasoning_text"]), 0.2), 0.35)
        maybe(rng, item, "encrypted_content", _odd(rng, "gAAA", 0.2), 0.3)
        maybe(rng, item, "status", rng.choice(STATUSES), 0.1)
    elif rng.random() < 0.5:  # a type NeMo Gym names whose model is the openai SDK's
        item.update(copy.deepcopy(rng.choice(OTHER)))
        if rng.random() < 0.3:
            item.pop(rng.choice(sorted(item)))
        if item and rng.random() < 0.3:  # a field of another type, or none at all
            key = rng.choice(sorted(item))
            item[key] = _odd(rng, item[key], 0.6)
    else:
        item["type"] = rng.choice(["input", "mcp_call", "compaction", "weird", "", None, 5, "item_reference"])
        for key in rng.sample(["content", "role", "id", "call_id", "output", "name", "arguments", "summary"], rng.randint(0, 3)):
            item[key] = _odd(rng, "x", 0.3)
    if rng.random() < 0.25:
        _tokens(rng, item)
    if rng.random() < 0.05:
        item[rng.choice(["extra", "metadata"])] = _odd(rng, 1, 0.3)
    if rng.random() < 0.3:  # keys in another order
        keys = list(item)
        rng.shuffle(keys)
        item = {k: item[k] for k in keys}
    return item


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:1000", help="FIRST:STOP (default 0:1000)")
    parser.add_argument("--nemo-python", required=True, help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--keep", type=Path, help="write each differing item with both answers to DIR/differences.jsonl")
    args = parser.parse_args(argv)
    first, stop = (int(x) for x in args.seeds.split(":"))
    items = [item_for(seed) for seed in range(first, stop)]
    answers = nemo_answers(args.nemo_python, "make_nemo_items_reference", "nemo_dumped", items)
    # both sides read the items back from JSON text (NaN and all), as NeMo Gym's side did
    items = [json.loads(json.dumps(i)) for i in items]
    counts: Counter[str] = Counter()
    differences = []
    for seed, item, nemo in zip(range(first, stop), items, answers):
        try:
            ours: Any = as_dumped(item)
        except Exception as exc:  # a crash of ours is a difference
            ours = f"RAISED {type(exc).__name__}: {exc}"
        kept_whole = _dropped_or_refused({"item": item, "dumped": nemo}) if isinstance(item, dict) or nemo is None else False
        expected = item if kept_whole else nemo
        if json.dumps(ours) == json.dumps(expected):
            counts["refused by NeMo Gym" if nemo is None else "dropped a field in NeMo Gym" if kept_whole else "the same dump"] += 1
            continue
        if isinstance(item, dict) and item.get("type") in SDK_MODELS and sdk_model(str(item["type"])) is None and ours == item:
            counts["kept whole (a type whose SDK model is not installed here)"] += 1
            continue
        counts["differing"] += 1
        differences.append({"seed": seed, "item": item, "nemo_gym": nemo, "expected": expected, "ours": ours})
        print(f"seed {seed}: {json.dumps(item)}\n  NeMo Gym: {json.dumps(nemo)}\n  ours:     {json.dumps(ours)}")
    if args.keep and differences:
        args.keep.mkdir(parents=True, exist_ok=True)
        (args.keep / "differences.jsonl").write_text("".join(json.dumps(d) + "\n" for d in differences))
    print(f"{stop - first} items: " + ", ".join(f"{n} {what}" for what, n in counts.most_common()))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
