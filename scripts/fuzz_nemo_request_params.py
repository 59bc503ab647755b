"""Differential test of the port's `NeMoGymResponseCreateParamsNonStreaming` (the
`responses_create_params` of every ported verify and run request) against NeMo Gym 0.7.0's: each
seed makes one set of request parameters (tools of every kind the openai SDK names, with keys
missing, extra, null or mistyped; tool choices, reasoning, text formats, include, metadata,
prompts, conversations, context management, sampling numbers as numbers, text or booleans;
unknown fields; keys in any order), then both models validate it and, when they accept it, dump
it (`model_dump(mode="json")`), compared as tests/nemo_gym/test_request_params.py compares the
recorded cases: the same JSON text (keys in NeMo Gym's order), or both refusing. NeMo Gym's side
runs scripts/make_nemo_request_reference.py's `nemo_dumped` in a nemo-gym venv, one subprocess
for the batch.

    .venv/bin/python scripts/fuzz_nemo_request_params.py --seeds 0:3000 --nemo-python /tmp/ngvenv/bin/python \\
        [--keep DIR]   # DIR/differences.jsonl gets each differing case with both answers

Exit 0 when every case gives what NeMo Gym gives; 1 when one differs.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "nemo_gym"))
from _fuzzing import maybe, nemo_answers, odd  # noqa: E402
from test_request_params import dumped  # type: ignore[import-not-found]  # noqa: E402  (the test's rule)

ODD: list[Any] = [None, 0, 1, True, 2.5, "", "x", [], {}, "Ünï ✓", 2**70]


def _odd(rng: random.Random, usual: Any, p: float = 0.06) -> Any:
    return odd(rng, usual, ODD, p)


def _schema(rng: random.Random) -> Any:
    return rng.choice([{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, {}, None,
                       {"type": "object", "additionalProperties": False}, "schema", [1]])  # fmt: skip


def _function(rng: random.Random) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": "function"}
    maybe(rng, tool, "name", _odd(rng, rng.choice(["get_weather", "f", ""])), 0.93)
    maybe(rng, tool, "parameters", _schema(rng), 0.85)
    maybe(rng, tool, "strict", rng.choice([True, False, None, "true", 1]), 0.75)
    maybe(rng, tool, "description", _odd(rng, rng.choice(["The weather.", "", None])), 0.6)
    maybe(rng, tool, "defer_loading", rng.choice([True, False, None, "no"]), 0.2)
    return tool


def _hosted(rng: random.Random) -> dict[str, Any]:
    """One of the SDK's other tools, some of its keys, now and then a wrong one."""
    kind = rng.choice(["web_search", "web_search_preview", "web_search_2025_08_26", "file_search", "mcp", "code_interpreter",
                       "image_generation", "local_shell", "shell", "custom", "computer_use_preview", "apply_patch"])  # fmt: skip
    tool: dict[str, Any] = {"type": kind}
    if kind.startswith("web_search"):
        maybe(rng, tool, "search_context_size", rng.choice(["low", "medium", "high", "huge"]), 0.4)
        maybe(rng, tool, "user_location", rng.choice([{"type": "approximate", "city": "Paris"}, {"city": "Paris"}, None, "here"]), 0.3)
        maybe(rng, tool, "filters", rng.choice([{"allowed_domains": ["a.org"]}, None, {"allowed_domains": "a.org"}]), 0.2)
    elif kind == "file_search":
        maybe(rng, tool, "vector_store_ids", rng.choice([["vs_1"], [], "vs_1", [1]]), 0.85)
        maybe(rng, tool, "max_num_results", _odd(rng, rng.choice([5, 50, "5"])), 0.3)
        maybe(rng, tool, "ranking_options", rng.choice([{"ranker": "auto", "score_threshold": 0.5}, {"ranker": "best"}, {}]), 0.2)
    elif kind == "mcp":
        maybe(rng, tool, "server_label", _odd(rng, "docs"), 0.9)
        maybe(rng, tool, "server_url", "http://x", 0.7)
        maybe(rng, tool, "connector_id", rng.choice(["connector_gmail", "connector_bogus"]), 0.15)
        maybe(rng, tool, "allowed_tools", rng.choice([["a"], {"tool_names": ["a"], "read_only": True}, None, "a"]), 0.3)
        maybe(rng, tool, "require_approval", rng.choice(["always", "never", {"never": {"tool_names": ["a"]}}, "sometimes", None]), 0.3)
        maybe(rng, tool, "headers", rng.choice([{"k": "v"}, {"k": 1}, None]), 0.2)
    elif kind == "code_interpreter":
        maybe(rng, tool, "container", rng.choice(["auto", {"type": "auto"}, {"type": "auto", "file_ids": ["f"]}, {"type": "x"}, 5]), 0.9)
    elif kind == "image_generation":
        for key, values in (("quality", ["low", "high", "best"]), ("size", ["1024x1024", "auto", "9x9"]), ("output_format", ["png", "gif"]),
                            ("background", ["transparent", "auto", "blue"]), ("partial_images", [0, 3, 9]), ("model", ["gpt-image-1", 5])):  # fmt: skip
            maybe(rng, tool, key, rng.choice(values), 0.25)
    elif kind == "custom":
        maybe(rng, tool, "name", _odd(rng, "grep"), 0.9)
        maybe(rng, tool, "description", "a tool", 0.4)
        maybe(rng, tool, "format", rng.choice([{"type": "text"}, {"type": "grammar", "syntax": "lark", "definition": "start: x"},
                                                {"type": "grammar", "syntax": "peg"}, {"type": "json"}]), 0.4)  # fmt: skip
    elif kind == "computer_use_preview":
        for key, value in (("display_width", 1024), ("display_height", 768), ("environment", rng.choice(["linux", "browser", "dos"]))):
            maybe(rng, tool, key, _odd(rng, value), 0.85)
    elif kind == "shell":
        maybe(rng, tool, "environment", rng.choice([{"type": "local"}, {"type": "container_auto"}, "local"]), 0.3)
    return tool


