"""Record how NeMo Gym 0.7.0's `NeMoGymResponseCreateParamsNonStreaming` (the
`responses_create_params` of every verify and run request) takes a request's parameters, into
tests/data/nemo_gym_requests/cases.jsonl; tests/nemo_gym/test_request_params.py checks
gym-metrics' port of it against that.

A tool for producing test data, not part of gym-metrics: it imports nemo-gym (NOT a project
dependency, Python >= 3.13). Run it with a throwaway venv that has nemo-gym 0.7.0:

    /tmp/ngvenv/bin/python scripts/make_nemo_request_reference.py

Each line: {"case", "params", "dumped"}: `dumped` is the JSON text of `model_validate(params)
.model_dump(mode="json")` (its keys in NeMo Gym's order), null when NeMo Gym refuses them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_requests" / "cases.jsonl"
TOOL = {"type": "function", "name": "get_weather", "description": "The weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, "strict": False}  # fmt: skip

CASES: dict[str, Any] = {
    "text input": {"input": "hi"},
    "a tool, keys as the openai docs write them": {"input": "hi", "tools": [TOOL]},
    "a tool without description or strict": {"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {}}]},
    "a tool with a key no tool has": {"input": "hi", "tools": [{**TOOL, "extra": 1}]},
    "a tool without its name": {"input": "hi", "tools": [{"type": "function", "parameters": {}}]},
    "a tool of a type openai does not name": {"input": "hi", "tools": [{"type": "calculator", "name": "f"}]},
    "a tool without a type": {"input": "hi", "tools": [{"name": "f", "parameters": {}}]},
    "a tool whose type is not text": {"input": "hi", "tools": [{"type": 5, "name": "f"}]},
    "a replayed tool, defer_loading null": {"input": "hi", "tools": [{**TOOL, "defer_loading": None}]},
    "built-in tools": {"input": "hi", "tools": [{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["vs"]},
                                                {"type": "mcp", "server_label": "docs", "server_url": "http://x"}]},  # fmt: skip
    "tool_choice as a function": {"input": "hi", "tools": [TOOL], "tool_choice": {"type": "function", "name": "get_weather"}},
    "tool_choice required": {"input": "hi", "tool_choice": "required"},
    "tool_choice no option": {"input": "hi", "tool_choice": "sometimes"},
    "reasoning effort and summary": {"input": "hi", "reasoning": {"summary": "auto", "effort": "high"}},
    "reasoning with a key it has not": {"input": "hi", "reasoning": {"effort": "high", "budget": 5}},
    "reasoning effort no option": {"input": "hi", "reasoning": {"effort": "extreme"}},
    "text format json schema": {"input": "hi", "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}}},
    "text verbosity": {"input": "hi", "text": {"verbosity": "low"}},
    "include known": {"input": "hi", "include": ["reasoning.encrypted_content"]},
    "include unknown": {"input": "hi", "include": ["everything"]},
    "metadata of text": {"input": "hi", "metadata": {"run": "a"}},
    "metadata with a number": {"input": "hi", "metadata": {"run": 1}},
    "model not text": {"input": "hi", "model": 5},
    "a model openai does not list": {"input": "hi", "model": "my-finetune"},
    "prompt": {"input": "hi", "prompt": {"variables": {"x": "y"}, "id": "pmpt_1"}},
    "stream_options": {"input": "hi", "stream_options": {"include_obfuscation": False}},
    "conversation by id": {"input": "hi", "conversation": "conv_1"},
    "conversation as an object": {"input": "hi", "conversation": {"id": "conv_1"}},
    "context_management": {"input": "hi", "context_management": [{"type": "compaction", "compact_threshold": 1000}]},
    "temperature as text": {"input": "hi", "temperature": "0.5"},
    "a field the API has not": {"input": "hi", "seed": 3},
    "stream true": {"input": "hi", "stream": True},
}  # fmt: skip


def nemo_dumped(params: Any) -> Any:
    """The JSON text NeMo Gym's model dumps `params` as, or None when it refuses them."""
    from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming

    try:
        return json.dumps(NeMoGymResponseCreateParamsNonStreaming.model_validate(params).model_dump(mode="json"))
    except Exception:
        return None


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"case": case, "params": params, "dumped": nemo_dumped(params)}) + "\n" for case, params in CASES.items()]
    OUT.write_text("".join(lines))
    print(f"{len(lines)} cases written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
