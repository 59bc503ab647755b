"""What a client in another language must give: the numbers of the Python client and of
`gym-metrics collect`, value for value. Its example prints the same JSON in every language
(clients/go/cmd/gym-metrics-go, clients/typescript/src/cli.ts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from gym_metrics import cli
from gym_metrics._transport.client import JobClient

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "gym_metrics_servers" / "math_exact" / "sample.jsonl"


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def output(command: list[str]) -> Any:
    done = run(command)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_verify_equals_collect(answer: dict[str, Any], address: str, tmp_path: Path) -> None:
    """`answer` (the example's `verify` on SAMPLE) against `collect` of the same file."""
    out = tmp_path / "run.jsonl"
    assert cli.main(["collect", "--server", address, "--input", str(SAMPLE), "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    python_rewards = {(r["agent_ref"]["name"], r["_ng_task_index"], r["_ng_rollout_index"]): r["reward"] for r in rows}
    rewards = {(r["agent"], r["task_index"], r["rollout_index"]): r["reward"] for r in answer["rewards"]}
    assert rewards == python_rewards and len(rewards) == 144  # collect's keys (its index rules), its rewards

    metrics = {entry["agent_ref"]["name"]: entry for entry in json.loads((tmp_path / "run_aggregate_metrics.json").read_text())}
    assert set(answer["agents"]) == set(metrics)
    compared = 0
    for agent, got in answer["agents"].items():
        assert got["agent_metrics"] == metrics[agent]["agent_metrics"], agent
        assert got["key_metrics"] == metrics[agent]["key_metrics"], agent
        groups = got["group_level_metrics"]
        by_task = {g["_ng_task_index"]: g for g in metrics[agent]["group_level_metrics"]}
        assert groups["task_index"] == sorted(by_task)
        for i, task in enumerate(groups["task_index"]):
            assert groups["num_rollouts"][i] == by_task[task]["num_rollouts"]
            for key, column in groups["stats"].items():
                assert column[i] == by_task[task].get(key), (agent, task, key)
                compared += 1
        compared += len(got["agent_metrics"]) + len(got["key_metrics"])
    assert compared > 1000  # every value of three agents' metrics, not a sample of them


def job_rows() -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "tests" / "jobs"))
    from _jobs_helpers import tool_row

    return [tool_row(i) for i in range(30)]


def write_spec(tmp_path: Path, rows: list[Any]) -> Path:
    """The job as JobSpec's protobuf JSON (what every language's example reads)."""
    spec = {"scorer": "tool_call_accuracy", "dataset": {"rows": {"rowsJson": [json.dumps(r) for r in rows]}}, "run": {"parallelism": 4}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def assert_job_equals_python(answer: dict[str, Any], address: str, rows: list[dict[str, Any]]) -> None:
    assert answer["state"] == "JOB_STATE_SUCCEEDED"
    with JobClient(address) as client:
        job = client.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": rows}, "run": {"parallelism": 4}})
        for _ in client.watch(job.job_id, timeout=120):
            pass
        python = client.result(job.job_id)
    assert answer["aggregate_scores"] == python["aggregate_scores"]
    assert answer["row_scores"] == python["row_scores"] and len(answer["row_scores"]) == len(rows)


def bad_spec(tmp_path: Path) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"scorer": "tool_call_accuracy", "dataset": {"rows": {"rowsJson": ["{}", "{not json"]}}}))
    return path
