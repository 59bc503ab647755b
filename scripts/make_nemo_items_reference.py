"""Record how NeMo Gym 0.7.0's `TrajectoryRecord` dumps conversation items (its
`AgentInvocation.conversation`, typed as `NeMoGymResponseInputItem`), into
tests/data/nemo_gym_items/items.jsonl; tests/recording/test_trajectory_items.py checks
gym-metrics' `recording._items.as_dumped` against it.

A tool for producing test data, not part of gym-metrics: it imports nemo-gym (NOT a project
dependency, Python >= 3.13). Run it with a throwaway venv that has nemo-gym 0.7.0:

    /tmp/ngvenv/bin/python scripts/make_nemo_items_reference.py

Each line: {"case", "item", "dumped"}: `dumped` is the item as `AgentInvocation(invocation_id=
"root", conversation=[item]).model_dump(mode="json")` holds it, null when NeMo Gym refuses it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_items" / "items.jsonl"
TOKENS = {"prompt_token_ids": [1, 2], "generation_token_ids": [3], "generation_log_probs": [-0.25]}
TEXT = {"type": "output_text", "text": "4", "annotations": []}

CASES: dict[str, Any] = {
    "user message": {"role": "user", "content": "add 2 and 2", "type": "message"},
    "user message without type": {"role": "user", "content": "add 2 and 2"},
    "system message": {"role": "system", "content": "be brief", "type": "message"},
    "developer message": {"role": "developer", "content": "be brief"},
    "user message with parts": {"role": "user", "type": "message", "content": [{"type": "input_text", "text": "hi"}]},
    "user message with a phase": {"role": "user", "content": "x", "type": "message", "phase": None},
    "assistant message given as text": {"role": "assistant", "content": "4"},
    "assistant answer": {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": [TEXT]},
    "assistant answer, keys in another order": {"content": [TEXT], "status": "completed", "role": "assistant", "id": "msg_1", "type": "message"},
    "assistant answer with log-probs": {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                                        "content": [{**TEXT, "logprobs": []}]},
    "assistant answer with a refusal": {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                                        "content": [{"type": "refusal", "refusal": "no"}]},
    "assistant answer with tokens": {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": [TEXT], **TOKENS},
    "assistant answer with routed experts": {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                                             "content": [TEXT], **TOKENS, "routed_experts": [[[0, 1]]]},
    "function call": {"type": "function_call", "call_id": "call_0", "name": "add", "arguments": "{\"a\": 2}"},
    "function call with id and status": {"type": "function_call", "id": "call_0", "call_id": "call_0", "name": "add",
                                         "arguments": "{}", "status": "completed"},
    "function call with tokens": {"type": "function_call", "id": "call_0", "call_id": "call_0", "name": "add",
                                  "arguments": "{}", "status": "completed", **TOKENS},
    "function call output": {"type": "function_call_output", "call_id": "call_0", "output": "4"},
    "function call output with parts": {"type": "function_call_output", "call_id": "call_0", "output": [{"type": "input_text", "text": "4"}]},
    "reasoning": {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
    "reasoning with content": {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]},
    "reasoning with tokens": {"type": "reasoning", "id": "rs_1", "summary": [], **TOKENS},
    # found by scripts/fuzz_nemo_items.py: defaults, coercions, routing and the SDK's field order
    "assistant answer without a status": {"id": "msg_1", "type": "message", "role": "assistant", "content": [TEXT]},
    "assistant answer with citations": {"id": "msg_1", "type": "message", "role": "assistant", "content": [{**TEXT, "annotations": [
        {"type": "url_citation", "url": "u", "title": "t", "start_index": 0, "end_index": 1}, {"type": "file_path", "file_id": "f", "index": 0}]}]},
    "assistant refusal part without a type": {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"refusal": "no"}]},
    "assistant answer with no parts": {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
    "function call with token IDs as text": {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}",
                                             "prompt_token_ids": ["1"], "generation_token_ids": [3], "generation_log_probs": [-1]},
    "reasoning, a summary part with another field": {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t", "extra": 1}]},
    "system message with an image part": {"role": "system", "type": "message", "status": "in_progress",
                                          "content": [{"type": "input_image", "image_url": "http://x/i.png", "detail": "auto"}]},
    "function call output with a file part": {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_file", "file_id": "f"}]},
    "developer message with tokens": {"role": "developer", "content": "x", **TOKENS},
    "untyped tool message (a tool listing to NeMo Gym)": {"role": "tool", "content": "4"},
    "untyped message with a content object": {"role": "user", "content": {}, "status": "completed"},
    # NeMo Gym drops or refuses these; gym-metrics keeps them as they are
    "developer text message with a status": {"role": "developer", "content": "x", "status": "completed"},
    "tool message": {"role": "tool", "content": "4", "type": "message"},
    "assistant message of a number": {"role": "assistant", "type": "message", "id": "msg_1", "status": "completed", "content": 0},
    "function call output without a call id": {"type": "function_call_output", "call_id": None, "output": "4"},
    "function call of object arguments": {"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 2}},
    "reasoning with tokens, routed experts of another shape": {"type": "reasoning", "id": "rs_1", "summary": [], **TOKENS, "routed_experts": [[0]]},
    "message of an unhashable role": {"role": {}, "content": "x", "type": "message"},
    "user message with another phase": {"role": "user", "content": "x", "type": "message", "phase": "other"},
    "reasoning with a status": {"type": "reasoning", "id": "rs_1", "summary": [], "status": "completed"},
    "user message with a status": {"role": "user", "type": "message", "status": "completed", "content": [{"type": "input_text", "text": "hi"}]},
    "user message with an id": {"role": "user", "type": "message", "id": "m_1", "content": "hi"},
    "assistant parts without an id": {"role": "assistant", "type": "message", "content": [TEXT]},
    "function call with an unknown field": {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "extra": 1},
    "an item of another type": {"type": "input", "content": "x", "role": "user"},
    "text part with an unknown field": {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                                        "content": [{**TEXT, "extra": 1}]},
    # the openai SDK's models (recording/_sdk_items.py; kept whole where the SDK is not installed)
    "web search call": {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
    "web search call without an action": {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    "file search call": {"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed", "results": [{"text": "t", "score": 0.5}]},
    "computer call": {"type": "computer_call", "id": "cc_1", "call_id": "c", "action": {"type": "click", "button": "left", "x": 1, "y": 2},
                      "pending_safety_checks": [], "status": "completed"},
    "computer call output": {"type": "computer_call_output", "call_id": "c", "output": {"type": "computer_screenshot", "image_url": "data:,"}},
    "custom tool call": {"type": "custom_tool_call", "call_id": "c", "input": "i", "name": "n"},
    "custom tool call output": {"type": "custom_tool_call_output", "call_id": "c", "output": "o"},
    "local shell call": {"type": "local_shell_call", "id": "ls_1", "call_id": "c", "action": {"type": "exec", "command": ["ls"], "env": {}},
                         "status": "completed"},
    "shell call output": {"type": "shell_call_output", "call_id": "c",
                          "output": [{"stdout": "o", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]},
    "mcp approval request without an id or server": {"type": "mcp_approval_request", "arguments": "{}", "name": "n"},
    "compaction": {"type": "compaction", "id": "cp_1", "encrypted_content": "e"},
    "compaction trigger": {"type": "compaction_trigger"},
    "image generation call of a number": {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": 5},
}  # fmt: skip


def nemo_dumped(item: Any) -> Any:
    """The item as NeMo Gym's `AgentInvocation` dumps it; None when NeMo Gym refuses it
    (scripts/fuzz_nemo_items.py calls this too)."""
    from nemo_gym.rollout_observability import AgentInvocation

    try:
        return AgentInvocation(invocation_id="root", conversation=[item]).model_dump(mode="json")["conversation"][0]
    except Exception:
        return None


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for case, item in CASES.items():
        dumped = nemo_dumped(item)
        lines.append(json.dumps({"case": case, "item": item, "dumped": dumped}) + "\n")
    OUT.write_text("".join(lines))
    print(f"{len(lines)} items written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
