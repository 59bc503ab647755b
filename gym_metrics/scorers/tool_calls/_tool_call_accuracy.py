"""Tool call accuracy: RAGAS 0.4.3 `ToolCallAccuracy`, what NeMo Evaluator reports.

Definition: docs/metrics.md#tool-call-accuracy.

Rows hold `user_input` (messages `{content, type: human|ai|tool, tool_calls: [{name, args}]}`)
and `reference_tool_calls` (`[{name, args}]`). Rows are checked the way RAGAS's pydantic models
check them, so a row RAGAS rejects is a RowError naming the field, never a crash and never a
number RAGAS would not give. Arguments are compared as Python `str()` text, like RAGAS's
ExactMatch: 5 == "5", 5 != 5.0, True == "True", and dict key order matters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from gym_metrics._util.jsonio import json_kind
from gym_metrics.scorers import RowError

MESSAGE_TYPES = ("human", "ai", "tool")


class ToolCall(NamedTuple):
    """One call: the tool's name and its arguments (already-decoded JSON values)."""

    name: str
    args: Mapping[str, Any]


def tool_call_accuracy(user_input: Any, reference_tool_calls: Any, strict_order: bool = True) -> float:
    """Score one row; raises RowError for a row RAGAS would reject."""
    return score_tool_calls(predicted_calls(user_input), reference_calls(reference_tool_calls), strict_order)


def predicted_calls(user_input: Any, field: str = "user_input") -> list[ToolCall]:
    """The `tool_calls` of every `ai` message, in order, after checking every message.

    Checked as RAGAS's `MultiTurnSample` checks it: a list of objects, `type` one of human /
    ai / tool, `content` a string (null is rejected), `metadata` an object or null, an ai
    message's `tool_calls` a list of `{name, args}` or null; and its order rules: a tool
    message needs an ai message somewhere before it, and must directly follow either another
    tool message or an ai message whose `tool_calls` is non-empty. A message without `type` is
    rejected rather than guessed (RAGAS guesses: see the README's deliberate differences).
    """
    if user_input is None:
        raise RowError(field, "missing: must be a list of messages")
    if not _is_list(user_input):
        raise RowError(field, f"must be a list of messages, got {json_kind(user_input)}")
    calls: list[ToolCall] = []
    tool_may_follow = False  # the previous message is a tool message or an ai one that called tools
    for i, message in enumerate(user_input):
        # fast path for plain JSON rows; anything unusual gets the full check (which raises)
        if not (
            type(message) is dict
            and (kind := message.get("type")) in MESSAGE_TYPES
            and type(message.get("content")) is str
            and message.get("metadata") is None
        ):
            _check_message(message, f"{field}[{i}]")
            kind = message["type"]
        if kind == "ai":
            tool_calls = message.get("tool_calls")
            if tool_calls:
                calls.extend(_calls(tool_calls, f"{field}[{i}].tool_calls"))
                tool_may_follow = True
            else:
                if tool_calls is not None:
                    _calls(tool_calls, f"{field}[{i}].tool_calls")  # checks a non-list
                tool_may_follow = False
        elif kind == "tool":
            if not tool_may_follow:
                _misplaced_tool_message(user_input, i, f"{field}[{i}]")
        else:
            tool_may_follow = False
    return calls


def _misplaced_tool_message(messages: Sequence[Any], i: int, where: str) -> None:
    """Raise the RowError RAGAS's rule gives for the tool message `messages[i]`."""
    if not any(m["type"] == "ai" for m in messages[:i]):
        raise RowError(where, "a tool message needs an ai message before it (RAGAS: ToolMessage must be "
                       "preceded by an AIMessage somewhere in the conversation)")
    if messages[i - 1]["type"] == "ai":
        raise RowError(where, f"a tool message must answer tool calls, but the ai message before it ({i - 1}) "
                       "has none (RAGAS: ToolMessage must follow an AIMessage where tools were called)")
    raise RowError(where, f"a tool message must follow an ai message that called tools or another tool message, "
                   f"not a {messages[i - 1]['type']} message (RAGAS: ToolMessage must follow an AIMessage or "
                   "another ToolMessage)")


def _check_message(message: Any, where: str) -> None:
    """Raise RowError naming what is wrong with a message (return if it is fine)."""
    if not isinstance(message, Mapping):
        raise RowError(where, f"must be a message object, got {json_kind(message)}")
    kind = message.get("type")
    if kind not in MESSAGE_TYPES:
        if kind is None:
            raise RowError(f"{where}.type", "missing: must be one of human, ai, tool")
        raise RowError(f"{where}.type", f"unknown message type {kind!r}: must be one of human, ai, tool")
    if "content" not in message:
        raise RowError(f"{where}.content", "missing: must be a string")
    if not isinstance(message["content"], str):
        raise RowError(f"{where}.content", f"must be a string, got {json_kind(message['content'])}")
    metadata = message.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise RowError(f"{where}.metadata", f"must be an object or null, got {json_kind(metadata)}")
    if metadata is not None:
        _check_keys(metadata, f"{where}.metadata")


def reference_calls(reference: Any, field: str = "reference_tool_calls") -> list[ToolCall]:
    """The reference calls, checked like predicted ones. Missing (null) is an error: RAGAS
    asserts the reference is set."""
    if reference is None:
        raise RowError(field, "missing: the reference tool calls are required (use [] for none)")
    return _calls(reference, field)


