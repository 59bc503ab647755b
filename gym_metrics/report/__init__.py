"""The HTML report: one self-contained page (inline SVG charts, no network) per metrics file.

`build_report(metrics_json, output)` writes it, with a bounded sample of the rollouts file
beside the metrics read rollout by rollout (prompt, turns, tool calls beside their outputs,
answer: docs/report.md); `gym-metrics report` and `--report` on
`aggregate` / `collect` call it. `open_in_chromium` loads a report in headless Chromium
through the DevTools protocol (console errors, network requests, timings, a screenshot): what
the tests and `scripts/bench_report.py` use.
"""

from __future__ import annotations

from gym_metrics.report._build import build_report, render, report_path_for
from gym_metrics.report._chromium import PageLoad, find_chromium, open_in_chromium
from gym_metrics.report._data import AgentData, load_metrics
from gym_metrics.report._sections import Gates

__all__ = [
    "AgentData",
    "Gates",
    "PageLoad",
    "build_report",
    "find_chromium",
    "load_metrics",
    "open_in_chromium",
    "render",
    "report_path_for",
]
