"""The Rollouts section in a real headless Chromium: the page loads without console errors or
network requests, a task's rollouts open, the tool calls' arguments and outputs are visible, the
reasoning stays collapsed until opened, and markup in the model's output stays inert text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gym_metrics.report import build_report, open_in_chromium

from _trajectory_sample import aggregated, crafted_rollouts

VISIBLE = """function visible(el) { return !!el && el.checkVisibility() && el.getBoundingClientRect().height > 0; }"""

BEFORE = VISIBLE + """
JSON.stringify({tasks: document.querySelectorAll('#rollouts details.task').length,
  open: document.querySelectorAll('#rollouts details[open]').length,
  args: visible(document.querySelector('#rollouts .call .args pre')),
  nav: !!document.querySelector('nav a[href="#rollouts"]')})"""

OPEN_ROLLOUT = VISIBLE + """
document.querySelector('#rollouts details.task summary').click();
document.querySelector('#rollouts details.task details.ro summary').click();
const ro = document.querySelector('#rollouts details.ro');
const calls = [...ro.querySelectorAll('.call')].map(c => ({
  name: c.querySelector('.fn').textContent,
  args: c.querySelector('.args pre').innerText, argsVisible: visible(c.querySelector('.args pre')),
  output: c.querySelector('.out pre').innerText, outputVisible: visible(c.querySelector('.out pre')),
  error: visible(c.querySelector('.out .b-err')),
  beside: c.querySelector('.args').getBoundingClientRect().right <= c.querySelector('.out').getBoundingClientRect().left}));
const reasoning = ro.querySelector('details.reasoning pre');
const before = visible(reasoning);
ro.querySelector('details.reasoning summary').click();
JSON.stringify({calls, reasoningBefore: before, reasoningAfter: visible(reasoning),
  final: ro.querySelector('.msg.final pre').textContent, finalVisible: visible(ro.querySelector('.msg.final pre'))})"""

INERT = """JSON.stringify({pwned: window.__pwned ?? null, title: document.title,
  scripts: document.scripts.length, images: document.querySelectorAll('#rollouts img').length})"""


@pytest.mark.slow
def test_a_rollout_opens_and_reads_in_chromium(tmp_path: Path, chromium: str) -> None:
    report = build_report(aggregated(crafted_rollouts(tmp_path / "run.jsonl")), tmp_path / "report.html")
    load = open_in_chromium(report, binary=chromium, width=1280, height=1300, evaluate=[BEFORE, OPEN_ROLLOUT, INERT])
    assert load.console_errors == []
    assert load.requests == []
    before, opened, inert = map(json.loads, load.values)
    assert before == {"tasks": 3, "open": 0, "args": False, "nav": True}
    weather, time_ = opened["calls"]
    assert weather["name"] == "get_weather" and weather["argsVisible"] and weather["outputVisible"] and weather["beside"]
    assert '"city": "Paris"' in weather["args"] and "\n" in weather["args"]  # pretty-printed
    assert weather["output"].startswith("<script>document.title=") and not weather["error"]
    assert time_["name"] == "get_time" and "unknown time zone" in time_["output"] and time_["error"]
    assert opened["reasoningBefore"] is False and opened["reasoningAfter"] is True
    assert opened["finalVisible"] and opened["final"].endswith("onerror=\"window.__pwned=2\">")
    assert inert == {"pwned": None, "title": "gym-metrics report: run_aggregate_metrics.json", "scripts": 2, "images": 0}
