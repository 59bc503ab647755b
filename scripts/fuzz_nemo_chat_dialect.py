"""Differential test of the chat dialect (gym_metrics/targets/_chat_dialect.py) against NeMo Gym
0.7.0's `ResponsesConverter` on random inputs: each seed makes one Responses request (input as a
string or items of every kind: messages of every role with string or part-list content, images,
videos, refusals, unknown parts, reasoning, function calls and outputs with odd ids and
arguments; tools of every shape, tool_choice, instructions, sampling fields, metadata with
extra_body / chat_template_kwargs, mistyped and null values) and one chat completion (text with
`<think>` blocks, tool calls, reasoning_content, refusals, finish reasons, usage shapes, several
choices, nulls). Three things are compared, as tests/targets/test_chat_dialect.py compares them:

- chat: `responses_request_to_chat(request)` against NeMo Gym's converted body
  (scripts/make_nemo_chat_reference.py `chat_body`); both refusing is agreement;
- vllm: `ModelTarget.request_body(request)` (api chat, model "m", token IDs asked for, as collect
  asks a vLLM policy) against NeMo Gym's vLLM model server's body (`vllm_body`, the server
  asking for token IDs); NeMo Gym raising must be our GenerationError;
- answer: `with_request_fields(chat_to_responses(completion), request)` against
  `chat_completion_to_response` (`answer_response`, after the vLLM server puts a reasoning
  parser's `reasoning_content` into `<think>` tags), None fields and uuid ids left out.

    .venv/bin/python scripts/fuzz_nemo_chat_dialect.py --seeds 0:2000 --nemo-python /tmp/ngvenv/bin/python [--keep DIR]

Counted apart, not as differences: inputs out of NeMo Gym's schema (its own validation of the
request or the completion refuses them), values its validation coerces ("0.7" to 0.7, True to
1), and a chat-shaped assistant message with content and tool_calls, whose calls NeMo Gym drops
(its fault; ours sends them).

Exit 0 when nothing differs; 1 otherwise (DIR gets each differing seed's input and both answers).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ODD: list[Any] = [None, "", 0, 1.5, True, [], {}, "ü\u2028x", 2**64, float("nan")]


def _pick(rng: random.Random, usual: list[Any], odd: float = 0.04) -> Any:
    return rng.choice(ODD) if rng.random() < odd else rng.choice(usual)


def _part(rng: random.Random) -> Any:
    kind = _pick(rng, ["input_text"] * 6 + ["output_text", "output_text", "input_image", "input_image", "input_video", "refusal", "input_file", "summary_text", "blob"], 0.01)
    part: dict[str, Any] = {"type": kind}
    if kind in ("input_text", "output_text", "summary_text") or rng.random() < 0.1:
        part["text"] = _pick(rng, ["hi", "<think>t</think>x", "", "Ünï"])
    if kind == "input_image":
        url = _pick(rng, ["data:image/png;base64,iVBO", "https://x/a.png", ""])
        part["image_url" if rng.random() < 0.85 else "file_id"] = {"url": url} if rng.random() < 0.2 else url
        if rng.random() < 0.7:
            part["detail"] = _pick(rng, ["auto", "high", "low", "original"])
    if kind == "input_video":
        part[rng.choice(["video_url", "video"])] = _pick(rng, ["https://x/v.mp4", {"url": "https://x/w.mp4"}, ""])
    if kind == "refusal" or rng.random() < 0.05:
        part["refusal"] = _pick(rng, ["no", ""])
    if kind == "output_text" and rng.random() < 0.5:
        part["annotations"] = []
    return part if rng.random() > 0.01 else rng.choice(["bare", 3])


def _content(rng: random.Random) -> Any:
    return _pick(rng, [_pick(rng, ["Hi", "", "<think>a</think>b"]), [_part(rng) for _ in range(rng.randint(0, 3))]] * 4 + [None])


def _call(rng: random.Random) -> dict[str, Any]:
    args = _pick(rng, ['{"k": 1}', "{}", "not json", {"k": 1}])
    return {"id": _pick(rng, ["call_1", "c 2"]), "type": "function", "function": {"name": _pick(rng, ["lookup", ""]), "arguments": args}}


def _item(rng: random.Random) -> Any:
    kind = rng.choice(["message"] * 8 + ["reasoning", "reasoning", "function_call", "function_call", "function_call_output", "function_call_output", "odd"])
    if kind == "message":
        item: dict[str, Any] = {"role": _pick(rng, ["user", "user", "assistant", "assistant", "system", "developer", "tool", "critic"], 0.02)}
        if rng.random() < 0.9:
            item["content"] = _content(rng)
        if rng.random() < 0.5:
            item["type"] = "message"
        if item["role"] == "assistant" and rng.random() < 0.2:
            item["tool_calls"] = [_call(rng) for _ in range(rng.randint(0, 2))]
        if item["role"] == "tool" and rng.random() < 0.9:
            item["tool_call_id"] = _pick(rng, ["call_1", ""])
        for key, values in (("id", ["msg_1", ""]), ("status", ["completed", "in_progress"]), ("phase", ["final_answer", None])):
            if rng.random() < 0.15:
                item[key] = _pick(rng, values)
        return item
    if kind == "reasoning":
        item = {"type": "reasoning", "id": _pick(rng, ["rs_1", "", "x"])}
        if rng.random() < 0.9:
            item["summary"] = _pick(rng, [[{"type": "summary_text", "text": _pick(rng, ["why", "", "a</think>b"])} for _ in range(rng.randint(0, 3))]])
        if rng.random() < 0.2:
            item[rng.choice(["content", "encrypted_content", "status"])] = _pick(rng, [[{"type": "reasoning_text", "text": "r"}], "blob", "completed"])
        return item
    if kind == "function_call":
        item = {"type": "function_call", "call_id": _pick(rng, ["call_1", "call_2", ""]), "name": _pick(rng, ["lookup", "x.y"]),
                "arguments": _pick(rng, ['{"k": "a"}', "", "{bad"])}  # fmt: skip
        for key, values in (("id", ["fc_1", ""]), ("status", ["completed", "incomplete"]), ("namespace", ["ns", None])):
            if rng.random() < 0.15:
                item[key] = _pick(rng, values)
        if rng.random() < 0.05:
            del item[rng.choice(["call_id", "name", "arguments"])]
        return item
    if kind == "function_call_output":
        output = _pick(rng, [_pick(rng, ['{"a":1}', ""]), [_part(rng) for _ in range(rng.randint(0, 2))]])
        item = {"type": "function_call_output", "call_id": _pick(rng, ["call_1", ""]), "output": output}
        if rng.random() < 0.15:
            item[rng.choice(["id", "status"])] = _pick(rng, ["fco_1", "completed"])
        return item
    return rng.choice([{"type": rng.choice(["web_search_call", "item_reference", "custom_tool_call", "compaction"]), "id": "x"}, "Hi", 7, {"content": "no role"}])


def _tool(rng: random.Random) -> Any:
    kind = rng.choice(["function"] * 5 + ["custom", "custom", "chat", "web_search", "mcp", "none"])
    if kind == "function":
        tool: dict[str, Any] = {"type": "function", "name": _pick(rng, ["lookup", "other"], 0.05)}
        for key, values in (("parameters", [{"type": "object"}, None]), ("strict", [True, False, None]), ("description", ["d", None]), ("defer_loading", [False, True, None])):
            if rng.random() < 0.5:
                tool[key] = _pick(rng, values, 0.05)
        return tool
    if kind == "custom":
        tool = {"type": "custom", "name": "patch"}
        if rng.random() < 0.6:
            tool["format"] = rng.choice([{"type": "text"}, {"type": "grammar", "syntax": "lark", "definition": "start: /x/"}, None])
        if rng.random() < 0.3:
            tool["description"] = _pick(rng, ["a patch", None])
        return tool
    if kind == "chat":
        return {"type": "function", "function": {"name": "lookup", **({"strict": True} if rng.random() < 0.5 else {})}}
    if kind == "none":
        return rng.choice([{"name": "typeless"}, "lookup", None])
    return {"type": kind, **({"server_label": "s"} if kind == "mcp" else {})}


def _tool_choice(rng: random.Random) -> Any:
    ref = rng.choice([{"type": "function", "name": "lookup"}, {"type": "custom", "name": "patch"}, {"type": "mcp", "server_label": "s"}])
    return _pick(rng, ["auto", "none", "required", "any", {"type": "function", "name": "lookup"}, {"type": "web_search_preview"}, {"type": "custom", "name": "patch"},
                       {"type": "allowed_tools", "mode": _pick(rng, ["auto", "required"]), "tools": [ref]}])  # fmt: skip


def _json_text(rng: random.Random, value: str) -> Any:
    return _pick(rng, [value, "{}", "{not json", "[1]"])


def request_for(rng: random.Random) -> dict[str, Any]:
    request: dict[str, Any] = {}
    shape = rng.random()
    if shape < 0.2:
        request["input"] = _pick(rng, ["What is a?", "", "Ünï"])
    elif shape < 0.97:
        request["input"] = [_item(rng) for _ in range(rng.randint(0, 6))]
    fields: dict[str, Any] = {
        "instructions": lambda: _pick(rng, ["Be brief.", ""]), "temperature": lambda: _pick(rng, [0.5, 1, 0.0, "0.7"]),
        "top_p": lambda: _pick(rng, [0.9, 1]), "max_output_tokens": lambda: _pick(rng, [64, 0, -1, 8.0]),
        "tools": lambda: [_tool(rng) for _ in range(rng.randint(0, 3))], "tool_choice": lambda: _tool_choice(rng),
        "parallel_tool_calls": lambda: _pick(rng, [True, False]), "model": lambda: _pick(rng, ["policy", ""]),
        "reasoning": lambda: _pick(rng, [{"effort": "low"}, {"effort": None}, {"summary": "auto"}, {"effort": "high", "summary": None}, "high"]),
        "text": lambda: _pick(rng, [{"format": {"type": "json_object"}}, {"verbosity": "low"}, {"format": {"type": "text"}},
                                    {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}, "strict": None}}, {"format": {"type": "grammar"}}]),
        "metadata": lambda: {k: v for k, v in (("extra_body", _json_text(rng, '{"seed": 3, "temperature": 0.1}')),
                                               ("chat_template_kwargs", _json_text(rng, '{"enable_thinking": false}')), ("tag", "x")) if rng.random() < 0.5},
        "user": lambda: "u1", "store": lambda: _pick(rng, [False, True]), "top_logprobs": lambda: _pick(rng, [0, 5]),
        "previous_response_id": lambda: "resp_0", "truncation": lambda: _pick(rng, ["disabled", "auto"]), "service_tier": lambda: "auto",
        "stream": lambda: False, "prompt_cache_key": lambda: "k", "include": lambda: [],
    }  # fmt: skip
    for key in rng.sample(sorted(fields), rng.randint(0, 7)):
        if key not in ("previous_response_id", "truncation", "include", "seed") or rng.random() < 0.2:
            request[key] = fields[key]()
    return request


def completion_for(rng: random.Random) -> dict[str, Any]:
    def message() -> dict[str, Any]:
        out: dict[str, Any] = {"role": _pick(rng, ["assistant"], 0.05), "content": _pick(rng, ["The answer is 4.", "", "<think>a</think>b<think>c</think>", None, "<think>open"])}
        for key, values in (("tool_calls", [[_call(rng) for _ in range(rng.randint(0, 2))], None]), ("refusal", ["I can't.", "", None]),
                            ("reasoning_content", ["Thinking.", "", None]), ("reasoning", ["R.", None])):  # fmt: skip
            if rng.random() < 0.3:
                out[key] = _pick(rng, values, 0.0 if key.startswith("reasoning") else 0.05)
        return out

    usage = {"prompt_tokens": _pick(rng, [11, 0, -1]), "completion_tokens": _pick(rng, [7, 0]), "total_tokens": _pick(rng, [18, 20])}
    for key, value in (("prompt_tokens_details", {"cached_tokens": _pick(rng, [3, None, -2])}), ("completion_tokens_details", {"reasoning_tokens": _pick(rng, [2, None])}),
                       ("cached_input_tokens", 4), ("cache_read_input_tokens", 5), ("reasoning_output_tokens", 6)):  # fmt: skip
        if rng.random() < 0.3:
            usage[key] = value
    choices = [{"index": i, "message": message(), "finish_reason": _pick(rng, ["stop", "length", "tool_calls", "content_filter", "function_call"], 0.05)} for i in range(rng.randint(1, 2))]
    return {"id": _pick(rng, ["chatcmpl-1", ""], 0.02), "object": "chat.completion", "created": _pick(rng, [1700000000, 1.5], 0.02),
            "model": "served", "choices": choices, "usage": rng.choice([usage, usage, None])}  # fmt: skip


def nemo_side(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """NeMo Gym's three answers per case (run in the nemo-gym venv)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_nemo_chat_reference as ref
    from nemo_gym.responses_converter import ResponsesConverter  # type: ignore[import-not-found]

    converter, server, out = ResponsesConverter(return_token_id_information=False), ref.vllm_server(token_ids=True), []
    for case in cases:
        results: dict[str, Any] = {"chat": ref.chat_body(converter, case["request"])}
        for name, call in (("vllm", lambda: {"body": ref.vllm_body(server, json.loads(json.dumps(case["request"])))}), ("answer", lambda: answer(case))):
            try:
                results[name] = call()
            except Exception as exc:  # noqa: BLE001
                results[name] = {"error": type(exc).__name__, "message": str(exc)[:300]}
        out.append(results)
    return out


