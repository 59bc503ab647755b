"""A scripted OpenAI-compatible policy server, so generation tests need no model.

`with ScriptedPolicyServer({"2+2?": "4"}) as policy:` serves POST /v1/chat/completions and
POST /v1/responses on 127.0.0.1 (port 0, read back; `policy.url` is the base URL) from a
thread. The answer is chosen by the prompt (the text of the last user message), so concurrent
calls get the right one whatever their arrival order:
- `answers`: a mapping or a function from the prompt to a str (the message text) or a
  `PolicyAnswer` (text, tool calls, reasoning, token counts), or to a list of them: one per
  step of a multi-turn episode (step k answers the request that carries the results of k tool
  turns since the prompt: `function_call_output` items or `tool` messages); a prompt it does
  not know, or a step past its list, gets HTTP 400 (a test fails instead of hanging);
- faults, counted per prompt: the first `fail_first` calls answer `fail_status` (503) with an
  optional `Retry-After`; the calls after them stall `stall_s` seconds for the first
  `stall_first` ones (client timeouts); every answer waits `delay_s` (latency).
Every request is recorded (`requests`), calls are counted per prompt (`calls`), and
`max_in_flight` says how many were answered at once.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from gym_metrics.targets import text_of
from gym_metrics.testing._judge import LoopbackServer, Recorded, Reply
from gym_metrics.testing._tokens import Encode, byte_ids, token_answer

CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"


@dataclass
class PolicyAnswer:
    """What the policy answers one prompt: text, tool calls (`{"name", "arguments"}`, the
    arguments a dict or JSON text), a reasoning part, and the token counts it reports (None:
    the words of the prompt / of the answer)."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    token_fault: str | None = None
    """For a chat request that asks for token IDs (testing/_tokens.py): `short_log_probs` or
    `break_lineage`, a fault of this turn's token fields a test expects to see reported."""


Answer = Union[str, PolicyAnswer]
Script = Union[Answer, Sequence[Answer]]
"""One answer, or one per step."""
Answers = Union[Mapping[str, Script], Callable[[str], Script]]


def prompt_of(body: Mapping[str, Any]) -> str:
    """The text of the last user message of a chat (`messages`) or Responses (`input`) request."""
    given = body.get("messages", body.get("input", []))
    if isinstance(given, str):
        return given
    users = [m for m in given if isinstance(m, dict) and m.get("role") == "user"] if isinstance(given, list) else []
    return text_of(users[-1].get("content")) if users else ""


def conversation_of(body: Mapping[str, Any]) -> str:
    """Every user message's text of a chat or Responses request, joined by newlines."""
    given = body.get("messages", body.get("input", []))
    if isinstance(given, str):
        return given
    return "\n".join(text_of(m.get("content")) for m in given if isinstance(m, dict) and m.get("role") == "user") if isinstance(given, list) else ""


def step_of(body: Mapping[str, Any]) -> int:
    """How many tool turns the request carries since its last user message: runs of
    `function_call_output` items (Responses) or of `tool` messages (chat)."""
    given = body.get("messages", body.get("input", []))
    if not isinstance(given, list):
        return 0
    step, in_run = 0, False
    for item in given:
        if not isinstance(item, Mapping):
            continue
        if item.get("role") == "user":
            step, in_run = 0, False
            continue
        is_result = item.get("type") == "function_call_output" or item.get("role") == "tool"
        if is_result and not in_run:
            step += 1
        in_run = is_result
    return step


@dataclass
class _Fault:
    """What one call gets before (or instead of) its answer."""

    reply: Reply | None = None
    stall_s: float = 0.0


