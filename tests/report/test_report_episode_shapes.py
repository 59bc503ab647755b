"""The report's Rollouts section for rows in every shape `episode` reads: content that is not a
string (null, an object, parts without text, bare strings and numbers in a part list), tool
arguments that are not JSON text, outputs matching no call or a call already answered, items of
other types, prompt items that are not messages, single-turn answers as a string, chat
completions with reasoning and malformed tool calls, and failure notes. Each row goes through a
real rollouts file, `aggregate` and `gym-metrics report`; the page's text is checked."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from gym_metrics.cli import main
from gym_metrics.report._episode import MAX_ITEMS, episode, is_error


def _row(task: int, response: Any, params: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"agent_ref": {"name": "a"}, "_ng_task_index": task, "_ng_rollout_index": 0, "reward": 1.0,
            "responses_create_params": params or {"input": "q"}, "response": response, **extra}  # fmt: skip


def _report(tmp_path: Path, rows: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Each task's text in the report made by the CLI from `rows`."""
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    assert main(["aggregate", str(path)]) == 0
    assert main(["report", str(tmp_path / "run_aggregate_metrics.json")]) == 0
    assert "error" not in capsys.readouterr().err
    page = (tmp_path / "run_report.html").read_text()
    section = re.search(r'<section id="rollouts".*?</section>', page, re.S)
    assert section
    tasks = section.group(0).split('<details class="task"')[1:]
    return [html.unescape(" ".join(re.sub(r"<[^>]+>", " ", t).split())) for t in tasks]


RESPONSES_ITEMS = [
    {"type": "message", "content": None},
    {"type": "message", "content": {"k": "v"}},
    {"type": "message", "content": [{"type": "output_text", "text": 5, "refusal": "I refuse"}, {"type": "image"}, None, "plain", 7]},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "not json {"},
    {"type": "function_call", "call_id": "c2", "name": "g", "arguments": {"x": 1}},
    {"type": "function_call_output", "call_id": "zz", "output": "orphan"},
    {"type": "function_call_output", "call_id": "c1", "output": '{"error": broken'},
    {"type": "function_call_output", "call_id": "c1", "output": "again"},
    {"type": "web_search_call", "id": "w1", "status": "completed"},
]  # fmt: skip


def test_every_responses_shape_is_shown_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompt = {"input": ["a bare string", {"type": "function_call_output", "call_id": "p", "output": "x"}]}
    rows = [_row(0, {"output": RESPONSES_ITEMS}, prompt, failure_reason="timeout", failure_kind={"k": 1}),
            _row(1, "a plain string answer"), _row(2, {"status": "completed"})]  # fmt: skip
    shown = _report(tmp_path, rows, capsys)
    assert shown[0] == (
        'data-task="0"> task 0 · mean reward 1 · 1 rollouts reward 1 rollout 0 · 2 turns · 2 tool calls'
        ' item a bare string function_call_output { "type": "function_call_output", "call_id": "p", "output": "x" }'
        ' turn 1 assistant assistant {"k":"v"} assistant I refuse [image] plain 7'
        " call f c1 not json { output {\"error\": broken"  # not JSON: not marked as an error
        ' call g c2 { "x": 1 } output no output in the trajectory'
        " call (no matching call) zz output orphan call (no matching call) c1 output again"
        ' turn 2 web_search_call { "type": "web_search_call", "id": "w1", "status": "completed" }'
        ' failure_kind: {"k":1} failure_reason: timeout'
    )  # the hosted tool's item is not taken for the final answer
    assert shown[1].endswith("1 turn · 0 tool calls user q turn 1 final answer a plain string answer")
    assert shown[2].endswith("0 turns · 0 tool calls user q No answer in this row.")


def test_an_item_of_another_type_is_never_the_final_answer() -> None:
    ep = episode(_row(0, {"output": [{"type": "message", "content": "done"}, {"type": "web_search_call", "id": "w"}]}))
    assert ep.final == "done" and ep.turns[0].texts == ["done"]
    assert [(m.role, m.text) for m in ep.turns[0].others] == [("web_search_call", '{\n  "type": "web_search_call",\n  "id": "w"\n}')]
    assert episode(_row(0, {"output": [{"type": "web_search_call", "id": "w"}]})).final is None


def test_chat_completions_with_reasoning_and_malformed_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def chat(message: Any) -> dict[str, Any]:
        return {"choices": [{"message": message}]}

    rows = [
        _row(0, chat({"reasoning_content": "think", "content": None, "tool_calls": [{"id": "t", "function": {"name": "h", "arguments": "{}"}}]})),
        _row(1, chat({"content": "x", "tool_calls": [{"id": "t", "function": None}, "oops"]}), {"input": "q", "tools": 5}),
        _row(2, chat({"content": "y", "tool_calls": "abc"}), {"input": "q", "tools": {"name": "f"}}),
        _row(3, chat("not a message")),
    ]  # fmt: skip
    shown = _report(tmp_path, rows, capsys)  # a malformed call or tools list stopped the report (AttributeError, TypeError)
    assert shown[0].endswith("1 turn · 1 tool call user q turn 1 reasoning think call h t {} output no output in the trajectory")
    assert shown[1].endswith(
        '1 turn · 1 tool call user q turn 1 assistant x tool_calls { "type": "tool_calls", "value": "oops" }'
        " call None t null output no output in the trajectory"
    )
    assert shown[2].endswith('0 tool calls user q turn 1 final answer y tool_calls { "type": "tool_calls", "value": "abc" }')
    assert shown[3].endswith("0 turns · 0 tool calls user q No answer in this row.")


def test_an_error_output_is_json_with_an_error() -> None:
    assert is_error('{"error": "boom"}') and not is_error('{"error": broken') and not is_error('{"error": ""}')
    assert not is_error('["error"]') and not is_error('{"ok": "error"}')


def test_a_long_trajectory_is_cut_and_says_how_much(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompt = {"input": [{"role": "user", "content": f"q{i}"} for i in range(3)]}
    calls = [{"type": "function_call", "call_id": f"c{i}", "name": "f", "arguments": "{}"} for i in range(250)]
    many_prompts = {"input": [{"role": "user", "content": f"p{i}"} for i in range(MAX_ITEMS + 7)]}
    shown = _report(tmp_path, [_row(0, {"output": calls}, prompt), _row(1, {"output": calls[:2]}, many_prompts)], capsys)
    budget = MAX_ITEMS - 3
    assert shown[0].count(" call f ") == budget and f" call f c{budget - 1} " in shown[0] and f"c{budget} " not in shown[0]
    assert shown[0].endswith(f"{250 - budget} more items not shown.")
    assert shown[1].count("user p") == MAX_ITEMS and " call f " not in shown[1]
    assert shown[1].endswith("9 more items not shown.")  # 7 prompt items and both calls
