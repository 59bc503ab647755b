"""What a client in another language must give: the numbers of the Python client and of
`gym-metrics collect`, value for value. Its example prints the same JSON in every language
(clients/go/cmd/gym-metrics-go, clients/typescript/src/cli.ts)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from gym_metrics import cli
from gym_metrics._transport.client import JobClient

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "gym_metrics_servers" / "math_exact" / "sample.jsonl"
TOKEN_ENV, TOKEN = "GM_POLYGLOT_TOKEN", "polyglot-secret-7f3a"
"""The bearer token the `auth` server (conftest) requires; its clients read it from TOKEN_ENV."""


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def output(command: list[str]) -> Any:
    done = run(command)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_verify_equals_collect(answer: dict[str, Any], address: str, tmp_path: Path, source: Path = SAMPLE, rollouts: int = 144, values: int = 1000) -> None:
    """`answer` (the example's `verify` on `source`) against `collect` of the same file."""
    out = tmp_path / "run.jsonl"
    assert cli.main(["collect", "--server", address, "--input", str(source), "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    python_rewards = {(r["agent_ref"]["name"], r["_ng_task_index"], r["_ng_rollout_index"]): r["reward"] for r in rows}
    rewards = {(r["agent"], r["task_index"], r["rollout_index"]): r["reward"] for r in answer["rewards"]}
    assert rewards == python_rewards and len(rewards) == rollouts  # collect's keys (its index rules), its rewards

    metrics = {entry["agent_ref"]["name"]: entry for entry in json.loads((tmp_path / "run_aggregate_metrics.json").read_text())}
    assert set(answer["agents"]) == set(metrics)
    compared = 0
    for agent, got in answer["agents"].items():
        assert got["agent_metrics"] == metrics[agent]["agent_metrics"], agent
        assert got["key_metrics"] == metrics[agent]["key_metrics"], agent
        for key in ("agent_metrics", "key_metrics"):  # 1.0 stays a float: the rows' values kept their text
            kinds = {k: type(v).__name__ for k, v in got[key].items()}
            assert kinds == {k: type(v).__name__ for k, v in metrics[agent][key].items()}, (agent, key)
        groups = got["group_level_metrics"]
        by_task = {g["_ng_task_index"]: g for g in metrics[agent]["group_level_metrics"]}
        assert groups["task_index"] == sorted(by_task)
        for i, task in enumerate(groups["task_index"]):
            assert groups["num_rollouts"][i] == by_task[task]["num_rollouts"]
            for key, column in groups["stats"].items():
                assert column[i] == by_task[task].get(key), (agent, task, key)
                compared += 1
        compared += len(got["agent_metrics"]) + len(got["key_metrics"])
    assert compared > values, compared  # every value of every agent's metrics, not a sample of them


def edge_input(tmp_path: Path) -> tuple[Path, int]:
    """A rollouts file of the lines the clients once read otherwise than collect (and the number
    of rollouts in it): a CRLF line and the same line with LF (one task); a finished rollout
    (a reward and both indices: kept, not verified, its other columns aggregated), one with a
    reward and a task index only (not verified, its rollout index counted past the finished
    one's), one with `task_index`/`rollout_index`, one whose reward is text (printed as text, as collect
    writes it); `_ng_task_index` 2.0 (task 2); a last line
    without a final newline, the same as the first (another task). Agent `wide`: 24 tasks of
    250 KB rows, whose AggregateMetrics answer passes gRPC's 4 MiB default message size."""

    def line(agent: str, answer: str, text: str, **more: Any) -> str:
        row = {"agent_ref": {"name": agent}, "responses_create_params": {"input": [{"role": "user", "content": f"{answer}?"}]},
               "response": {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]},
               "expected_answer": answer, **more}  # fmt: skip
        return json.dumps(row)

    first = line("a", "2", "\\boxed{2}")
    lines = [
        first + "\n",
        line("a", "4", "\\boxed{5}") + "\r\n",
        line("a", "4", "\\boxed{5}") + "\n",
        line("a", "6", "\\boxed{6}", _ng_task_index=7, _ng_rollout_index=1, reward=0.25, difficulty=3) + "\n",
        line("a", "6", "\\boxed{6}", _ng_task_index=7) + "\n",
        line("a", "6", "\\boxed{0}", _ng_task_index=7, reward=1.0) + "\n",
        line("a", "8", "\\boxed{8}", task_index=9, rollout_index=4, reward=0.5) + "\n",
        line("a", "8", "\\boxed{8}", task_index=9, rollout_index=5, reward="0.5") + "\n",
        line("a", "3", "\\boxed{3}", _ng_task_index=2.0) + "\n",
        *(line("wide", "1", "x" * 250_000 + "\\boxed{1}", _ng_task_index=100 + t) + "\n" for t in range(24)),
        first,
    ]
    path = tmp_path / "edge.jsonl"
    path.write_bytes("".join(lines).encode())
    return path, len(lines)


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
