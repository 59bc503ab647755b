"""The TypeScript client (clients/typescript: connect-es over @connectrpc/connect-node), built
from a clean `npm ci` with packages from the npm registry, against live servers: its unit tests
pass, its generated code is fresh, and its rewards, metrics and a job's result equal the Python
client's and `gym-metrics collect`'s, value for value. Its unit tests (src/test, `npm test`)
cover the indexing rules, byte-capped batches, the written row's text, a timeout against a
server that never answers and a stream the server closes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from _buf import buf_binary
from _ci import need_tool
from _compare import ROOT, SAMPLE, TOKEN, TOKEN_ENV, assert_job_equals_python, assert_verify_equals_collect, bad_spec, edge_input, job_rows, output, run, write_spec

PACKAGE = ROOT / "clients" / "typescript"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def ts_client() -> list[str]:
    npm = need_tool("npm", "the TypeScript client installs its packages from the npm registry")
    node = need_tool("node", "the TypeScript client runs on Node.js")
    for step in ([npm, "ci", "--no-audit", "--no-fund"], [npm, "run", "build"]):
        done = subprocess.run(step, cwd=PACKAGE, capture_output=True, text=True, timeout=400)
        assert done.returncode == 0, done.stdout + done.stderr
    return [node, str(PACKAGE / "dist" / "cli.js")]


def test_its_unit_tests_pass(ts_client: list[str]) -> None:
    done = subprocess.run(["npm", "test"], cwd=PACKAGE, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "# fail 0" in done.stdout, done.stdout + done.stderr


def test_verify_and_aggregate_equal_the_python_collect(ts_client: list[str], servers: dict[str, str], tmp_path: Path) -> None:
    answer = output([*ts_client, "verify", "--server", servers["resources"], "--input", str(SAMPLE)])
    assert_verify_equals_collect(answer, servers["resources"], tmp_path)


def test_a_job_equals_the_python_clients(ts_client: list[str], servers: dict[str, str], tmp_path: Path) -> None:
    rows = job_rows()
    answer = output([*ts_client, "job", "--server", servers["jobs"], "--spec", str(write_spec(tmp_path, rows))])
    assert_job_equals_python(answer, servers["jobs"], rows)


def test_a_bad_spec_names_its_field(ts_client: list[str], servers: dict[str, str], tmp_path: Path) -> None:
    done = run([*ts_client, "job", "--server", servers["jobs"], "--spec", str(bad_spec(tmp_path))])
    assert done.returncode == 1 and "spec.dataset.rows.rows_json[1]" in done.stderr, done.stderr


def test_the_generated_code_is_fresh(ts_client: list[str], tmp_path: Path) -> None:
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    shutil.copy(ROOT / "buf.yaml", tmp_path)
    (tmp_path / "clients" / "typescript").mkdir(parents=True)
    shutil.copy(PACKAGE / "buf.gen.yaml", tmp_path / "clients" / "typescript")
    (tmp_path / "clients" / "typescript" / "node_modules").symlink_to(PACKAGE / "node_modules")
    done = subprocess.run([buf_binary(), "generate", "--template", "clients/typescript/buf.gen.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    fresh_root, committed_root = tmp_path / "clients" / "typescript" / "src" / "gen", PACKAGE / "src" / "gen"
    fresh = sorted(p.relative_to(fresh_root) for p in fresh_root.rglob("*.ts"))
    assert fresh == sorted(p.relative_to(committed_root) for p in committed_root.rglob("*.ts"))
    stale = [str(p) for p in fresh if (fresh_root / p).read_bytes() != (committed_root / p).read_bytes()]
    assert stale == [], f"regenerate with python scripts/gen_clients.py: {stale}"


def test_answers_that_come_as_each_rollout_finishes_are_put_back_in_place(ts_client: list[str], servers: dict[str, str], tmp_path: Path) -> None:
    """Against a server whose verifies take 0-20 ms each, the answers come in parts out of order
    (`answer_each`, with positions): each result lands on its own rollout, as Python's collect."""
    answer = output([*ts_client, "verify", "--server", servers["jitter"], "--input", str(SAMPLE)])
    assert_verify_equals_collect(answer, servers["jitter"], tmp_path)


def test_edge_lines_and_a_large_answer_equal_the_python_collect(ts_client: list[str], servers: dict[str, str], tmp_path: Path) -> None:
    """CRLF and no-final-newline lines, finished rollouts, `_ng_task_index` 2.0, and an
    AggregateMetrics answer past 4 MiB: as collect (docs/pipelines.md); 1.0 stays a float."""
    source, rollouts = edge_input(tmp_path)
    answer = output([*ts_client, "verify", "--server", servers["resources"], "--input", str(source)])
    assert_verify_equals_collect(answer, servers["resources"], tmp_path, source, rollouts, values=200)


def test_a_bearer_token_is_sent_and_a_silent_server_times_out(ts_client: list[str], servers: dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, TOKEN_ENV: TOKEN}
    command = [*ts_client, "verify", "--server", servers["auth"], "--input", str(SAMPLE), "--timeout", "60s"]
    done = subprocess.run([*command, "--auth-token-env", TOKEN_ENV], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and len(json.loads(done.stdout)["rewards"]) == 144, done.stderr
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1 and "UNAUTHENTICATED" in done.stderr and TOKEN not in done.stderr + done.stdout, done.stderr
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        started = time.monotonic()
        done = run([*ts_client, "verify", "--server", f"127.0.0.1:{silent.getsockname()[1]}", "--input", str(SAMPLE), "--timeout", "1s"])
    assert done.returncode == 1 and "DEADLINE_EXCEEDED" in done.stderr, done.stderr
    assert time.monotonic() - started < 8