def answer(case: dict[str, Any]) -> dict[str, Any]:
    """NeMo Gym's vLLM server's answer: a parser's reasoning into `<think>` tags, then the converter."""
    import make_nemo_chat_reference as ref
    from nemo_gym.responses_converter import ResponsesConverter

    from nemo_gym.openai_utils import NeMoGymChatCompletion  # type: ignore[import-not-found]

    completion = json.loads(json.dumps(case["completion"]))
    NeMoGymChatCompletion(**completion)  # its check of the engine's answer (a ValidationError): first here
    message = completion["choices"][0]["message"]
    thought = message.get("reasoning_content") or message.get("reasoning")
    if thought:
        message.pop("reasoning_content", None), message.pop("reasoning", None)
        message["content"] = f"<think>{thought}</think>" + (message.get("content") or "")
    return {"response": ref.answer_response(ResponsesConverter(return_token_id_information=False), {**case["request"], "model": "m"}, completion)}


def ours(case: dict[str, Any]) -> dict[str, Any]:
    """Our three answers, shaped as `nemo_side`'s ("error" when we refuse; "crash" when we raise
    what is no row failure)."""
    sys.path.insert(0, str(ROOT / "tests" / "targets"))
    from test_chat_dialect import _shown  # type: ignore[import-not-found]

    from gym_metrics.targets import ChatConversionError, GenerationError, ModelTarget, ModelTargetConfig, chat_to_responses, parse_target, responses_request_to_chat
    from gym_metrics.targets._client import _sent
    from gym_metrics.targets._convert import with_request_fields

    config = parse_target({"type": "model", "url": "http://127.0.0.1:9/v1", "model": "m", "api": "chat"})
    assert isinstance(config, ModelTargetConfig)
    target = ModelTarget(config, think_tags=True, token_ids=True)  # as collect makes it for a vLLM policy
    out: dict[str, Any] = {}
    for name, refusal in (("chat", ChatConversionError), ("vllm", GenerationError), ("answer", (GenerationError, KeyError, IndexError, TypeError, AttributeError))):
        try:
            if name == "chat":
                out[name] = {"chat": responses_request_to_chat(json.loads(json.dumps(case["request"])))}
            elif name == "vllm":
                out[name] = {"body": target.request_body(json.loads(json.dumps(case["request"])))}
            else:
                request = json.loads(json.dumps(case["request"]))
                target.request_body(request)  # a refused request has no answer
                response = with_request_fields(chat_to_responses(case["completion"], target.think_tags), _sent(request, target._own_body(request)))
                for item in response["output"]:
                    if item["type"] in ("message", "reasoning"):
                        del item["id"]
                out[name] = {"response": _shown({k: v for k, v in response.items() if k != "id"})}
        except refusal as exc:
            out[name] = {"error": type(exc).__name__, "message": str(exc)}
        except Exception as exc:  # noqa: BLE001
            out[name] = {"crash": f"{type(exc).__name__}: {exc}"}
    return out