def _tool(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.03:
        return rng.choice(["get_weather", 1, None, []])
    tool = _function(rng) if roll < 0.6 else _hosted(rng)
    if rng.random() < 0.05:
        tool["type"] = rng.choice(["calculator", "", 5, None, "Function"])
    if rng.random() < 0.04:
        tool.pop("type")
    if rng.random() < 0.05:
        tool[rng.choice(["extra", "id", "status"])] = _odd(rng, 1, 0.3)
    return tool


def _tool_choice(rng: random.Random) -> Any:
    return rng.choice([
        "none", "auto", "required", "sometimes", None, 5,
        {"type": "function", "name": "get_weather"}, {"type": "function"}, {"type": "function", "name": 3},
        {"type": "allowed_tools", "mode": rng.choice(["auto", "required", "all"]), "tools": [{"type": "function", "name": "f"}]},
        {"type": rng.choice(["file_search", "web_search_preview", "computer_use_preview", "code_interpreter", "image_generation", "web_search"])},
        {"type": "mcp", "server_label": "docs"}, {"type": "mcp", "server_label": "docs", "name": "a"}, {"type": "custom", "name": "grep"},
        {"type": "apply_patch"}, {"type": "shell"}, {"type": "bogus"}, {},
    ])  # fmt: skip


def _reasoning(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return rng.choice([None, "high", 1, []])
    out: dict[str, Any] = {}
    maybe(rng, out, "effort", rng.choice(["none", "minimal", "low", "medium", "high", "xhigh", "extreme", None]), 0.8)
    maybe(rng, out, "summary", rng.choice(["auto", "concise", "detailed", "short", None]), 0.5)
    maybe(rng, out, "generate_summary", rng.choice(["auto", "concise", None, "x"]), 0.1)
    maybe(rng, out, rng.choice(["budget", "effort_level"]), 5, 0.05)
    return out


def _text(rng: random.Random) -> Any:
    if rng.random() < 0.08:
        return rng.choice([None, "json", 1, []])
    out: dict[str, Any] = {}
    formats = [{"type": "text"}, {"type": "json_object"}, {"type": "json_schema", "name": "out", "schema": {"type": "object"}},
               {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": rng.choice([True, None, "yes"]), "description": "d"},
               {"type": "json_schema", "schema": {}}, {"type": "json_schema", "name": "out"}, {"type": "yaml"}, {}]  # fmt: skip
    maybe(rng, out, "format", rng.choice(formats), 0.7)
    maybe(rng, out, "verbosity", rng.choice(["low", "medium", "high", "loud", None]), 0.4)
    return out


def _number(rng: random.Random, usual: float | int) -> Any:
    return rng.choice([usual, usual, str(usual), True, None, -1, 1e308, "high", 0])


def params_for(seed: int) -> Any:
    """Seed `seed`'s request parameters (deterministic): every other seed's with what the port
    refuses alone left out, so that one in two sets is mostly accepted (an odd value in any of
    a dozen fields refuses most sets whole, and a refusal compares only that both refuse)."""
    params = _drawn(seed)
    return _accepted_parts(params) if seed % 2 and isinstance(params, dict) else params


def _accepted_parts(params: dict[str, Any]) -> dict[str, Any]:
    """`params` without the fields, and tools, that the port refuses on their own."""
    out = {}
    for key, value in params.items():
        if key == "tools" and isinstance(value, list):
            value = [tool for tool in value if dumped({"input": "hi", "tools": [tool]}) is not None]
        if key == "input" or dumped({"input": "hi", key: value}) is not None:
            out[key] = value
    return out


def _drawn(seed: int) -> Any:
    rng = random.Random(seed)
    if rng.random() < 0.01:
        return rng.choice([None, "hi", [], 1])
    params: dict[str, Any] = {}
    maybe(rng, params, "input", _odd(rng, rng.choice(["hi", [{"role": "user", "content": "hi"}], []]), 0.03), 0.97)
    if rng.random() < 0.7:
        params["tools"] = _odd(rng, [_tool(rng) for _ in range(rng.choice([0, 1, 1, 2, 3]))], 0.03)
    maybe(rng, params, "tool_choice", _tool_choice(rng), 0.35)
    maybe(rng, params, "reasoning", _reasoning(rng), 0.3)
    maybe(rng, params, "text", _text(rng), 0.25)
    maybe(rng, params, "include", rng.choice([["reasoning.encrypted_content"], ["message.output_text.logprobs", "file_search_call.results"],
                                               ["everything"], [], "reasoning.encrypted_content", [None]]), 0.15)  # fmt: skip
    maybe(rng, params, "metadata", rng.choice([{"run": "a"}, {"run": 1}, {}, None, {"k": None}, {str(i): "v" for i in range(20)}, "m"]), 0.15)
    maybe(rng, params, "model", rng.choice(["gpt-4o", "my-finetune", "", 5, None, "o3-pro"]), 0.3)
    maybe(rng, params, "prompt", rng.choice([{"id": "pmpt_1"}, {"id": "pmpt_1", "version": "2", "variables": {"x": "y"}},
                                              {"id": "pmpt_1", "variables": {"x": {"type": "input_text", "text": "t"}}},
                                              {"id": "pmpt_1", "variables": {"x": 1}}, {"variables": {}}, "pmpt_1"]), 0.1)  # fmt: skip
    maybe(rng, params, "conversation", rng.choice(["conv_1", {"id": "conv_1"}, {}, 5, None]), 0.1)
    maybe(rng, params, "context_management", rng.choice([[{"type": "compaction", "compact_threshold": 1000}], [{"type": "compaction"}],
                                                          [{"type": "drop"}], [], {"type": "compaction"}]), 0.08)  # fmt: skip
    maybe(rng, params, "stream_options", rng.choice([{"include_obfuscation": False}, {}, {"include_usage": True}, None]), 0.08)
    for key, usual in (("temperature", 0.7), ("top_p", 0.9), ("max_output_tokens", 256), ("top_logprobs", 5), ("max_tool_calls", 3)):
        maybe(rng, params, key, _number(rng, usual), 0.15)
    for key, values in (("parallel_tool_calls", [True, False, None, "yes"]), ("truncation", ["auto", "disabled", "on"]),
                        ("service_tier", ["auto", "flex", "priority", "turbo"]), ("prompt_cache_retention", ["in_memory", "24h", "1h"]),
                        ("store", [True, None, "no"]), ("background", [False, 1]), ("safety_identifier", ["u1", 5]),
                        ("prompt_cache_key", ["k", None]), ("instructions", ["Be brief.", None, 3]), ("previous_response_id", ["resp_1", 2]),
                        ("moderation", [None, {"model": "m"}, "on"])):  # fmt: skip
        maybe(rng, params, key, rng.choice(values), 0.06)
    if rng.random() < 0.04:
        params[rng.choice(["seed", "stream", "user", "extra_body", "n"])] = _odd(rng, 1, 0.3)
    if rng.random() < 0.3:  # keys in another order
        keys = list(params)
        rng.shuffle(keys)
        params = {k: params[k] for k in keys}
    return params


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:1000", help="FIRST:STOP (default 0:1000)")
    parser.add_argument("--nemo-python", required=True, help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--keep", type=Path, help="write each differing case with both answers to DIR/differences.jsonl")
    args = parser.parse_args(argv)
    first, stop = (int(x) for x in args.seeds.split(":"))
    cases = [json.loads(json.dumps(params_for(seed))) for seed in range(first, stop)]  # (as both sides read them: from JSON)
    answers = nemo_answers(args.nemo_python, "make_nemo_request_reference", "nemo_dumped", cases)
    counts: Counter[str] = Counter()
    differences = []
    for seed, params, nemo in zip(range(first, stop), cases, answers):
        try:
            ours = dumped(params)
        except Exception as exc:  # a crash of ours (not a refusal) is a difference
            ours = f"RAISED {type(exc).__name__}: {exc}"
        if ours == nemo:
            counts["refused by both" if nemo is None else "the same dump"] += 1
            continue
        counts["differing"] += 1
        differences.append({"seed": seed, "params": params, "nemo_gym": nemo, "ours": ours})
        print(f"seed {seed}: {json.dumps(params)}\n  NeMo Gym: {nemo}\n  ours:     {ours}")
    if args.keep and differences:
        args.keep.mkdir(parents=True, exist_ok=True)
        (args.keep / "differences.jsonl").write_text("".join(json.dumps(d) + "\n" for d in differences))
    print(f"{stop - first} cases: " + ", ".join(f"{n} {what}" for what, n in counts.most_common()))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
