"""The report's Rollouts section without a browser: trajectories read from the rollouts file
beside the metrics, tool calls beside their outputs, markup from the model shown as text, the
caps, and the page unchanged when there is no rollouts file."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from gym_metrics.report import _rollout_rows, build_report
from gym_metrics.report._episode import episode

from _trajectory_sample import DATA, HOSTILE, aggregated, crafted_row, crafted_rollouts, recorded_rollouts, single_turn_row


def rollouts_section(html: str) -> str:
    found = re.search(r'<section id="rollouts".*?</section>', html, re.S)
    assert found, "no Rollouts section"
    return found.group(0)


def rollout_blocks(html: str) -> list[str]:
    """Each rollout's HTML (up to the next rollout or task)."""
    return [block.split('<details class="task"')[0] for block in html.split('<details class="ro"')[1:]]


def calls(html: str) -> list[str]:
    """Each call block: its arguments and its output."""
    return re.findall(r'<div class="call">(.*?</div></div>)(?=<div class="call">|</div>)', html, re.S)


def test_recorded_episodes_show_every_call_beside_its_output(tmp_path: Path) -> None:
    metrics = aggregated(recorded_rollouts(tmp_path / "run.jsonl"))
    html = rollouts_section(build_report(metrics).read_text())
    tasks = re.findall(r'<details class="task" data-task="(\d+)"><summary>(.*?)</summary>', html)
    assert [t for t, _ in tasks] == ["0", "1", "2", "3", "4"]
    assert all("2 rollouts" in s for _, s in tasks)
    verified = [orjson.loads(line) for line in (DATA / "verify.jsonl").read_bytes().splitlines()]
    rollouts = rollout_blocks(html)
    assert len(rollouts) == len(verified) == 10
    for shown, row in zip(rollouts, verified):
        items = row["response"]["output"]
        wanted = [i for i in items if i["type"] == "function_call"]
        outputs = {i["call_id"]: i["output"] for i in items if i["type"] == "function_call_output"}
        blocks = calls(shown)
        assert len(blocks) == len(wanted)
        for block, call in zip(blocks, wanted):
            assert f'<span class="fn">{call["name"]}</span>' in block
            pretty = orjson.dumps(orjson.loads(call["arguments"]), option=orjson.OPT_INDENT_2).decode()
            assert pretty in block  # pretty-printed, quotes left as they are
            assert f"<pre>{outputs[call['call_id']]}</pre>" in block.split('class="out')[1]
        answer = items[-1]["content"][0]["text"]
        assert f'<div class="msg final"><div class="role">final answer</div><pre>{answer}</pre>' in shown
        assert f"<pre>{row['responses_create_params']['input'][0]['content']}</pre>" in shown
        assert f"reward {row['reward']:g}" in shown


def test_markup_from_the_model_is_text(tmp_path: Path) -> None:
    metrics = aggregated(crafted_rollouts(tmp_path / "run.jsonl"))
    html = build_report(metrics).read_text()
    plain = build_report(metrics, tmp_path / "plain.html", trajectories=False).read_text()
    assert 'id="rollouts"' not in plain
    assert html.count("<script") == plain.count("<script") == 2  # the task data and the page's own script
    assert "<img" not in html and "<script>document" not in html
    escaped = HOSTILE.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert html.count(escaped) == 2 * 2  # the tool output and the answer, in both rollouts of task 0


def test_an_output_is_matched_by_call_id_and_an_error_is_marked(tmp_path: Path) -> None:
    html = rollouts_section(build_report(aggregated(crafted_rollouts(tmp_path / "run.jsonl"))).read_text())
    first = rollout_blocks(html)[0]
    weather, time_ = calls(first)
    assert "get_weather" in weather and '&quot;' not in weather and '"units": {' in weather
    assert '<div class="out">' in weather and "b-err" not in weather
    assert "get_time" in time_ and "unknown time zone" in time_  # its output came first, beside its own call
    assert '<div class="out err"><div class="role">output <span class="badge b-err">error</span>' in time_
    assert "1 failed" in first and "120 tokens" in first
    assert '<details class="reasoning"><summary>reasoning</summary><pre>I should look up the weather first.</pre>' in first


def test_a_single_turn_answer_is_shown_as_the_final_answer(tmp_path: Path) -> None:
    html = rollouts_section(build_report(aggregated(crafted_rollouts(tmp_path / "run.jsonl"))).read_text())
    task = re.search(r'<details class="task" data-task="1">.*?</div></details></div></details>', html, re.S).group(0)  # type: ignore[union-attr]
    assert task.count('<div class="msg final"><div class="role">final answer</div><pre>42</pre>') == 2
    assert "<pre>What is 6 x 7?</pre>" in task and "0 tool calls" in task


