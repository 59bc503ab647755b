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
    # NeMo Gym drops or refuses these; gym-metrics keeps them as they are
    "reasoning with a status": {"type": "reasoning", "id": "rs_1", "summary": [], "status": "completed"},
    "user message with a status": {"role": "user", "type": "message", "status": "completed", "content": [{"type": "input_text", "text": "hi"}]},
    "user message with an id": {"role": "user", "type": "message", "id": "m_1", "content": "hi"},
    "assistant parts without an id": {"role": "assistant", "type": "message", "content": [TEXT]},
    "function call with an unknown field": {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "extra": 1},
    "an item of another type": {"type": "input", "content": "x", "role": "user"},
    "text part with an unknown field": {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                                        "content": [{**TEXT, "extra": 1}]},
}  # fmt: skip


def main() -> int:
    from nemo_gym.rollout_observability import AgentInvocation

    OUT.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for case, item in CASES.items():
        try:
            dumped = AgentInvocation(invocation_id="root", conversation=[item]).model_dump(mode="json")["conversation"][0]
        except Exception:
            dumped = None
        lines.append(json.dumps({"case": case, "item": item, "dumped": dumped}) + "\n")
    OUT.write_text("".join(lines))
    print(f"{len(lines)} items written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
