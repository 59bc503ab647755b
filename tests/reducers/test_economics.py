"""Economics (issue 4 item 5): usage summaries per agent, missing never counted as zero."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.aggregate import Aggregator, aggregate_file
from gym_metrics.rollouts import RolloutColumns
from gym_metrics.aggregate.render._output import write_json
from gym_metrics.reducers import economics

E = "economics/"


def row(task: int, rollout: int, reward: float | None = None, usage: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"agent_ref": {"name": "a"}, "_ng_task_index": task, "_ng_rollout_index": rollout}
    if reward is not None:
        out["reward"] = reward
    if usage is not None:
        out["response"] = {"usage": usage}
    return {**out, **extra}


def usage(inp: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


ROWS = [
    row(0, 0, 1.0, usage(10, 1), latency_s=1.0, cost_usd=0.5),
    row(0, 1, 0.0, usage(20, 2), latency_s=2.0, cost_usd=0.25),
    row(1, 0, 0.5, usage(30, 3), latency_s=float("nan"), cost_usd=0.25),
    row(1, 1, 1.0, usage(40, 4), mask_sample=True, cost_usd=1.0),  # masked: paid for, but no pass
    row(2, 0, 0.0),  # no usage at all: missing, not zero
]


def test_per_rollout_stats_totals_and_missing_counts_are_exact() -> None:
    econ = economics(RolloutColumns.from_rows(ROWS))
    assert econ[E + "rollouts"] == 5 and econ[E + "tasks"] == 3
    # input tokens over the 4 rollouts that have them: 10, 20, 30, 40 (the masked one counts)
    assert econ[E + "input_tokens/rollouts"] == 4
    assert econ[E + "input_tokens/missing_rollouts"] == 1
    assert econ[E + "input_tokens/mean"] == 25.0
    assert econ[E + "input_tokens/p50"] == 25.0
    assert econ[E + "input_tokens/p90"] == pytest.approx(37.0)  # 30 + 0.7 * (40 - 30), linear
    assert econ[E + "input_tokens/total"] == 100 and isinstance(econ[E + "input_tokens/total"], int)
    assert econ[E + "total_tokens/total"] == 110
    # latency: present in 3 rows, one NaN -> 2 values, 3 missing
    assert econ[E + "latency_s/rollouts"] == 2 and econ[E + "latency_s/missing_rollouts"] == 3
    assert (econ[E + "latency_s/mean"], econ[E + "latency_s/p50"]) == (1.5, 1.5)
    assert econ[E + "latency_s/p90"] == pytest.approx(1.9)
    assert econ[E + "latency_s/total"] == 3.0 and isinstance(econ[E + "latency_s/total"], float)
    assert econ[E + "cost_usd/total"] == 2.0 and econ[E + "cost_usd/missing_rollouts"] == 1
    # fields nobody recorded are not invented
    assert not any(k.startswith((E + "cost/", E + "wall_time_s", E + "duration_s")) for k in econ)


def test_cost_and_tokens_per_passing_task() -> None:
    econ = economics(RolloutColumns.from_rows(ROWS))
    # only task 0 passes: task 1's reward 1.0 is masked, 0.5 does not pass
    assert econ[E + "passing_tasks"] == 1
    assert econ[E + "cost_per_passing_task"] == 2.0  # all spend / passing tasks
    assert econ[E + "tokens_per_passing_task"] == 110.0


def test_failed_rows_cost_but_never_pass() -> None:
    rows = [
        row(0, 0, 1.0, usage(5, 5), _gm_error={"kind": "verify_failed", "message": "x"}),
        row(1, 0, 1.0, usage(5, 5)),
    ]
    econ = economics(RolloutColumns.from_rows(rows))
    assert econ[E + "passing_tasks"] == 1
    assert econ[E + "tokens_per_passing_task"] == 20.0


def test_no_passing_task_omits_per_passing_keys() -> None:
    econ = economics(RolloutColumns.from_rows([row(0, 0, 0.0, usage(1, 1), cost=0.1), row(1, 0, 0.99, cost=0.2)]))
    assert econ[E + "passing_tasks"] == 0
    assert E + "cost_per_passing_task" not in econ and E + "tokens_per_passing_task" not in econ
    assert econ[E + "cost/total"] == pytest.approx(0.3)


def test_without_usage_tokens_are_missing_not_zero() -> None:
    econ = economics(RolloutColumns.from_rows([row(0, 0, 1.0), row(1, 0, 1.0)]))
    for f in ("input_tokens", "output_tokens", "total_tokens"):
        assert econ[f"{E}{f}/rollouts"] == 0 and econ[f"{E}{f}/missing_rollouts"] == 2
        assert f"{E}{f}/mean" not in econ and f"{E}{f}/total" not in econ
    assert econ[E + "passing_tasks"] == 2 and E + "tokens_per_passing_task" not in econ
    assert all(v is not None and not (isinstance(v, float) and math.isnan(v)) for v in econ.values())


def test_tokens_fall_back_to_input_plus_output_without_total() -> None:
    rows = [row(0, 0, 1.0, {"input_tokens": 3, "output_tokens": 4}), row(0, 1, 1.0, usage(1, 1)), row(1, 0, 1.0)]
    econ = economics(RolloutColumns.from_rows(rows))
    assert econ[E + "tokens_per_passing_task"] == (7 + 2) / 2
    assert econ[E + "total_tokens/missing_rollouts"] == 2


def test_writer_adds_extra_sections_after_non_finite_counts() -> None:
    agg = Aggregator("a")
    agg.add(RolloutColumns.from_rows(ROWS))
    result = agg.finalize()
    plain, extended = io.BytesIO(), io.BytesIO()
    write_json(plain, [result])
    write_json(extended, [result], {"a": {"economics": {"economics/rollouts": 5}}, "other": {"x": {}}})
    entry = json.loads(extended.getvalue())[0]
    assert list(entry)[-2:] == ["non_finite_counts", "economics"]
    assert entry["economics"] == {"economics/rollouts": 5}
    del entry["economics"]
    assert entry == json.loads(plain.getvalue())[0]


def test_aggregate_file_extra_hook(tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    rows = ROWS + [{**r, "agent_ref": {"name": "b"}} for r in ROWS[:2]]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out, _, _ = aggregate_file(src, extra=lambda name, cols: {"economics": economics(cols)})
    data = {a["agent_ref"]["name"]: a for a in json.loads(out.read_text())}
    assert data["a"]["economics"]["economics/input_tokens/total"] == 100
    assert data["b"]["economics"]["economics/input_tokens/total"] == 30


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gym_metrics.cli", *args], capture_output=True, text=True, timeout=60)


def test_cli_aggregate_economics_flag(tmp_path: Path) -> None:
    src = tmp_path / "run.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    proc = run("aggregate", str(src), "--economics")
    assert proc.returncode == 0, proc.stderr
    entry = json.loads((tmp_path / "run_aggregate_metrics.json").read_text())[0]
    assert entry["economics"] == economics(RolloutColumns.from_rows(ROWS))
    assert "economics" in proc.stdout and "input_tokens" in proc.stdout and "cost 2.0000" in proc.stdout
    assert "1 of 3 tasks pass" in proc.stdout
    proc = run("aggregate", str(src), "-q")
    assert proc.returncode == 0, proc.stderr
    assert "economics" not in json.loads((tmp_path / "run_aggregate_metrics.json").read_text())[0]
