"""Record how NeMo Gym 0.7.0 converts between the Responses and Chat Completions dialects (its
`nemo_gym.responses_converter.ResponsesConverter`, as a model server that speaks chat uses it),
for tests/targets/test_chat_dialect.py.

A tool for producing test data, run in a throwaway nemo-gym venv:

    /tmp/ngvenv/bin/python scripts/make_nemo_chat_reference.py            # write
    /tmp/ngvenv/bin/python scripts/make_nemo_chat_reference.py --check    # compare (exit 1 on a difference)

- requests: each Responses request of REQUESTS through
  `responses_to_chat_completion_create_params(NeMoGymResponseCreateParamsNonStreaming(**request))`,
  dumped `model_dump(mode="json", exclude_unset=True)` (the chat body); or the error it raises
  (its type and message);
- vllm: each Responses request of METADATA_REQUESTS as NeMo Gym's vLLM model server sends it
  to the engine (its converter, then `_preprocess_chat_completion_create_params`: the request's
  `metadata.extra_body` and `metadata.chat_template_kwargs` applied), model "m";
- answers: each chat completion of ANSWERS through `chat_completion_to_response(request,
  NeMoGymChatCompletion(**completion))`, dumped `model_dump(mode="json", by_alias=True)`, with the ids NeMo Gym
  makes from uuid4 (`resp_`, `msg_`, `rs_`) replaced by "<id>".

Written to tests/data/nemo_gym_chat/conversions.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from reference_file import write_or_check  # scripts/

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_chat" / "conversions.json"

TOOL = {"type": "function", "name": "lookup", "description": "A value by key.", "strict": None,
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}}}  # fmt: skip
IMAGE = "data:image/png;base64,iVBORw0KGgo="

REQUESTS: dict[str, dict[str, Any]] = {
    "string input, tools, instructions": {
        "input": "What is a?", "instructions": "Be brief.", "tools": [TOOL], "tool_choice": "auto",
        "max_output_tokens": 64, "temperature": 0.5, "parallel_tool_calls": False,
    },
    "images and the leading system messages folded": {
        "instructions": "Rules.",
        "input": [
            {"role": "system", "content": "System one."},
            {"role": "developer", "content": [{"type": "input_text", "text": "Developer two."}]},
            {"role": "user", "content": [
                {"type": "input_text", "text": "What is in these?"},
                {"type": "input_image", "image_url": IMAGE, "detail": "auto"},
                {"type": "input_image", "image_url": IMAGE, "detail": "high"},
            ]},
        ],
    },
    "a developer message without instructions": {"input": [{"role": "developer", "content": "Dev."}, {"role": "user", "content": "Hi"}]},
    "one assistant turn: reasoning, text and two calls": {
        "tools": [TOOL],
        "input": [
            {"role": "user", "content": "Look up a and b."},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two lookups."}, {"type": "summary_text", "text": ""}]},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Looking up.", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": "{\"key\": \"a\"}", "status": "completed"},
            {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "lookup", "arguments": "{\"key\": \"b\"}", "status": "completed"},
            {"type": "function_call_output", "call_id": "call_1", "output": "{\"a\":1}"},
            {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "no key b"}]},
            {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "a is 1.", "annotations": []}]},
            {"role": "user", "content": "Thanks."},
        ],
    },
    "a refusal and chat-shaped turns": {
        "tools": [TOOL],
        "input": [
            {"role": "user", "content": "Do something bad."},
            {"type": "message", "id": "msg_3", "role": "assistant", "status": "completed",
             "content": [{"type": "refusal", "refusal": "I can't."}]},
            {"role": "user", "content": "Then look up a."},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "lookup", "arguments": "{\"key\":\"a\"}"}}]},
            {"role": "tool", "tool_call_id": "call_9", "content": "{\"a\":1}"},
        ],
    },
    "no tools: tool_choice and parallel_tool_calls dropped": {"input": "Hi", "tool_choice": "auto", "parallel_tool_calls": True},
    "a named tool, effort and a JSON schema": {
        "input": "Hi", "tools": [TOOL], "tool_choice": {"type": "function", "name": "lookup"},
        "reasoning": {"effort": "low"},
        "text": {"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": True}},
    },
    "assistant text given as strings, and a tool answer of parts": {
        "input": [
            {"role": "user", "content": "Look up a."},
            {"role": "assistant", "content": "Looking"},
            {"type": "message", "role": "assistant", "content": " up."},
            {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{\"key\":\"a\"}"},
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "input_text", "text": "1"}]},
        ],
    },
    "videos by video_url and by video": {"input": [{"role": "user", "content": [
        {"type": "input_video", "video_url": "https://example.com/a.mp4"},
        {"type": "input_video", "video_url": {"url": "https://example.com/b.mp4"}},
        {"type": "input_video", "video": "https://example.com/c.mp4"},
    ]}]},
    "reasoning without effort": {"input": "Hi", "reasoning": {"effort": None, "summary": None}},
    "text: verbosity alone": {"input": "Hi", "text": {"verbosity": "low"}},
    "text: a JSON object": {"input": "Hi", "text": {"format": {"type": "json_object"}}},
    "text: plain text and verbosity": {"input": "Hi", "text": {"format": {"type": "text"}, "verbosity": "high"}},
    "allowed tools, a custom tool with a grammar": {
        "input": "Hi",
        "tools": [TOOL, {**TOOL, "name": "other", "defer_loading": False},
                  {"type": "custom", "name": "patch", "description": "A patch.", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /x+/"}},
                  {"type": "custom", "name": "note", "format": {"type": "text"}}, {"type": "custom", "name": "plain"}],
        "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "lookup"}, {"type": "custom", "name": "patch"}]},
    },
    "a leading developer message without content, folded into instructions": {"instructions": "Rules.", "input": [{"role": "developer", "content": None}, {"role": "user", "content": "Hi"}]},
    "an assistant input_text part's refusal is not read": {"input": [{"role": "assistant", "content": [{"type": "input_text", "text": "x", "refusal": "y"}]}]},
    "a user message of parts with a status: its phase dropped": {"input": [{"type": "message", "role": "user", "status": "completed", "phase": "final_answer",
                                                                              "content": [{"type": "input_text", "text": "Hi"}]}]},  # fmt: skip
    "error: a developer message's video": {"input": [{"role": "developer", "content": [{"type": "input_video", "video_url": "https://example.com/a.mp4"}]}, {"role": "user", "content": "Hi"}]},
    "error: a tool message's image": {"input": [{"role": "tool", "tool_call_id": "call_1", "content": [{"type": "input_image", "image_url": IMAGE}]}]},
    "error: a user message without content": {"input": [{"role": "user"}]},
    "error: an assistant part of a file": {"input": [{"role": "assistant", "content": [{"type": "input_file", "text": "x"}]}]},
    "error: a chat-shaped call's arguments as an object": {"input": [{"role": "assistant", "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": {"key": "a"}}}]}]},  # fmt: skip
    "error: previous_response_id": {"input": "Hi", "previous_response_id": "resp_0"},
    "error: an image by file id": {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file_1", "detail": "auto"}]}]},
    "error: a hosted tool's item": {"input": [{"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}}]},
    "error: a forced tool without tools": {"input": "Hi", "tool_choice": "required"},
}

ANSWERS: dict[str, dict[str, Any]] = {
    "think tags in the content": {"content": "<think>First.</think><think>Second.</think>The answer is 4.", "finish_reason": "stop"},
    "an empty answer": {"content": "", "finish_reason": "stop"},
    "text and calls": {
        "content": "Looking up.", "finish_reason": "tool_calls",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"key\":\"a\"}"}},
                       {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "{\"key\":\"b\"}"}}],
    },
    "calls only": {"content": None, "finish_reason": "tool_calls",
                   "tool_calls": [{"id": "call_3", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
    "a refusal": {"content": None, "refusal": "I can't.", "finish_reason": "stop"},
    "cut at the length limit": {"content": "The answer is", "finish_reason": "length"},
    "filtered": {"content": "", "finish_reason": "content_filter"},
    "usage details by the providers' other names": {"content": "ok", "finish_reason": "stop", "usage": {
        "prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18, "prompt_tokens_details": {"cached_tokens": -1}, "cached_input_tokens": 4, "reasoning_output_tokens": 6}},
}
ANSWER_REQUEST = {"input": "Hi", "model": "policy", "tools": [TOOL], "tool_choice": "auto", "temperature": 0.7, "max_output_tokens": 32, "service_tier": "auto", "top_logprobs": 2}
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 20,
         "prompt_tokens_details": {"cached_tokens": 3}, "completion_tokens_details": {"reasoning_tokens": 2}}  # fmt: skip


def convert_requests() -> dict[str, Any]:
    from nemo_gym.responses_converter import ResponsesConverter

    converter = ResponsesConverter(return_token_id_information=False)
    return {name: {"request": request, **chat_body(converter, request)} for name, request in REQUESTS.items()}


def chat_body(converter: Any, request: dict[str, Any]) -> dict[str, Any]:
    """`{"chat": body}` for one Responses request, or `{"error": type, "message": text}` when
    NeMo Gym refuses it (its request validation or its converter)."""
    from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming

    try:
        params = NeMoGymResponseCreateParamsNonStreaming(**json.loads(json.dumps(request)))
        return {"chat": converter.responses_to_chat_completion_create_params(params).model_dump(mode="json", exclude_unset=True)}
    except Exception as exc:  # noqa: BLE001
        return {"error": type(exc).__name__, "message": str(exc)}


METADATA_REQUESTS: dict[str, dict[str, Any]] = {
    "a seed and stop strings in extra_body": {"input": "hi", "metadata": {"extra_body": '{"seed": 3, "stop": ["!"]}'}},
    "the body's own field wins over extra_body": {"input": "hi", "temperature": 0.5, "metadata": {"extra_body": '{"temperature": 0.9, "top_k": 5}'}},
    "chat_template_kwargs": {"input": "hi", "metadata": {"chat_template_kwargs": '{"enable_thinking": false}', "other": "kept"}},
    "both, with tools": {"input": "hi", "tools": [TOOL], "metadata": {"extra_body": '{"seed": 0}', "chat_template_kwargs": '{"a": 1}'}},
    "metadata without either": {"input": "hi", "metadata": {"tag": "x"}},
}


def vllm_server(token_ids: bool = False) -> Any:
    """NeMo Gym's vLLM model server (not started), model "m", no reasoning parser; `token_ids`:
    it asks for token IDs (`return_token_id_information`, `request_prompt_and_generation_token_ids`)."""
    from responses_api_models.vllm_model.app import VLLMModel, VLLMModelConfig

    config = VLLMModelConfig(host="127.0.0.1", port=1, entrypoint="app.py", name="policy_model", base_url=["http://127.0.0.1:9/v1"], api_key="k", model="m",
                             return_token_id_information=token_ids, request_prompt_and_generation_token_ids=token_ids, uses_reasoning_parser=False)  # fmt: skip
    return VLLMModel.model_construct(config=config, server_client=None)


def vllm_body(server: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The body `server` sends the engine for one Responses request: its converter, then its
    `_preprocess_chat_completion_create_params`."""
    from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming

    params = NeMoGymResponseCreateParamsNonStreaming(**request)
    chat = server._converter.responses_to_chat_completion_create_params(params).model_dump(mode="json", exclude_unset=True)
    return server._preprocess_chat_completion_create_params(None, chat)


