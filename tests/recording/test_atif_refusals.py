"""ATIF export of rows changed one way each from the recorded cases (tests/data/atif): each
refused with the reason NeMo Gym 0.7.0's converter refuses it for (its own message, or where
that is only "missing or invalid v1.0 trajectory", ours naming the field), and the rows it
exports whole exported as it exports them. Each row's outcome was checked by running NeMo
Gym's `gym_rollout_to_atif` on it (its venv, GYM_METRICS_NEMO_PYTHON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.recording import AtifRefused, rollout_to_atif

DATA = Path(__file__).parents[1] / "data" / "atif"
CASES = [json.loads(line) for line in (DATA / "cases.jsonl").read_text().splitlines()]
REFERENCE = {o["case"]: o for o in map(json.loads, (DATA / "reference.jsonl").read_text().splitlines())}


def convert(row: dict[str, Any], **options: Any) -> dict[str, Any]:
    return rollout_to_atif(row, session_id="run-1", agent_version="0.1", exporter_version="test", **options)


BY_NAME = {c["case"]: c["row"] for c in CASES}
RESPONSES, CHAT, JOINED = "collected over responses", "collected over chat", "turns joined by response id"
CONV = "ng_trajectory.invocations[0].conversation"


def edit(t: dict[str, Any], item: dict[str, Any], **changes: Any) -> None:
    """Changes a conversation item and each copy of it in the turns alike (None: the field removed)."""
    like = json.loads(json.dumps(item))
    for items in [t["invocations"][0]["conversation"], *(turn.get(k) or [] for turn in t["turns"] for k in ("question", "answer", "reasoning_content"))]:
        for it in (i for i in items if i == like):
            it.update({k: v for k, v in changes.items() if v is not None})
            [it.pop(k, None) for k, v in changes.items() if v is None]


def changed(base: str, change: Any) -> dict[str, Any]:
    row = json.loads(json.dumps(BY_NAME[base]))
    t = row["ng_trajectory"]
    change(row, t, t["invocations"][0]["conversation"], t["turns"], [m["response_metadata"] for m in t["model_calls"]])
    return row


def ref(n: int, **changes: Any) -> Any:  # the changes: of turn n's model-call reference, n's call's metadata, ...
    return lambda r, t, c, turns, md: turns[n]["model_calls"][0].update(changes)


meta = lambda n, **changes: lambda r, t, c, turns, md: md[n].update(changes)  # noqa: E731
stats = lambda **changes: lambda r, t, c, turns, md: t["model_calls"][0]["token_stats"].update(changes)  # noqa: E731
record = lambda **changes: lambda r, t, c, turns, md: t["tool_calls"][0].update(changes)  # noqa: E731


TEXT = [{"type": "input_text", "text": "hi"}]
OUT = lambda text="Done.": {"type": "output_text", "text": text, "annotations": []}  # noqa: E731
USER_PARTS = "a user message holds only input_text, input_image, input_file or input_video parts, got "
REFUSED = [  # (what, base case, change, refusal): NeMo Gym 0.7.0's message, but where a comment gives its own
    # (a refusal only as "ng_trajectory: missing or invalid v1.0 trajectory" is "invalid": gym-metrics names the field)
    ("a tool record twice", RESPONSES, lambda r, t, c, turns, md: t["tool_calls"].append(t["tool_calls"][0]), "ng_trajectory.tool_calls: tool_call_id values must be unique"),
    ("copied assistant context", RESPONSES, lambda r, t, c, *_: c.insert(1, {"type": "message", "role": "assistant", "content": "x"}), f"{CONV}[1].role: copied assistant context is not supported"),
    ("reasoning last", RESPONSES, lambda r, t, c, *_: c.__delitem__(slice(2, None)), f"{CONV}[1]: reasoning is not followed by an agent answer"),
    ("a blank call_id", RESPONSES, lambda r, t, c, *_: c[2].update(call_id=" "), f"{CONV}[2].call_id: cannot be empty"),
    ("an empty name", RESPONSES, lambda r, t, c, *_: c[2].update(name=""), f"{CONV}[2].name: cannot be empty"),
    ("a call in progress", RESPONSES, lambda r, t, c, *_: c[2].update(status="in_progress"), f"{CONV}[2].status: expected completed, got 'in_progress'"),
    ("a call id twice", RESPONSES, lambda r, t, c, *_: (c[6].update(call_id="call_0"), c[7].update(call_id="call_0")), f"{CONV}[6]: duplicate function call ID 'call_0'"),
    ("a result id twice", RESPONSES, lambda r, t, c, *_: c[5].update(call_id="call_0"), f"{CONV}[1]: duplicate function result ID 'call_0'"),
    ("an incomplete result", RESPONSES, lambda r, t, c, *_: c[4].update(status="incomplete"), f"{CONV}[1]: function result 'call_0' is 'incomplete'"),
    ("a result missing", RESPONSES, lambda r, t, c, *_: c.pop(5), f"{CONV}[1]: function results must match this turn's calls exactly; expected ['call_0', 'call_1'], got ['call_0']"),
    ("no tool record", RESPONSES, lambda r, t, c, *_: t["tool_calls"].pop(0), f"{CONV}[1]: missing tool execution record for 'call_0'"),
    ("a record of another invocation", RESPONSES, record(invocation_id="other"), f"{CONV}[1]: tool execution 'call_0' belongs to another invocation"),
    ("a record with an error", RESPONSES, record(error_type="Boom"), f"{CONV}[1]: completed tool execution 'call_0' contains an error"),
    ("a record of another tool", RESPONSES, record(tool_name="other"), f"{CONV}[1]: tool execution 'call_0' has a different tool name"),
    ("a result first", RESPONSES, lambda r, t, c, *_: c.insert(1, {"type": "function_call_output", "call_id": "x", "output": "y"}),
     f"{CONV}[1]: unsupported conversation item 'function_call_output'"),  # NeMo Gym: ... item NeMoGymFunctionCallOutput
    ("a user message between reasoning and its calls", RESPONSES, lambda r, t, c, *_: c.insert(2, {"type": "message", "role": "user", "content": TEXT}),
     f"{CONV}[1]: unsupported conversation item 'user' message (later system or user turns are not supported)"),  # NeMo Gym: ... NeMoGymEasyInputMessage
    ("copied context between reasoning and its calls", RESPONSES, lambda r, t, c, *_: c.insert(2, {"type": "message", "role": "assistant", "content": "x"}),
     f"{CONV}[1]: unsupported conversation item 'assistant' message that is no answer (copied assistant context is not supported)"),  # NeMo Gym: ... NeMoGymEasyInputMessage (run on both rows)
    ("only a user message", RESPONSES, lambda r, t, c, *_: (c.__delitem__(slice(1, None)), t["tool_calls"].clear()), f"{CONV}: contains no agent output"),
    ("a turn of another invocation", RESPONSES, lambda r, t, c, turns, md: turns[0].update(invocation_id="other"), "ng_trajectory.turns[0].invocation_id: does not match the root invocation"),
    ("a turn number skipped", RESPONSES, lambda r, t, c, turns, md: turns[1].update(turn_no=5), "ng_trajectory.turns[1].turn_no: turns must be ordered sequentially from 1"),
    ("another question", RESPONSES, lambda r, t, c, turns, md: turns[0].update(question=[]), "ng_trajectory.turns[0].question: does not match the model-visible conversation prefix"),
    ("a question not of items", RESPONSES, lambda r, t, c, turns, md: turns[0]["question"].append("x"),  # NeMo Gym: ...: missing or invalid Responses conversation items
     "ng_trajectory.turns[0].question: does not match the model-visible conversation prefix"),
    ("another answer", RESPONSES, lambda r, t, c, turns, md: turns[0]["answer"].pop(), "ng_trajectory.turns[0].answer: does not match the exported agent answer"),
    ("no reasoning", RESPONSES, lambda r, t, c, turns, md: turns[0].update(reasoning_content=None), "ng_trajectory.turns[0].reasoning_content: does not match the exported reasoning"),
    ("two model calls", RESPONSES, lambda r, t, c, turns, md: turns[0]["model_calls"].append(turns[1]["model_calls"][0]), "ng_trajectory.turns[0].model_calls: expected exactly one captured model call"),
    ("a call twice", RESPONSES, lambda r, t, c, turns, md: turns[1].update(model_calls=turns[0]["model_calls"]), "ng_trajectory.turns[1].model_calls[0]: model call is referenced by more than one turn"),
    ("a failed response", RESPONSES, meta(0, response_status="failed"), "ng_trajectory.turns[0]: model call is 'failed', not completed"),
    ("a blank model", RESPONSES, meta(0, model=" "), "ng_trajectory.turns[0].model_calls[0].model: cannot be blank"),
    ("a timestamp past year 9999", RESPONSES, lambda r, t, c, turns, md: turns[0].update(timestamp=1e20), "ng_trajectory.turns[0].timestamp: cannot be represented as an ISO 8601 timestamp"),
    ("an invocation naming a call twice", RESPONSES, lambda r, t, c, *_: t["invocations"][0]["model_calls"].append(t["invocations"][0]["model_calls"][0]),
     "ng_trajectory.invocations[0].model_calls: must not reference a captured model call more than once"),
    ("an invocation missing a call", RESPONSES, lambda r, t, c, *_: t["invocations"][0]["model_calls"].pop(), "ng_trajectory.invocations[0].model_calls: must reference every turn-selected model call; missing indices: [2]"),
    ("NaN", RESPONSES, lambda r, *_: r.update(x=[float("nan")]), "rollout.x[0]: non-finite numbers are not valid JSON"),
    ("a lone surrogate", RESPONSES, lambda r, *_: r.update(x={"y": "\ud800"}), "rollout.x.y: contains an unpaired Unicode surrogate and is not valid UTF-8 JSON"),
    ("two invocations", RESPONSES, lambda r, t, *_: t["invocations"].append({**t["invocations"][0], "invocation_id": "b"}), "ng_trajectory.invocations: expected exactly one root invocation"),
    ("a blank invocation id", RESPONSES, lambda r, t, *_: [x.update(invocation_id=" ") for x in [*t["invocations"], *t["turns"], *t["tool_calls"]]],
     "ng_trajectory.invocations[0].invocation_id: cannot be blank"),
    ("a subagent", RESPONSES, lambda r, t, *_: t["invocations"][0].update(spawned_by_tool_call_id="c"), "ng_trajectory.invocations[0]: subagent invocations are not supported"),
    ("an invocation error", RESPONSES, lambda r, t, *_: t["invocations"][0].update(error_type="X"), "ng_trajectory.invocations[0].error_type: completed invocation contains an error"),
    ("a blank agent name", RESPONSES, lambda r, *_: r.update(agent_ref={"name": " "}), "agent_ref: expected a non-empty agent_ref.name or environment server stamp"),
    ("no agent named", RESPONSES, lambda r, *_: r.pop("agent_ref"), "agent_ref: expected a non-empty agent_ref.name or environment server stamp"),
    ("a blank reference id", RESPONSES, ref(0, model_call_id=" "), "ng_trajectory.turns[0].model_calls[0].model_call_id: cannot be blank"),
    ("a blank reference response id", RESPONSES, ref(0, response_id=" "), "ng_trajectory.turns[0].model_calls[0].response_id: cannot be blank"),
    ("another response id", RESPONSES, ref(0, response_id="other"), "ng_trajectory.turns[0].model_calls[0]: response_id conflicts with the captured model call"),
    ("another model_ref", RESPONSES, ref(0, model_ref={"type": "responses_api_models", "name": "p"}), "ng_trajectory.turns[0].model_calls[0]: model_ref conflicts with the captured model call"),
    ("a blank finish reason", RESPONSES, meta(0, finish_reason=" "), "ng_trajectory.turns[0].model_calls[0].finish_reason: cannot be blank"),
    ("a chat stop with tool calls", CHAT, meta(0, finish_reason="stop"), "ng_trajectory.turns[0]: Chat finish reason 'stop' does not prove a completed response"),
    ("a messages tool_calls", RESPONSES, meta(0, dialect="messages", finish_reason="tool_calls"), "ng_trajectory.turns[0]: Messages stop reason 'tool_calls' does not prove a completed response"),
    ("a tool finish for text", RESPONSES, meta(2, finish_reason="tool_calls"), "ng_trajectory.turns[2]: finish reason 'tool_calls' contradicts the captured text-only output"),
    ("prompt and completion past total", RESPONSES, stats(prompt_tokens=5, completion_tokens=5), "ng_trajectory.turns[0]: model-call prompt_tokens plus completion_tokens exceeds total_tokens"),
    ("cached past prompt, no total", RESPONSES, stats(prompt_tokens=5, cached_tokens=6, total_tokens=None),
     "ng_trajectory.turns[0]: model-call cached_tokens exceeds prompt_tokens; cached tokens must be a subset"),
    ("reasoning past completion, no total", RESPONSES, stats(completion_tokens=1, reasoning_tokens=2, total_tokens=None),
     "ng_trajectory.turns[0]: model-call reasoning_tokens exceeds completion_tokens; reasoning tokens must be a subset"),
    ("a part not an object", RESPONSES, lambda r, t, c, *_: edit(t, c[0], content=["x"]), f"{CONV}[0].content[0]: only text content parts are supported"),  # NeMo Gym: invalid
    ("a part of blank type", RESPONSES, lambda r, t, c, *_: edit(t, c[0], content=[{"type": " "}]), f"{CONV}[0].content[0].type: expected a non-empty supported content-part type"),
    ("an image part", RESPONSES, lambda r, t, c, *_: edit(t, c[0], content=[{"type": "input_image", "image_url": "u", "detail": "auto"}]), f"{CONV}[0].content[0]: only text content parts are supported"),
    ("an item of blank type", RESPONSES, lambda r, t, c, *_: c[1].update(type=" "), f"{CONV}[1].type: expected a non-empty supported conversation item type"),
    ("a hosted tool item", RESPONSES, lambda r, t, c, *_: c[1].update(type="web_search_call"), f"{CONV}[1].type: unsupported conversation item type 'web_search_call'"),
    ("a status on text content", RESPONSES, lambda r, t, c, *_: edit(t, c[0], status="completed"), f"{CONV}[0].status: source-message status is only supported with multipart content"),
    ("a namespace", RESPONSES, lambda r, t, c, *_: edit(t, c[2], namespace="ns"), f"{CONV}[2].namespace: namespaced Responses function calls are not representable in ATIF v1.7"),
    ("empty content", RESPONSES, lambda r, t, c, *_: edit(t, c[0], content=[]), f"{CONV}[0].content: expected non-empty scalar or multipart text content"),
    ("a part's text a number", RESPONSES, lambda r, t, c, *_: edit(t, c[0], content=[{"type": "input_text", "text": 5}]), f"{CONV}[0].content[0].text: expected a string"),  # NeMo Gym: invalid
    ("an annotation", RESPONSES, lambda r, t, c, *_: edit(t, c[8], content=[{"type": "output_text", "text": "D", "annotations": [{"type": "url_citation", "url": "u", "title": "t", "start_index": 0, "end_index": 1}]}]),
     f"{CONV}[8].content[0]: annotations and log probabilities are not representable"),
    ("an incomplete input", RESPONSES, lambda r, t, c, *_: edit(t, c[0], status="incomplete", content=TEXT), f"{CONV}[0].status: expected completed, got 'incomplete'"),
    ("an answer without parts", RESPONSES, lambda r, t, c, *_: edit(t, c[8], content=[]), f"{CONV}[8].content: expected at least one output_text part"),
    ("reasoning content and summary", RESPONSES, lambda r, t, c, *_: edit(t, c[1], content=[{"type": "reasoning_text", "text": "x"}]),
     f"{CONV}[1].reasoning[0]: reasoning with both content and summary cannot be represented without dropping one"),
    ("empty reasoning", RESPONSES, lambda r, t, c, *_: edit(t, c[1], summary=[]), f"{CONV}[1].reasoning[0]: encrypted or empty reasoning cannot be represented as ATIF text"),
    ("a reasoning segment without text", RESPONSES, lambda r, t, c, *_: edit(t, c[1], summary=[{"type": "summary_text"}]),  # NeMo Gym: invalid
     f"{CONV}[1].reasoning[0][0]: reasoning segment does not contain text"),
    ("arguments not an object", RESPONSES, lambda r, t, c, *_: edit(t, c[2], arguments="[1]"), f"{CONV}[1].tool_calls[0].arguments: expected a JSON object"),
    ("arguments with a key twice", RESPONSES, lambda r, t, c, *_: edit(t, c[2], arguments='{"a":1,"a":2}'), f"{CONV}[1].tool_calls[0].arguments: expected a JSON object string"),
    ("arguments with NaN", RESPONSES, lambda r, t, c, *_: edit(t, c[2], arguments='{"a":NaN}'), f"{CONV}[1].tool_calls[0].arguments: expected a JSON object string"),
    ("arguments past a float", RESPONSES, lambda r, t, c, *_: edit(t, c[2], arguments='{"a":1e999}'), f"{CONV}[1].tool_calls[0].arguments: expected a JSON object string"),
    ("arguments under a float", RESPONSES, lambda r, t, c, *_: edit(t, c[2], arguments='{"a":1e-999}'), f"{CONV}[1].tool_calls[0].arguments: expected a JSON object string"),
    ("arguments finer than a float", RESPONSES, lambda r, t, c, *_: edit(t, c[2], arguments='{"a":0.10000000000000000001}'), f"{CONV}[1].tool_calls[0].arguments: expected a JSON object string"),
    # what gym-metrics exported or crashed on, NeMo Gym refuses:
    ("a call_id a number", RESPONSES, lambda r, t, c, *_: edit(t, c[2], call_id=5), f"{CONV}[2].call_id: expected a string"),  # NeMo Gym: invalid
    ("a result without call_id", RESPONSES, lambda r, t, c, *_: edit(t, c[4], call_id=None), f"{CONV}[4].call_id: expected a string"),  # NeMo Gym: invalid
    ("a message of role tool", RESPONSES, lambda r, t, c, *_: edit(t, c[0], role="tool"), f"{CONV}[0].role: unsupported message role 'tool'"),  # NeMo Gym: invalid
    ("a message without role", RESPONSES, lambda r, t, c, *_: edit(t, c[0], role=None), f"{CONV}[0].role: unsupported message role None"),  # NeMo Gym: invalid
    ("an agent_ref not an object", RESPONSES, lambda r, *_: r.update(agent_ref="agent", _ng_environment_server="env"), "agent_ref: expected an object, got str"),  # NeMo Gym crashes
    ("a model_ref with a field more", JOINED, lambda r, t, *_: [m.update(extra=1) for m in [t["turns"][0]["model_calls"][0]["model_ref"], t["model_calls"][0]["response_metadata"]["model_ref"]]],
     "ng_trajectory.turns[0].model_calls[0].model_ref: unsupported fields would be dropped: 'extra'"),
    ("a call's model_ref with a field more", JOINED, lambda r, t, *_: t["model_calls"][1]["response_metadata"]["model_ref"].update(extra=1),
     "ng_trajectory.model_calls[1].response_metadata.model_ref: unsupported fields would be dropped: 'extra'"),
    ("a blank call id", JOINED, lambda r, t, *_: t["model_calls"][0].update(model_call_id=" "), "ng_trajectory.model_calls[0].model_call_id: cannot be blank"),
    ("a blank call response id", RESPONSES, lambda r, t, c, turns, md: (turns[0]["model_calls"][0].update(response_id=None), md[0].update(response_id=" ")),
     "ng_trajectory.model_calls[0].response_metadata.response_id: cannot be blank"),
    # parts and ids NeMo Gym's typed items do not take (gym-metrics exported each row; every outcome here checked by running
    # NeMo Gym 0.7.0's gym_rollout_to_atif on the same row; "invalid": its "ng_trajectory: missing or invalid v1.0 trajectory")
    ("an output_text part from the user", RESPONSES, lambda r, t, c, *_: edit(t, c[0], content=[OUT("hi")]), f"{CONV}[0].content[0].type: {USER_PARTS}'output_text'"),  # NeMo Gym: invalid
    ("a text part from the user", RESPONSES, lambda r, t, c, *_: edit(t, c[0], content=[*TEXT, {"type": "text", "text": "x"}]), f"{CONV}[0].content[1].type: {USER_PARTS}'text'"),  # NeMo Gym: invalid
    ("an output_text tool result", RESPONSES, lambda r, t, c, *_: (edit(t, c[4], output=[OUT("x")]), t["tool_calls"][0].update(output=[OUT("x")])),
     f"{CONV}[4].output[0].type: a tool result holds only input_text, input_image or input_file parts, got 'output_text'"),  # NeMo Gym: invalid
    ("a text tool result", RESPONSES, lambda r, t, c, *_: (edit(t, c[4], output=[{"type": "text", "text": "x"}]), t["tool_calls"][0].update(output=[{"type": "text", "text": "x"}])),
     f"{CONV}[4].output[0].type: a tool result holds only input_text, input_image or input_file parts, got 'text'"),  # NeMo Gym: invalid
    ("an answer as a string", RESPONSES, lambda r, t, c, *_: edit(t, c[8], content="Done."), f"{CONV}[8].role: copied assistant context is not supported"),
    ("an answer of input_text", RESPONSES, lambda r, t, c, *_: edit(t, c[8], content=TEXT), f"{CONV}[8].role: copied assistant context is not supported"),
    ("an answer of text", RESPONSES, lambda r, t, c, *_: edit(t, c[8], content=[{"type": "text", "text": "D"}]),
     f"{CONV}[8].content[0].type: an assistant message holds only input_text, input_image, input_file or input_video parts, got 'text'"),  # NeMo Gym: invalid
    ("an answer's input_text second", RESPONSES, lambda r, t, c, *_: edit(t, c[8], content=[OUT(), *TEXT]),
     f"{CONV}[8].content[1].type: an assistant answer holds only output_text or refusal parts, got 'input_text'"),  # NeMo Gym: invalid
    ("output_text without annotations", RESPONSES, lambda r, t, c, *_: edit(t, c[8], content=[{"type": "output_text", "text": "D"}]),
     f"{CONV}[8].content[0].annotations: expected a list (an output_text part requires one)"),  # NeMo Gym: invalid
    ("a summary of reasoning_text", RESPONSES, lambda r, t, c, *_: edit(t, c[1], summary=[{"type": "reasoning_text", "text": "x"}]),
     f"{CONV}[1].summary[0].type: a reasoning summary holds only summary_text parts, got 'reasoning_text'"),  # NeMo Gym: invalid
    ("reasoning content of summary_text", RESPONSES, lambda r, t, c, *_: edit(t, c[1], summary=[], content=[{"type": "summary_text", "text": "x"}]),
     f"{CONV}[1].content[0].type: a reasoning content list holds only reasoning_text parts, got 'summary_text'"),  # NeMo Gym: invalid
    ("reasoning without summary", RESPONSES, lambda r, t, c, *_: (edit(t, c[1], content=[{"type": "reasoning_text", "text": "x"}]), edit(t, c[1], summary=None)),
     f"{CONV}[1].summary: expected a list, got None"),  # NeMo Gym: invalid
    ("reasoning without id", RESPONSES, lambda r, t, c, *_: edit(t, c[1], id=None), f"{CONV}[1].id: missing (a string is required)"),  # NeMo Gym: invalid
    ("an answer id of null", RESPONSES, lambda r, t, c, turns, md: [i.update(id=None) for i in (c[8], turns[2]["answer"][0])], f"{CONV}[8].id: expected a string, got None"),  # NeMo Gym: invalid
    ("a call id a number", RESPONSES, lambda r, t, c, *_: edit(t, c[2], id=5), f"{CONV}[2].id: expected a string, got 5"),  # NeMo Gym: invalid
    ("a null status in an answer's copy", RESPONSES, lambda r, t, c, turns, md: (c[8].pop("status"), turns[2]["answer"][0].update(status=None)),
     "ng_trajectory.turns[2].answer[0].status: expected in_progress, completed or incomplete, got None"),  # NeMo Gym: ...answer: missing or invalid Responses conversation items
    ("a list status on user parts", RESPONSES, lambda r, t, c, *_: edit(t, c[0], content=TEXT, status=[]),
     f"{CONV}[0].status: expected a scalar (any other status is ignored), got list"),  # NeMo Gym: invalid (gym-metrics exported it, ignoring the status)
    ("a number past 64 bits in a turn's copy", RESPONSES, lambda r, t, c, turns, md: turns[2]["answer"][0]["content"][0].update(text=2**70),
     "ng_trajectory.turns[2].answer: does not match the exported agent answer"),  # NeMo Gym: ...answer: missing or invalid Responses conversation items; gym-metrics crashed (orjson: TypeError)
    ("a record's output with a null field", RESPONSES, lambda r, t, c, *_: (edit(t, c[4], output=TEXT), t["tool_calls"][0].update(output=[{**TEXT[0], "n": None}])),
     f"{CONV}[1]: tool execution 'call_0' has a different recorded output"),  # compared as written, nulls too
]  # fmt: skip


@pytest.mark.parametrize("base, change, error", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_each_row_the_profile_cannot_hold_is_refused_naming_why(base: str, change: Any, error: str) -> None:
    with pytest.raises(AtifRefused) as refused:
        convert(changed(base, change))
    assert str(refused.value) == error


def test_rows_nemo_gym_exports_whole_keep_what_they_hold() -> None:
    """A tool result's id, integer times (as floats), no token counts (no metrics, no totals),
    the environment's stamp as agent name, an answer without status and an input whose status
    is null (both complete to NeMo Gym: the row was refused before), as NeMo Gym exports them."""

    def change(r: dict[str, Any], t: dict[str, Any], c: list[Any], turns: list[Any], md: list[Any]) -> None:
        edit(t, c[4], id="fco_0")
        edit(t, c[8], status=None)
        edit(t, c[0], status=None, content=TEXT)
        for turn in turns:  # the input's copies keep a null status (edit removes a field given None)
            turn["question"][0]["status"] = None
        c[0]["status"] = None
        t["tool_calls"][0].update(started_at=5, completed_at=7, duration_ms=2, sandbox_id="sb")
        t["invocations"][0]["duration_ms"] = 12
        for call in t["model_calls"]:
            call["token_stats"] = {}
        r.update(_ng_environment_server="env", agent_ref=None)

    atif = convert(changed(RESPONSES, change))
    assert atif["agent"]["name"] == "env" and atif["steps"][0]["message"] == [{"type": "text", "text": "hi"}]
    assert atif["steps"][1]["observation"]["results"][0]["extra"] == {
        "nemo_gym": {"sandbox_id": "sb", "started_at": 5.0, "completed_at": 7.0, "duration_ms": 2.0, "timing_source": "executor", "source_item_id": "fco_0"}}  # fmt: skip
    assert isinstance(atif["steps"][1]["observation"]["results"][0]["extra"]["nemo_gym"]["started_at"], float)
    assert atif["steps"][-1]["message"] == [{"type": "text", "text": "Done."}] and atif["extra"]["nemo_gym"]["source"]["invocation_duration_ms"] == 12.0
    assert all("metrics" not in s for s in atif["steps"]) and atif["final_metrics"] == {"total_steps": 4}


def test_an_answer_copied_without_its_status_is_the_answer_nemo_gym_reads() -> None:
    """An answer's status left out of its turn's copy is NeMo Gym's default (completed); its
    converter exports the row as it does the row unchanged (run on both), gym-metrics refused it."""
    atif = convert(changed(RESPONSES, lambda r, t, c, turns, md: turns[2]["answer"][0].pop("status")))
    assert atif["extra"]["nemo_gym"].pop("exporter") and atif == {**REFERENCE[RESPONSES]["atif"], "extra": {"nemo_gym": {
        k: v for k, v in REFERENCE[RESPONSES]["atif"]["extra"]["nemo_gym"].items() if k != "exporter"}}}  # fmt: skip


def test_token_counts_without_a_total_are_kept_as_they_are() -> None:
    atif = convert(changed(RESPONSES, stats(total_tokens=None)))
    assert atif["steps"][1]["metrics"] == {"prompt_tokens": 8, "completion_tokens": 0, "cached_tokens": 0, "extra": {"reasoning_tokens": 0}}


def test_a_row_of_python_values_that_are_not_json_is_refused_naming_where() -> None:
    for value, error in (({1: "a"}, "rollout.x: JSON object keys must be strings"), ({"y": b"1"}, "rollout.x.y: bytes is not a JSON value"),
                         ([True, None, 1.5, {"a"}], "rollout.x[3]: set is not a JSON value"),
                         ({"\ud800": 1}, "rollout.x.<key>: contains an unpaired Unicode surrogate and is not valid UTF-8 JSON")):  # fmt: skip
        with pytest.raises(AtifRefused) as refused:
            convert(changed(RESPONSES, lambda r, *_: r.update(x=value)))
        assert str(refused.value) == error
    for name in ("session_id", "agent_version"):
        with pytest.raises(AtifRefused, match=f"^{name}: expected a non-empty string$"):
            rollout_to_atif(BY_NAME[RESPONSES], **{"session_id": "s", "agent_version": "v", "exporter_version": "t", name: " "})  # type: ignore[arg-type]
