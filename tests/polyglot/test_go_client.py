"""The Go client (clients/go), built offline with Debian's Go packages, against live servers:
its rewards, agent and key metrics and per-task stats equal `gym-metrics collect`'s, and a
durable job's result equals the Python JobClient's, value for value. `go test` (run by build.sh)
covers what needs no live server: byte-capped batches, a call read to its end, no goroutine
left behind, and the indexing rules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from _ci import missing, need_tool
from _compare import ROOT, SAMPLE, TOKEN, TOKEN_ENV, assert_job_equals_python, assert_verify_equals_collect, bad_spec, edge_input, free_port, job_rows, output, run, write_spec
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


def test_verify_and_aggregate_equal_the_python_collect(go_client: Path, servers: dict[str, str], tmp_path: Path) -> None:
    answer = output([str(go_client), "verify", "-server", servers["resources"], "-input", str(SAMPLE)])
    assert_verify_equals_collect(answer, servers["resources"], tmp_path)


def test_a_job_equals_the_python_clients(go_client: Path, servers: dict[str, str], tmp_path: Path) -> None:
    rows = job_rows()
    answer = output([str(go_client), "job", "-server", servers["jobs"], "-spec", str(write_spec(tmp_path, rows))])
    assert_job_equals_python(answer, servers["jobs"], rows)


def test_a_bad_spec_names_its_field(go_client: Path, servers: dict[str, str], tmp_path: Path) -> None:
    done = run([str(go_client), "job", "-server", servers["jobs"], "-spec", str(bad_spec(tmp_path))])
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


def test_answers_that_come_as_each_rollout_finishes_are_put_back_in_place(go_client: Path, servers: dict[str, str], tmp_path: Path) -> None:
    """Against a server whose verifies take 0-20 ms each, the answers come in parts out of order
    (`answer_each`, with positions): each result lands on its own rollout, as Python's collect."""
    answer = output([str(go_client), "verify", "-server", servers["jitter"], "-input", str(SAMPLE)])
    assert_verify_equals_collect(answer, servers["jitter"], tmp_path)


def test_edge_lines_and_a_large_answer_equal_the_python_collect(go_client: Path, servers: dict[str, str], tmp_path: Path) -> None:
    """CRLF and no-final-newline lines, finished rollouts, `_ng_task_index` 2.0, and an
    AggregateMetrics answer past gRPC's 4 MiB default: as collect (docs/pipelines.md)."""
    source, rollouts = edge_input(tmp_path)
    answer = output([str(go_client), "verify", "-server", servers["resources"], "-input", str(source)])
    assert_verify_equals_collect(answer, servers["resources"], tmp_path, source, rollouts, values=200)


def test_a_bearer_token_is_sent_and_a_refused_connection_fails_at_once(go_client: Path, servers: dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, TOKEN_ENV: TOKEN}
    command = [str(go_client), "verify", "-server", servers["auth"], "-input", str(SAMPLE), "-timeout", "60s"]
    done = subprocess.run([*command, "-auth-token-env", TOKEN_ENV], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and len(json.loads(done.stdout)["rewards"]) == 144, done.stderr
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1 and "Unauthenticated" in done.stderr and TOKEN not in done.stderr + done.stdout, done.stderr
    started = time.monotonic()
    done = run([str(go_client), "verify", "-server", f"127.0.0.1:{free_port()}", "-input", str(SAMPLE)])  # its -timeout is 5 min
    assert done.returncode == 1 and "Unavailable" in done.stderr and "connection refused" in done.stderr, done.stderr
    assert time.monotonic() - started < 10