def same(a: Any, b: Any) -> bool:
    """Equal as JSON values: 1 and 1.0 alike, a bool never a number, NaN equal to NaN."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


SCHEMA = ("for NeMoGymResponseCreateParamsNonStreaming", "for NeMoGymChatCompletion\n")
"""NeMo Gym's own validation of its input (the Responses request, the chat completion): a
shape out of its schema, counted apart."""


def lax(theirs: Any, mine: Any) -> bool:
    """Equal once ours is read as NeMo Gym's validation coerces it into a number or bool ("0.7"
    to 0.7, 8.0 to 8, True to 1, 0 to False); the engine's own validation does the same with ours."""
    if isinstance(theirs, dict) and isinstance(mine, dict):
        return theirs.keys() == mine.keys() and all(lax(theirs[k], mine[k]) for k in theirs)
    if isinstance(theirs, list) and isinstance(mine, list):
        return len(theirs) == len(mine) and all(lax(x, y) for x, y in zip(theirs, mine))
    if isinstance(theirs, bool) and type(mine) is int:
        return mine == theirs
    if isinstance(theirs, (int, float)) and not isinstance(theirs, bool) and isinstance(mine, (str, bool, float)):
        try:
            return float(mine) == theirs
        except ValueError:
            return False
    return same(theirs, mine)