def check_sample_fields(row: Mapping[str, Any], *, reference_tool_calls: bool = True) -> None:
    """The row's fields besides `user_input` that RAGAS's `MultiTurnSample` types (RAGAS builds
    it from the whole row, so a bad one rejects the row, whatever the metric): `reference` a
    string, `rubrics` an object of strings, `reference_topics` a list of strings and (unless
    told otherwise) `reference_tool_calls` a list of `{name, args}`; each may be absent or null."""
    if reference_tool_calls and row.get("reference_tool_calls") is not None:
        _calls(row["reference_tool_calls"], "reference_tool_calls")
    reference = row.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise RowError("reference", f"must be a string or null, got {json_kind(reference)}")
    rubrics = row.get("rubrics")
    if rubrics is not None:
        if not isinstance(rubrics, Mapping):
            raise RowError("rubrics", f"must be an object of strings or null, got {json_kind(rubrics)}")
        _check_keys(rubrics, "rubrics")
        for key, value in rubrics.items():
            if not isinstance(value, str):
                raise RowError(f"rubrics.{key}", f"must be a string, got {json_kind(value)}")
    topics = row.get("reference_topics")
    if topics is not None:
        if not _is_list(topics):
            raise RowError("reference_topics", f"must be a list of strings or null, got {json_kind(topics)}")
        for i, topic in enumerate(topics):
            if not isinstance(topic, str):
                raise RowError(f"reference_topics[{i}]", f"must be a string, got {json_kind(topic)}")


def score_tool_calls(predicted: Sequence[ToolCall], reference: Sequence[ToolCall], strict_order: bool = True) -> float:
    """RAGAS's score over already-checked calls (same arithmetic, so the same float)."""
    if not predicted and not reference:
        return 1.0
    if not predicted or not reference:
        return 0.0
    if len(predicted) != len(reference):
        return 0.0
    if not strict_order and len(reference) > 1:
        names = sorted(c.name for c in predicted)
        if names != sorted(c.name for c in reference):
            return 0.0
        # Sorting by the full key (name, then str() of each argument) only reorders calls
        # sharing a name; with distinct names the name alone gives the same order, cheaper.
        key = sort_key if len(set(names)) < len(names) else _name
        predicted = sorted(predicted, key=key)
        reference = sorted(reference, key=key)
    for p, r in zip(predicted, reference):
        if p.name != r.name:
            return 0.0
    score = 0.0
    for p, r in zip(predicted, reference):
        score += arg_score(p.args, r.args)
    return score / len(reference)


def arg_score(pred: Mapping[str, Any], ref: Mapping[str, Any]) -> float:
    """Fraction of the reference's arguments the prediction has with the same `str()`;
    extra predicted arguments are ignored; no reference arguments score 1.0 only if the
    prediction has none either."""
    if not ref:
        return 0.0 if pred else 1.0
    score = 0.0
    for name, value in ref.items():
        if name in pred and str(pred[name]) == str(value):
            score += 1.0
    return score / len(ref)


def sort_key(call: ToolCall) -> tuple[str, ...]:
    """Unordered mode's sort key: the name, then each argument name and str(value) in
    argument-name order."""
    key = [call.name]
    for name in sorted(call.args):
        key.append(name)
        key.append(str(call.args[name]))
    return tuple(key)


def _name(call: ToolCall) -> str:
    return call.name


def _calls(raw: Any, field: str) -> list[ToolCall]:
    if not _is_list(raw):
        raise RowError(field, f"must be a list of tool calls, got {json_kind(raw)}")
    out = []
    for j, call in enumerate(raw):
        if (
            type(call) is dict
            and type(name := call.get("name")) is str
            and type(args := call.get("args")) is dict
            and all(map(_IS_STR, args))
        ):
            out.append(ToolCall(name, args))  # the plain JSON case
        else:
            out.append(_check_call(call, f"{field}[{j}]"))
    return out


def _check_call(call: Any, where: str) -> ToolCall:
    if not isinstance(call, Mapping):
        raise RowError(where, f"must be a tool call object {{name, args}}, got {json_kind(call)}")
    name = call.get("name")
    if not isinstance(name, str):
        raise RowError(
            f"{where}.name", "missing: must be a string" if name is None else f"must be a string, got {json_kind(name)}"
        )
    args = call.get("args")
    if not isinstance(args, Mapping):
        if isinstance(args, str):
            raise RowError(f"{where}.args", "must be an object, got a string (decode JSON-string arguments first)")
        raise RowError(
            f"{where}.args", "missing: must be an object" if args is None else f"must be an object, got {json_kind(args)}"
        )
    _check_keys(args, f"{where}.args")
    return ToolCall(name, args)


_IS_STR = str.__instancecheck__


def _check_keys(mapping: Mapping[Any, Any], where: str) -> None:
    """RAGAS's `Dict[str, Any]`: every key a string (always so in JSON; Python rows may differ)."""
    for key in mapping:
        if not isinstance(key, str):
            raise RowError(f"{where}", f"keys must be strings, got {json_kind(key)} key {key!r}")


def _is_list(value: Any) -> bool:
    return type(value) is list or isinstance(value, (list, tuple))
