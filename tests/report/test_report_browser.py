"""The report in a real headless Chromium (Debian's chromium, driven over the DevTools
protocol): it loads without console errors or network requests, every chart is in the DOM,
the task table sorts, pages and shows samples; a screenshot is written for the docs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gym_metrics.report import build_report, open_in_chromium

DOCS_SHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "report.png"
"""Refreshed when UPDATE_DOCS_SCREENSHOT=1 (the committed screenshot in docs/report.md)."""

CHART_COUNTS = """JSON.stringify(Object.fromEntries(['key-metrics', 'reward-distribution', 'task-heatmap-overview',
  'pass-at-k', 'repeats', 'usage-frontier', 'usage-vs-reward', 'paired-differences'].map(k => [k, {
    charts: document.querySelectorAll(`svg[data-chart="${k}"]`).length,
    marks: document.querySelectorAll(`svg[data-chart="${k}"] :is(circle, rect, polyline, polygon)`).length}])))"""

TABLE = """JSON.stringify({rows: document.querySelectorAll('#task-table tbody tr').length,
  first: document.querySelector('#task-table tbody tr').dataset.task,
  cells: document.querySelectorAll('#task-table tbody tr:first-child td').length,
  page: document.getElementById('page-info').textContent,
  verdict: document.getElementById('verdict')?.textContent ?? null})"""

SORT_BY_BASELINE = """(() => { document.querySelector('#task-table th[data-col="0"]').click();
  const v = [...document.querySelectorAll('#task-table tbody tr td:nth-child(2)')].map(td => parseFloat(td.textContent));
  return v.every((x, i) => i === 0 || v[i - 1] <= x); })()"""

NEXT_PAGE = """(() => { document.getElementById('next').click();
  return [document.getElementById('page-info').textContent, document.querySelectorAll('#task-table tbody tr').length]; })()"""

CLICK_ROW = """(() => { document.querySelector('#task-table tbody tr').click();
  const s = document.getElementById('sample');
  return [s.querySelector('h3').textContent, s.querySelectorAll('pre').length, s.querySelector('pre').textContent.slice(0, 1)]; })()"""


@pytest.mark.slow
def test_the_report_loads_cleanly_in_chromium(three_agents: Path, tmp_path: Path, chromium: str) -> None:
    import json

    report = build_report(three_agents, tmp_path / "report.html")
    shot = tmp_path / "report.png"
    load = open_in_chromium(
        report, screenshot=shot, binary=chromium, width=1280, height=1300,
        evaluate=[CHART_COUNTS, TABLE, SORT_BY_BASELINE, NEXT_PAGE, CLICK_ROW],
    )  # fmt: skip
    assert load.console_errors == []
    assert load.requests == []
    counts, table, sorted_ok, next_page, clicked = load.values
    for chart, found in json.loads(counts).items():
        assert found["charts"] >= 1 and found["marks"] > 0, chart
    assert json.loads(counts)["usage-vs-reward"]["charts"] == 2
    table = json.loads(table)
    assert table["rows"] == 50 and table["first"] == "0" and table["cells"] == 1 + 3 + 1  # task, agents, spread
    assert table["page"] == "page 1 of 2 (60 tasks)"
    assert table["verdict"] is None  # no rule and no --compare: no verdict asked for
    assert sorted_ok is True
    assert next_page == ["page 2 of 2 (60 tasks)", 10]
    assert clicked[0].startswith("Task ") and clicked[1] == 3
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":
        DOCS_SHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOCS_SHOT)


@pytest.mark.slow
def test_the_harness_sees_requests_and_errors(tmp_path: Path, chromium: str) -> None:
    """The checks above can fail: a page that fetches and logs an error is caught."""
    page = tmp_path / "leaky.html"
    page.write_text('<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body>'
                    '<img src="http://127.0.0.1:9/x.png"><script>console.error("boom"); undefinedCall();</script></body></html>')  # fmt: skip
    load = open_in_chromium(page, binary=chromium)
    assert "http://127.0.0.1:9/x.png" in load.requests
    assert any("boom" in e for e in load.console_errors)
    assert any("undefinedCall" in e for e in load.console_errors)