def vllm_bodies() -> dict[str, Any]:
    server = vllm_server()
    return {name: {"request": request, "body": vllm_body(server, request)} for name, request in METADATA_REQUESTS.items()}


def convert_answers() -> dict[str, Any]:
    from nemo_gym.responses_converter import ResponsesConverter

    converter = ResponsesConverter(return_token_id_information=False)
    out: dict[str, Any] = {}
    for name, spec in ANSWERS.items():
        message = {"role": "assistant", **{k: v for k, v in spec.items() if k not in ("finish_reason", "usage")}}
        completion = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "served-model",
                      "choices": [{"index": 0, "message": message, "finish_reason": spec["finish_reason"]}], "usage": spec.get("usage", USAGE)}  # fmt: skip
        out[name] = {"completion": completion, "response": answer_response(converter, ANSWER_REQUEST, completion)}
    return out


def answer_response(converter: Any, request: dict[str, Any], completion: dict[str, Any]) -> dict[str, Any]:
    """NeMo Gym's Responses answer for one chat completion of `request`, dumped, its uuid ids
    (`resp_`, `msg_`, `rs_`) "<id>"."""
    from nemo_gym.openai_utils import NeMoGymChatCompletion, NeMoGymResponseCreateParamsNonStreaming

    response = converter.chat_completion_to_response(NeMoGymResponseCreateParamsNonStreaming(**request), NeMoGymChatCompletion(**completion))
    dumped = response.model_dump(mode="json", by_alias=True)  # as its server answers (a JSON schema's `schema`, not `schema_`)
    return json.loads(re.sub(r'"(resp|msg|rs)_[0-9a-f]{32}"', '"<id>"', json.dumps(dumped)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    data = {"nemo_gym": "0.7.0", "answer_request": ANSWER_REQUEST, "requests": convert_requests(), "answers": convert_answers(), "vllm": vllm_bodies()}
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    return write_or_check(OUT, text, args.check)


if __name__ == "__main__":
    sys.exit(main())
