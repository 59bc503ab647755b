"""`gym-metrics demo`, the README's main job: serves math_exact in-process, collects its shipped
sample and writes both files; the metrics equal an in-process aggregate of what it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gym_metrics import aggregate_file, resolve_server


def test_demo_collects_the_sample_and_writes_its_metrics(tmp_path: Path) -> None:
    out = tmp_path / "demo_out"
    done = subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "demo", "--out-dir", str(out)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rollouts = out / "math_exact_rollouts.jsonl"
    metrics = out / "math_exact_rollouts_aggregate_metrics.json"
    sample = resolve_server("math_exact").sample
    assert sample is not None
    assert len(rollouts.read_text().splitlines()) == len(sample.read_text().splitlines())
    written = json.loads(metrics.read_text())
    agents = sorted({json.loads(line)["agent_ref"]["name"] for line in sample.read_text().splitlines()})
    assert [a["agent_ref"]["name"] for a in written] == agents
    env = resolve_server("math_exact")()
    again, _, _ = aggregate_file(
        rollouts, tmp_path / "again.json", compute_metrics_columns=env.compute_metrics_columns, get_key_metrics=env.get_key_metrics,
        column_metrics=env.column_metrics_hook(),
    )  # fmt: skip
    assert [a["agent_metrics"]["mean/reward"] for a in written] == [
        a["agent_metrics"]["mean/reward"] for a in json.loads(again.read_text())
    ]
    assert "mean/reward" in done.stdout and all(name in done.stdout for name in agents)


def test_demo_agent_runs_the_inventory_sample_as_episodes(tmp_path: Path) -> None:
    out = tmp_path / "demo_out"
    done = subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "demo", "--agent", "--out-dir", str(out)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (out / "inventory_episodes.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and sum(r["reward"] for r in rows) == 5  # the scripted policy reaches 5 goals
    assert all(any(i["type"] == "function_call_output" for i in r["response"]["output"]) for r in rows)
    metrics = json.loads((out / "inventory_episodes_aggregate_metrics.json").read_text())
    assert metrics[0]["agent_metrics"]["mean/reward"] == 0.625
    assert "16 tool calls (3 answered an error)" in done.stdout
