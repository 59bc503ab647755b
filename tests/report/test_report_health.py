"""The report's Rollout health section (issue 40: health feeds the report): drawn from the
metrics file's `health` sections (`gym-metrics health --metrics`, `collect --health`), every
text from the file escaped; absent without them."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from gym_metrics.cli import main
from gym_metrics.errors import InvalidInputError
from gym_metrics.report import build_report

DATA = Path(__file__).parents[1] / "data" / "health"
EVIL = '<img src=x onerror="window.__pwned=1">'


def _run(tmp_path: Path) -> tuple[Path, Path]:
    """A run of two agents (one with the rollouts of the clean health cases, one named EVIL
    without trajectories), aggregated, and its health written into the metrics file."""
    clean = [json.loads(line) for line in (DATA / "clean.jsonl").read_text().splitlines()]
    plain = [json.loads(line) for line in (DATA / "no_trajectory.jsonl").read_text().splitlines()]
    rows = [{**r, "agent_ref": {"name": "policy"}} for r in clean]
    rows += [{**r, "agent_ref": {"name": EVIL}, "_ng_task_index": 100 + n} for n, r in enumerate(plain)]
    rows[0]["response"]["usage"]["output_tokens"] += 1  # one transcript that disagrees with its calls
    rollouts = tmp_path / "run.jsonl"
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["aggregate", str(rollouts), "-q"]) == 0
    metrics = tmp_path / "run_aggregate_metrics.json"
    assert main(["health", str(rollouts), "-o", str(tmp_path), "--metrics", str(metrics)]) == 0
    return rollouts, metrics


def test_the_section_shows_each_agents_verdicts_and_the_checks_that_found_something(tmp_path: Path) -> None:
    _, metrics = _run(tmp_path)
    html = build_report(metrics, tmp_path / "r.html").read_text()
    section = html[html.index('<section id="health"') : html.index("</section>", html.index('<section id="health"'))]
    assert '<a href="#health">Health</a>' in html and "<h2>Rollout health</h2>" in section
    escaped = EVIL.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    assert EVIL not in html and escaped in section
    assert "<td>policy</td><td>6</td><td>5</td><td>1 (16.7%)</td><td>0</td>" in section  # checked, healthy, unhealthy, unobserved
    assert f"<td>{escaped}</td><td>6</td><td>0</td><td>0 (0.0%)</td><td>6</td>" in section
    assert "<td>rollout_token_count_mismatch</td><td>0</td><td>1</td>" in section  # agents in the file's order
    assert "model_call_failed" not in section  # a check that found nothing is not tabled


def test_text_from_the_health_section_is_escaped_and_its_types_checked(tmp_path: Path) -> None:
    _, metrics = _run(tmp_path)
    doc = orjson.loads(metrics.read_bytes())
    doc[0]["health"]["issues"]["</td><script>alert(1)</script>"] = 2
    doc[0]["health"]["ignored_checks"] = ["<b>ignored</b>"]
    metrics.write_bytes(orjson.dumps(doc))
    html = build_report(metrics, tmp_path / "r.html").read_text()
    assert "<script>alert(1)" not in html and "&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>ignored" not in html and "Ignored: &lt;b&gt;ignored&lt;/b&gt;." in html
    doc[0]["health"]["verdicts"]["healthy"] = "5"
    metrics.write_bytes(orjson.dumps(doc))
    with pytest.raises(InvalidInputError, match=r"health.verdicts.healthy is a string, not a number"):
        build_report(metrics, tmp_path / "r.html")


def test_no_section_without_health_in_the_metrics_file(tmp_path: Path) -> None:
    rollouts, metrics = _run(tmp_path)
    assert main(["aggregate", str(rollouts), "-q"]) == 0  # written again: no health section
    html = build_report(metrics, tmp_path / "r.html").read_text()
    assert 'id="health"' not in html and "Rollout health" not in html
