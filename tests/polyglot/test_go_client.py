"""The Go client (clients/go), built offline with Debian's Go packages, against live servers:
its rewards, agent and key metrics and per-task stats equal `gym-metrics collect`'s, and a
durable job's result equals the Python JobClient's, value for value."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _ci import missing, need_tool
from gym_metrics import cli
from gym_metrics._transport.client import JobClient

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "servers" / "math_exact" / "sample.jsonl"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def go_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_tool("go", "the Go client builds with Debian's golang-go (apt-get install golang-go)")
    for package in ("google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto"):
        if not (Path("/usr/share/gocode/src") / package).is_dir():
            missing(f"{package} is not in /usr/share/gocode (apt-get install golang-google-grpc-dev golang-google-protobuf-dev golang-google-genproto-dev)")
    out = tmp_path_factory.mktemp("go")
    done = subprocess.run([str(ROOT / "clients" / "go" / "build.sh"), str(out)], capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stdout + done.stderr
    return out / "gym-metrics-go"


def start(args: list[str], pattern: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", *args], stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 60
    while not (found := re.search(pattern, log.read_text(errors="replace"))):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return proc, found[1]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    logs = tmp_path_factory.mktemp("servers")
    math_exact, resources = start(["serve", "math_exact", "--port", "0"], r"listening on (\S+:\d+)", logs / "serve.err")
    jobs, job_server = start(["jobs", "serve", "--db", str(logs / "jobs.sqlite"), "--port", "0", "--data-root", str(logs)],
                             r"job server listening on (\S+:\d+)", logs / "jobs.err")  # fmt: skip
    try:
        yield {"resources": resources, "jobs": job_server}
    finally:
        for proc in (math_exact, jobs):
            proc.terminate()
            proc.wait(30)


def run_go(binary: Path, *args: str) -> Any:
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def same(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=0, abs_tol=0))


def test_verify_and_aggregate_equal_the_python_collect(go_client: Path, servers: dict[str, str], tmp_path: Path) -> None:
    go = run_go(go_client, "verify", "-server", servers["resources"], "-input", str(SAMPLE))
    out = tmp_path / "run.jsonl"
    assert cli.main(["collect", "--server", servers["resources"], "--input", str(SAMPLE), "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    python_rewards = {(r["agent_ref"]["name"], r["_ng_task_index"], r["_ng_rollout_index"]): r["reward"] for r in rows}
    go_rewards = {(r["agent"], r["task_index"], r["rollout_index"]): r["reward"] for r in go["rewards"]}
    assert go_rewards == python_rewards and len(go_rewards) == 144  # collect's keys (its index rules), its rewards

    metrics = {entry["agent_ref"]["name"]: entry for entry in json.loads((tmp_path / "run_aggregate_metrics.json").read_text())}
    assert set(go["agents"]) == set(metrics)
    compared = 0
    for agent, answer in go["agents"].items():
        assert answer["agent_metrics"] == metrics[agent]["agent_metrics"], agent
        assert answer["key_metrics"] == metrics[agent]["key_metrics"], agent
        groups = answer["group_level_metrics"]
        by_task = {g["_ng_task_index"]: g for g in metrics[agent]["group_level_metrics"]}
        assert groups["task_index"] == sorted(by_task)
        for i, task in enumerate(groups["task_index"]):
            assert groups["num_rollouts"][i] == by_task[task]["num_rollouts"]
            for key, column in groups["stats"].items():
                assert column[i] == by_task[task].get(key), (agent, task, key)
                compared += 1
        compared += len(answer["agent_metrics"]) + len(answer["key_metrics"])
    assert compared > 1000  # every value of three agents' metrics, not a sample of them


def test_a_job_equals_the_python_clients(go_client: Path, servers: dict[str, str], tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "jobs"))
    from _jobs_helpers import tool_row

    rows = [tool_row(i) for i in range(30)]
    spec = {"scorer": "tool_call_accuracy", "dataset": {"rows": {"rowsJson": [json.dumps(r) for r in rows]}}, "run": {"parallelism": 4}}
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    go = run_go(go_client, "job", "-server", servers["jobs"], "-spec", str(spec_file))
    assert go["state"] == "JOB_STATE_SUCCEEDED"
    with JobClient(servers["jobs"]) as client:
        job = client.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": rows}, "run": {"parallelism": 4}})
        for _ in client.watch(job.job_id, timeout=120):
            pass
        python = client.result(job.job_id)
    assert go["aggregate_scores"] == python["aggregate_scores"]
    assert go["row_scores"] == python["row_scores"] and len(go["row_scores"]) == 30


def test_a_bad_spec_names_its_field(go_client: Path, servers: dict[str, str], tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({"scorer": "tool_call_accuracy", "dataset": {"rows": {"rowsJson": ["{}", "{not json"]}}}))
    done = subprocess.run([str(go_client), "job", "-server", servers["jobs"], "-spec", str(spec_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "spec.dataset.rows.rows_json[1]" in done.stderr, done.stderr


def test_the_generated_code_is_fresh(tmp_path: Path) -> None:
    from _buf import buf_binary

    for plugin in ("protoc-gen-go", "protoc-gen-go-grpc"):
        need_tool(plugin, f"buf.gen.yaml's plugin (apt-get install {plugin})")
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    for name in ("buf.yaml", "buf.gen.yaml"):
        shutil.copy(ROOT / name, tmp_path)
    done = subprocess.run([buf_binary(), "generate"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    fresh = sorted((tmp_path / "clients" / "go" / "gymmetricsv1").glob("*.go"))
    committed = ROOT / "clients" / "go" / "gymmetricsv1"
    assert [p.name for p in fresh] == sorted(p.name for p in committed.glob("*.go"))
    stale = [p.name for p in fresh if p.read_bytes() != (committed / p.name).read_bytes()]
    assert stale == [], f"regenerate with python scripts/gen_clients.py: {stale}"
