"""Record how NeMo Gym 0.7.0's Chat Completions models validate and dump (its
`nemo_gym.openai_utils`: `NeMoGymChatCompletionCreateParamsNonStreaming`, `NeMoGymChatCompletion`),
for tests/nemo_gym/test_chat_types.py, which validates the same inputs with
gym_metrics.nemo_gym.openai_utils and compares.

A tool for producing test data, run in a throwaway nemo-gym venv:

    /tmp/ngvenv/bin/python scripts/make_nemo_chat_types_reference.py            # write
    /tmp/ngvenv/bin/python scripts/make_nemo_chat_types_reference.py --check    # compare (exit 1 on a difference)

Each request of REQUESTS and completion of COMPLETIONS is kept with either its dumps
(`model_dump(mode="json")` and with `exclude_unset=True`; for a completion, each choice's
message class name too) or, refused, the sorted (location, error type) pairs of its errors.
Written to tests/data/nemo_gym_chat/types.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from reference_file import write_or_check  # scripts/

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_chat" / "types.json"

CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "a"}'}}
TOKENS = {"prompt_token_ids": [1, 2], "generation_token_ids": [3], "generation_log_probs": [-0.25]}
REQUESTS: dict[str, dict[str, Any]] = {
    "a user message": {"messages": [{"role": "user", "content": "hi"}]},
    "a key no message declares": {"messages": [{"role": "user", "content": "hi", "extra": 1}]},
    "an unknown request field": {"messages": [], "bogus": 1},
    "a function message (deprecated)": {"messages": [{"role": "function", "content": "a", "name": "f"}]},
    "an unknown role": {"messages": [{"role": "critic", "content": "a"}]},
    "a tool call with an outer name": {"messages": [{"role": "assistant", "content": None, "tool_calls": [{**CALL, "name": "lookup"}]}]},
    "a custom tool call": {"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "g", "input": "i"}}]}]},
    "an assistant turn with its token IDs": {"messages": [{"role": "assistant", "content": "a", **TOKENS}]},
    "token IDs with routed experts as text": {"messages": [{"role": "assistant", "content": "a", **TOKENS, "routed_experts": "nrlre1:x"}]},
    "token IDs, one missing": {"messages": [{"role": "assistant", "content": "a", "prompt_token_ids": [1]}]},
    "token IDs of the wrong type": {"messages": [{"role": "assistant", "content": "a", **TOKENS, "generation_log_probs": ["x"]}]},
    "reasoning replayed and a tool result": {
        "messages": [{"role": "assistant", "content": "x", "reasoning_content": "why"}, {"role": "tool", "content": "r", "tool_call_id": "call_1"}],
        "tool_choice": "auto", "response_format": {"type": "json_object"},
    },
    "part lists: text, image, audio of any format, file, video": {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "s"}]},
            {"role": "developer", "content": "d"},
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA==", "detail": "low"}},
                {"type": "input_audio", "input_audio": {"data": "AA==", "format": "flac"}},
                {"type": "file", "file": {"file_id": "f1"}},
                {"type": "video_url", "video_url": "https://v/1.mp4"},
            ]},
        ],
    },
    "a part of an unknown type": {"messages": [{"role": "user", "content": [{"type": "hologram", "data": 1}]}]},
    "every sampling field": {
        "messages": [{"role": "user", "content": "hi"}], "model": "m", "temperature": 0.5, "top_p": 0.9, "max_tokens": 8,
        "max_completion_tokens": 9, "n": 2, "seed": 3, "stop": ["x"], "logprobs": True, "top_logprobs": 2,
        "logit_bias": {"1": -1}, "presence_penalty": 0.1, "frequency_penalty": 0.2, "parallel_tool_calls": False,
        "reasoning_effort": "low", "service_tier": "auto", "verbosity": "low", "metadata": {"a": "b"},
        "moderation": {"model": "omni"}, "store": False, "user": "u", "stream": False, "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"enable_thinking": False}, "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"},
    },
    "function and custom tools": {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True}},
            {"type": "custom", "custom": {"name": "g"}},
        ],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
    },
    "a tool without a type": {"messages": [{"role": "user", "content": "hi"}], "tools": [{"function": {"name": "f"}}]},
    "a streaming request": {"messages": [{"role": "user", "content": "hi"}], "stream": True},
    "a mistyped temperature": {"messages": [{"role": "user", "content": "hi"}], "temperature": "0.7"},
}

CHOICE = {"index": 0, "finish_reason": "stop", "logprobs": None}
COMPLETIONS: dict[str, dict[str, Any]] = {
    "text, a function call and a custom call": {"choices": [{**CHOICE, "message": {"role": "assistant", "content": "x", "tool_calls": [
        CALL, {"id": "c", "type": "custom", "custom": {"name": "g", "input": "i"}}]}}]},
    "a message with its token IDs": {"choices": [{**CHOICE, "message": {"role": "assistant", "content": "y", **TOKENS}}]},
    "a message with one token field": {"choices": [{**CHOICE, "message": {"role": "assistant", "content": "y", "generation_token_ids": [1]}}]},
    "a provider's extra message keys": {"choices": [{**CHOICE, "message": {"role": "assistant", "content": "z", "reasoning_content": "r"}}]},
    "a tool call of an unknown type": {"choices": [{**CHOICE, "message": {"role": "assistant", "tool_calls": [{"id": "q", "type": "query", "query": {}}]}}]},
    "several choices and usage": {
        "choices": [{**CHOICE, "message": {"role": "assistant", "content": "a"}}, {**CHOICE, "index": 1, "finish_reason": "length", "message": {"role": "assistant", "content": "b"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    },
}  # fmt: skip


def errors_of(error: Exception) -> Any:
    """A refusal as data: sorted (location, error type) pairs, or the exception's type."""
    if hasattr(error, "errors"):
        return sorted({json.dumps([list(e["loc"]), e["type"]]) for e in error.errors()})
    return type(error).__name__


def validated(model: Any, value: dict[str, Any]) -> dict[str, Any]:
    """The input with what the model makes of it (the test compares all but the input)."""
    try:
        made = model.model_validate(value)
    except Exception as error:  # noqa: BLE001: a refusal is the recorded outcome
        return {"input": value, "refused": errors_of(error)}
    out = {"input": value, "dump": made.model_dump(mode="json"), "dump_set": made.model_dump(mode="json", exclude_unset=True)}
    if hasattr(made, "choices"):
        out["message_types"] = [type(choice.message).__name__ for choice in made.choices]
    return out


def record(request_model: Any, completion_model: Any) -> dict[str, Any]:
    head = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m"}
    return {
        "requests": {name: validated(request_model, value) for name, value in REQUESTS.items()},
        "completions": {name: validated(completion_model, {**head, **value}) for name, value in COMPLETIONS.items()},
    }


def main() -> int:
    from nemo_gym.openai_utils import NeMoGymChatCompletion, NeMoGymChatCompletionCreateParamsNonStreaming

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    data = {"nemo_gym": "0.7.0", **record(NeMoGymChatCompletionCreateParamsNonStreaming, NeMoGymChatCompletion)}
    return write_or_check(OUT, json.dumps(data, indent=1, ensure_ascii=False) + "\n", args.check)


if __name__ == "__main__":
    sys.exit(main())