class ScriptedPolicyServer(LoopbackServer):
    """See the module docstring."""

    def __init__(
        self,
        answers: Answers,
        *,
        fail_first: int = 0,
        fail_status: int = 503,
        retry_after: str | None = None,
        stall_first: int = 0,
        stall_s: float = 0.0,
        delay_s: float = 0.0,
        tokenizer: Encode = byte_ids,
        by_conversation: bool = False,
    ) -> None:
        """`tokenizer`: what a chat request asking for token IDs is tokenized with
        (testing/_tokens.py; default one ID per byte). `by_conversation`: the prompt that
        chooses the answer is every user message of the request, joined by newlines, not only
        the last (an environment that answers each turn adds one per turn)."""
        super().__init__()  # (the base listens with a backlog of 1024)
        self.answers = answers
        self.tokenizer, self.by_conversation = tokenizer, by_conversation
        self.fail_first, self.fail_status, self.retry_after = fail_first, fail_status, retry_after
        self.stall_first, self.stall_s, self.delay_s = stall_first, stall_s, delay_s
        self.calls: Counter[str] = Counter()
        """Requests received per prompt (failed and stalled ones included)."""

    def _take(self, request: Recorded) -> Any:
        prompt = prompt_of(request.body)
        self.calls[prompt] += 1
        n = self.calls[prompt]
        if n <= self.fail_first:
            headers = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
            return _Fault(Reply(self.fail_status, f"injected {self.fail_status}", headers))
        if n <= self.fail_first + self.stall_first:
            return _Fault(stall_s=self.stall_s)
        return _Fault()

    def _reply(self, item: Any, request: Recorded) -> Reply:
        assert isinstance(item, _Fault)
        if item.reply is not None:
            return item.reply
        time.sleep(item.stall_s + self.delay_s)
        prompt, step = prompt_of(request.body), step_of(request.body)
        key = conversation_of(request.body) if self.by_conversation else prompt
        try:
            script = self.answers(key) if callable(self.answers) else self.answers[key]
        except KeyError:
            return Reply(400, f"no scripted answer for prompt {key!r}")
        if isinstance(script, (str, PolicyAnswer)):
            answer = script
        elif step < len(script):
            answer = script[step]
        else:
            return Reply(400, f"the script for prompt {prompt!r} has {len(script)} steps; step {step} was asked")
        if isinstance(answer, str):
            answer = PolicyAnswer(text=answer)
        if request.path == CHAT_PATH:
            body = chat_body(answer, prompt, request.body, step)
            if request.body.get("return_token_ids"):  # as vLLM answers it (testing/_tokens.py)
                token_answer(body, request.body, answer.token_fault, self.tokenizer)
        elif request.path == RESPONSES_PATH:
            body = responses_body(answer, prompt, request.body, step)
        else:
            return Reply(404, f"no route {request.path}")
        return Reply(200, json.dumps(body), {"Content-Type": "application/json"})

    def requests_for(self, prompt: str) -> list[Recorded]:
        """The recorded requests whose prompt is `prompt`."""
        with self._lock:
            return [r for r in self.requests if prompt_of(r.body) == prompt]


def _tokens(answer: PolicyAnswer, prompt: str) -> tuple[int, int]:
    i = answer.input_tokens if answer.input_tokens is not None else len(prompt.split())
    o = answer.output_tokens if answer.output_tokens is not None else len(answer.text.split())
    return i, o


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _suffix(step: int) -> str:
    """Ids of step 0 are those single-turn answers always had; later steps add the step."""
    return f"{step}_" if step else ""


def chat_body(answer: PolicyAnswer, prompt: str, request: Mapping[str, Any], step: int = 0) -> dict[str, Any]:
    """A chat completion answering `answer`, with usage."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.reasoning is not None:
        message["reasoning_content"] = answer.reasoning
    if answer.tool_calls:
        message["tool_calls"] = [
            {"id": c.get("call_id", f"call_{_suffix(step)}{i}"), "type": "function", "function": {"name": c["name"], "arguments": _arguments(c.get("arguments", {}))}}
            for i, c in enumerate(answer.tool_calls)
        ]
    i, o = _tokens(answer, prompt)
    finish = "tool_calls" if answer.tool_calls else "stop"
    return {
        "id": f"chatcmpl-policy{f'-{step}' if step else ''}",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model") or "",  # a served model names itself, whatever (or null) was asked
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o},
    }


def responses_body(answer: PolicyAnswer, prompt: str, request: Mapping[str, Any], step: int = 0) -> dict[str, Any]:
    """A Responses API answer for `answer`, with usage and the fields a Responses API answer
    always echoes from its request (`tools`, `tool_choice`, `parallel_tool_calls`)."""
    output: list[dict[str, Any]] = []
    tag = _suffix(step)
    if answer.reasoning is not None:
        output.append({"type": "reasoning", "id": f"rs_{tag}0", "summary": [{"type": "summary_text", "text": answer.reasoning}]})
    if answer.text:
        content = [{"type": "output_text", "text": answer.text, "annotations": []}]
        output.append({"type": "message", "id": f"msg_{tag}0", "role": "assistant", "status": "completed", "content": content})
    for n, call in enumerate(answer.tool_calls):
        call_id = call.get("call_id", f"call_{tag}{n}")
        output.append(
            {"type": "function_call", "id": f"fc_{tag}{n}", "call_id": call_id, "name": call["name"], "arguments": _arguments(call.get("arguments", {})), "status": "completed"}
        )
    i, o = _tokens(answer, prompt)
    return {
        "id": "resp-policy",
        "object": "response",
        "created_at": 0,
        "model": request.get("model") or "",  # a served model names itself, whatever (or null) was asked
        "status": "completed",
        "output": output,
        "usage": {
            "input_tokens": i, "output_tokens": o, "total_tokens": i + o,
            "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0},
        },  # fmt: skip
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools", []),
    }