def test_without_a_rollouts_file_the_page_is_unchanged(tmp_path: Path) -> None:
    rollouts = crafted_rollouts(tmp_path / "run.jsonl")
    metrics = aggregated(rollouts)
    off = build_report(metrics, tmp_path / "off.html", trajectories=False).read_bytes()
    rollouts.rename(tmp_path / "elsewhere.jsonl")
    absent = build_report(metrics, tmp_path / "absent.html").read_bytes()
    assert absent == off and b'id="rollouts"' not in off and b"#rollouts" not in off
    given = build_report(metrics, tmp_path / "given.html", rollouts=tmp_path / "elsewhere.jsonl").read_text()
    assert "From elsewhere.jsonl:" in rollouts_section(given)


def test_rollouts_per_task_and_tasks_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_rollout_rows, "MAX_TASKS", 3)
    rows = [single_turn_row(t, r, 1.0) for t in range(5) for r in range(12)]
    other = {"agent_ref": {"name": "someone_else"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    metrics = aggregated(path)
    path.write_bytes(b"not json\n" + b"".join(orjson.dumps(r) + b"\n" for r in [other, *rows]))  # lines aggregate would refuse
    html = rollouts_section(build_report(metrics).read_text())
    assert re.findall(r'data-task="(\d+)"', html) == ["0", "1", "2"]
    assert html.count('<details class="ro"') == 3 * _rollout_rows.ROLLOUTS_PER_TASK == 24
    assert "8 rollouts shown of 12 read" in html
    assert "Capped: tasks past the first 3 are not shown." in html
    assert "2 lines read are not rollout rows of these agents" in html  # another agent's row, a bad line
    assert "Capped: only the first" in html  # every task shown was full and the next ones are left out: reading stopped


def test_a_huge_file_is_read_only_up_to_the_byte_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_rollout_rows, "MAX_READ_BYTES", 200_000)
    big = "x" * 30_000
    rows = [crafted_row(t, r, 1.0) for t in range(40) for r in range(4)]
    for row in rows:
        row["response"]["output"][-1]["content"][0]["text"] = big
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    assert path.stat().st_size > 4_000_000
    page = build_report(aggregated(path))
    html = rollouts_section(page.read_text())
    assert "Capped: only the first 0.2 MB of the rollouts file were read." in html
    shown = html.count('<details class="ro"')
    assert 0 < shown <= 200_000 // 30_000
    assert page.stat().st_size < 400_000


def test_one_row_bigger_than_the_cap_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_rollout_rows, "MAX_READ_BYTES", 10_000)
    row = crafted_row(0, 0, 1.0)
    row["response"]["output"][-1]["content"][0]["text"] = "y" * 50_000
    path = tmp_path / "run.jsonl"
    path.write_bytes(orjson.dumps(row) + b"\n")
    html = rollouts_section(build_report(aggregated(path)).read_text())
    assert "Capped: only the first 0.0 MB" in html and "No rollout rows of these agents in run.jsonl." in html


def test_long_texts_are_cut() -> None:
    row = crafted_row(0, 0, 1.0)
    row["response"]["output"][-1]["content"][0]["text"] = "z" * 20_000
    final = episode(row).final
    assert final is not None and final.startswith("z" * 8000) and final.endswith("(12,000 more characters)")


def test_a_trajectory_cut_by_max_steps_has_no_final_answer() -> None:
    row = crafted_row(0, 0, 0.0)
    row["response"]["output"] = row["response"]["output"][:5]  # ends on a tool output
    row["response"]["status"] = "incomplete"
    row["response"]["metadata"] = {"ng_termination_message": "max steps reached"}
    ep = episode(row)
    assert ep.final is None and len(ep.turns) == 1 and ep.turns[0].calls[1].error
    assert ep.turns[0].calls[0].output is None  # c1's output was cut off
    assert ep.notes == ["incomplete: max steps reached"]


def test_a_chat_completion_answer_is_read() -> None:
    row = {"response": {"choices": [{"message": {"role": "assistant", "content": "hi", "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}}]},
        "responses_create_params": {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}],
                                    "tools": [{"type": "function", "function": {"name": "f"}}]}}  # fmt: skip
    ep = episode(row)
    assert [m.text for m in ep.prompt] == ["hello"] and ep.tools == ["f"]
    assert ep.turns[0].texts == ["hi"] and ep.turns[0].calls[0].name == "f" and ep.final is None