def _drops_calls(request: dict[str, Any]) -> bool:
    """A chat-shaped assistant message with content and tool_calls: NeMo Gym's request check
    reads it as an EasyInputMessage and drops its tool_calls (ours sends them)."""
    items = request.get("input")
    return any(isinstance(i, dict) and i.get("role") == "assistant" and i.get("tool_calls") and isinstance(i.get("content"), (str, list))
               for i in (items if isinstance(items, list) else ()))  # fmt: skip


def verdict(theirs: dict[str, Any], mine: dict[str, Any], request: dict[str, Any]) -> str:
    if "crash" in mine:
        return "DIFF: ours crashed"
    if "error" in theirs and any(s in theirs.get("message", "") for s in SCHEMA):
        return "out of NeMo Gym's schema, " + ("both refuse" if "error" in mine else "ours converts")
    if "error" in theirs:
        return "both refuse" if "error" in mine else "DIFF: NeMo Gym refuses, ours converts"
    if ("error" in mine or not same(theirs, mine)) and _drops_calls(request):
        return "known: NeMo Gym drops the tool_calls of an assistant message with content"
    if "error" in mine:
        return "DIFF: ours refuses, NeMo Gym converts"
    if same(theirs, mine):
        return "same"
    return "known: NeMo Gym coerces a scalar (numeric text, bool, integral float, 0/1)" if lax(theirs, mine) else "DIFF: values differ"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:500", help="FIRST:STOP (default 0:500)")
    parser.add_argument("--nemo-python", help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--keep", type=Path, help="write each differing seed's input and both answers here")
    parser.add_argument("--nemo-side", action="store_true", help=argparse.SUPPRESS)  # the nemo-gym venv's half
    args = parser.parse_args(argv)
    if args.nemo_side:
        json.dump(nemo_side(json.load(sys.stdin)), sys.stdout)
        return 0
    if not args.nemo_python:
        parser.error("--nemo-python is required")
    first, stop = (int(x) for x in args.seeds.split(":"))
    cases = []
    for seed in range(first, stop):
        rng = random.Random(seed)
        cases.append({"seed": seed, "request": request_for(rng), "completion": completion_for(rng)})
    made = subprocess.run([args.nemo_python, __file__, "--nemo-side"], input=json.dumps(cases), capture_output=True, text=True, check=True)
    tally: Counter[str] = Counter()
    differing = 0
    for case, theirs in zip(cases, json.loads(made.stdout)):
        request: dict[str, Any] = case["request"]  # type: ignore[assignment]
        mine = ours(case)
        if "error" in theirs["vllm"]:  # the server refuses the request: no answer to convert
            theirs["answer"] = mine["answer"] = {"error": "request refused"} if "error" in mine["vllm"] else mine["answer"]
        if "response" in theirs["answer"]:
            theirs["answer"] = {"response": _shown_nemo(theirs["answer"]["response"])}
        found = {}
        for name in ("chat", "vllm", "answer"):
            said = verdict(theirs[name], mine[name], request)
            tally[f"{name}: {said}"] += 1
            if said.startswith("DIFF"):
                found[name] = {"verdict": said, "nemo_gym": theirs[name], "ours": mine[name]}
        if found:
            differing += 1
            print(f"seed {case['seed']}: " + "; ".join(f"{k}: {v['verdict']}" for k, v in found.items()))
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"seed_{case['seed']}.json").write_text(json.dumps({**case, "differences": found}, indent=1, ensure_ascii=False) + "\n")
    for key, count in sorted(tally.items()):
        print(f"{count:6d}  {key}")
    print(f"{len(cases)} seeds: {len(cases) - differing} agree with NeMo Gym, {differing} differ")
    return 1 if differing else 0


def _shown_nemo(response: dict[str, Any]) -> Any:
    sys.path.insert(0, str(ROOT / "tests" / "targets"))
    from test_chat_dialect import _shown

    return _shown({k: v for k, v in response.items() if k != "id"})


if __name__ == "__main__":
    sys.exit(main())
