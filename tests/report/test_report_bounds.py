"""What a page may repeat is bounded (issue 23, defect 8): long agent names are drawn cut and
listed in full once, at most MAX_AGENTS agents are drawn, the task table ships what the file
holds (not agents x all tasks); a string or object where a number belongs is exit 2 naming
the file, the agent and the key, never an internal error."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from gym_metrics.cli import main
from gym_metrics.report import AgentData, Gates, build_report, open_in_chromium, render
from gym_metrics.report._bounds import MAX_AGENTS, MAX_KEY_METRICS, NAME_CHARS

LONG = 300_000
RSS = """
import re, sys
from gym_metrics.cli import main
code = main(["report", sys.argv[1], "-o", sys.argv[2]])
# VmHWM, not ru_maxrss: ru_maxrss keeps the peak of the forked parent (pytest) across exec
hwm = re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)
print("exit", code, "rss_kb", hwm)
"""


def _edit(src: Path, out: Path, change: Any) -> Path:
    doc = orjson.loads(src.read_bytes())
    change(doc)
    out.write_text(json.dumps(doc))  # json: writes samples nested deeper than orjson does
    return out


def _long_names(doc: list[dict[str, Any]]) -> None:
    """Three 300 KB names; the third agent lacks task 0 (its table row is sparse)."""
    for entry, letter in zip(doc, "abc"):
        entry["agent_ref"]["name"] = letter * LONG
    doc[2]["group_level_metrics"].pop(0)


def test_three_300kb_agent_names_give_a_page_bounded_by_the_input(three_agents: Path, tmp_path: Path) -> None:
    """Was 112 MB (258 MB with more rows) and 520 MB RSS from a 1.2 MB file: every cell, bar,
    point and pair repeated the names."""
    src = _edit(three_agents, tmp_path / "long_aggregate_metrics.json", _long_names)
    out = tmp_path / "long.html"
    done = subprocess.run([sys.executable, "-c", RSS, str(src), str(out)], capture_output=True, text=True, timeout=300)
    code, rss_kb = map(int, re.findall(r"exit (\d+) rss_kb (\d+)", done.stdout)[0])
    assert code == 0, done.stderr
    size, given = out.stat().st_size, src.stat().st_size
    assert size < 2 * given + 1_000_000, f"{size / 1e6:.1f} MB page from {given / 1e6:.1f} MB"
    assert rss_kb < 400_000, f"{rss_kb / 1e3:.0f} MB RSS"
    html = out.read_text()
    assert len(re.findall(r"a{100,}", html)) == 1  # the full name once (cut at FULL_NAME_CHARS), nowhere else
    shown = re.findall(r"a{10,}…\[[0-9a-f]{8}\]", html)
    assert shown and all(len(s) <= NAME_CHARS for s in shown)


@pytest.mark.slow
def test_long_names_and_a_sparse_agent_in_chromium(three_agents: Path, tmp_path: Path, chromium: str) -> None:
    src = _edit(three_agents, tmp_path / "long_aggregate_metrics.json", _long_names)
    page = build_report(src, tmp_path / "long.html")
    row = "[...document.querySelector('#task-table tbody tr').children].map(td => td.textContent)"
    load = open_in_chromium(page, binary=chromium, evaluate=[row])
    assert load.console_errors == [] and load.requests == []
    cells = load.values[0]
    assert cells[0] == "0" and cells[1] != "" and cells[3] == ""  # task 0: the third agent has none


def _agent(name: str, tasks: np.ndarray) -> AgentData:
    means = (tasks % 7) / 7.0
    keys = {f"{name}/k{j}": "<text>" * 100 for j in range(10)}  # a row each, a cell per agent in each row
    return AgentData(name=name, agent_metrics={"mean/reward": float(means.mean())}, key_metrics=keys,
                     tasks=tasks.astype(np.int64), task_mean=means, rollouts=None)  # fmt: skip


def test_many_agents_on_disjoint_tasks_stay_small() -> None:
    """Was a dense agents x tasks matrix (60 x 60k nulls) and every agent drawn."""
    agents = [_agent(f"agent{i}", np.arange(i * 1000, (i + 1) * 1000)) for i in range(MAX_AGENTS + 10)]
    html = render(agents, "reward", Gates(), "many")
    assert f"{MAX_AGENTS + 10} agents, the first {MAX_AGENTS} drawn" in html
    data = orjson.loads(re.search(r'id="task-data">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert len(data["agents"]) == MAX_AGENTS and len(data["tasks"]) == MAX_AGENTS * 1000
    assert sum(map(len, data["means"])) == MAX_AGENTS * 1000
    assert f"The first {MAX_KEY_METRICS} of {MAX_AGENTS * 10} key metrics." in html
    assert html.count("agent0/k") == 10 and "agent49/k" not in html
    assert len(html.encode()) < 5_000_000, f"{len(html.encode()) / 1e6:.1f} MB"


def _set(*path: Any, value: Any) -> Any:
    def change(doc: Any) -> None:
        target = doc[0]
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


WRONG = [
    (("agent_metrics", "cluster_ci_low_95/reward"), "0.1", "cluster_ci_low_95/reward is a string, not a number"),
    (("agent_metrics", "mean/reward"), {"v": 1}, "mean/reward is an object, not a number"),
    (("agent_metrics", "mean_across_repeats/mean/reward"), [1], "mean_across_repeats/mean/reward is a list, not a number"),
    (("key_metrics", "mean/reward"), "high", "key_metrics: mean/reward is a string"),
    (("economics",), {"economics/passing_tasks": "3"}, "economics/passing_tasks is a string"),
    (("repeat_level_metrics", 0, "mean/reward"), "0.5", "repeat_level_metrics[0].mean/reward is a string"),
    (("repeat_level_metrics", 1, "ci_low_95/reward"), True, "repeat_level_metrics[1].ci_low_95/reward is a boolean"),
    (("group_level_metrics", 3, "_ng_task_index"), "3", "group_level_metrics[3]._ng_task_index is a string, not an integer"),
    (("group_level_metrics", 0, "rollout_infos", 1, "_ng_rollout_index"), 1.5, "_ng_rollout_index is a number, not an integer"),
    (("group_level_metrics", 0, "rollout_infos"), "none", "group_level_metrics[0].rollout_infos is a string, not a list"),
    (("group_level_metrics",), {"0": {}}, "group_level_metrics is an object, not a list"),
    (("agent_metrics",), [1.0], "agent_metrics is a list, not an object"),
]


@pytest.mark.parametrize(("path", "value", "message"), WRONG, ids=[".".join(map(str, p)) for p, _, _ in WRONG])
def test_a_wrong_type_is_exit_2_naming_file_agent_and_key(
    three_agents: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], path: tuple[Any, ...], value: Any, message: str
) -> None:
    src = _edit(three_agents, tmp_path / "bad_aggregate_metrics.json", _set(*path, value=value))
    assert main(["report", str(src), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert message in err and str(src) in err and "agent baseline" in err, err
    assert "internal error" not in err


def test_agent_ref_that_is_not_an_object(three_agents: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _edit(three_agents, tmp_path / "bad_aggregate_metrics.json", _set("agent_ref", value="baseline"))
    assert main(["report", str(src)]) == 2
    err = capsys.readouterr().err
    assert "agent 0: agent_ref is a string, not an object" in err and "internal error" not in err


def test_null_statistics_and_deep_samples_still_give_a_page(three_agents: Path, tmp_path: Path) -> None:
    """null is "no value" (n/a), not an error; a sample nested deeper than JSON output allows
    is named, not a crash."""

    def change(doc: list[dict[str, Any]]) -> None:
        doc[0]["agent_metrics"]["cluster_ci_low_95/reward"] = None
        doc[1]["agent_metrics"]["mean/reward"] = None
        deep: Any = 1
        for _ in range(300):
            deep = [deep]
        doc[0]["group_level_metrics"][0]["sample"] = deep
        doc[0]["group_level_metrics"][1]["sample"] = json.loads("[" * 40 + "1" + "]" * 40)  # 81 characters

    src = _edit(three_agents, tmp_path / "nulls_aggregate_metrics.json", change)
    html = build_report(src, tmp_path / "r.html").read_text()
    data = json.loads(re.search(r'id="task-data">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert "nested too deep" in data["samples"][0]["0"]
    assert data["samples"][0]["1"] == "[" * 40 + "1" + "]" * 40  # indented it would fill SAMPLE_CHARS
    assert data["samples"][0]["2"].startswith("{\n  ")  # an everyday sample stays indented
    assert "n/a" in html


def test_a_message_content_or_tool_output_nested_deep_is_shown_as_json(tmp_path: Path) -> None:
    """A content list nested 300 deep was flattened level by level (each level a call of two
    functions): RecursionError, exit 1, no report. A list in a list is now shown as JSON."""
    nested: Any = "x"
    for _ in range(300):
        nested = [nested]
    rows = []
    for r in range(2):
        output = [{"type": "message", "role": "assistant", "content": nested if r else "ok"},
                  {"type": "function_call", "name": "f", "call_id": "c1", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "c1", "output": nested if r else "done"}]  # fmt: skip
        rows.append({"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": r, "reward": 1.0,
                     "responses_create_params": {"input": [{"role": "user", "content": "hi"}]}, "response": {"output": output}})  # fmt: skip
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["aggregate", str(path), "--report"]) == 0
    page = (tmp_path / "run_report.html").read_text()
    assert "[[[[[[" in page  # the nested content, as JSON
