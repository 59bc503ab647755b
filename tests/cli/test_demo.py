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
