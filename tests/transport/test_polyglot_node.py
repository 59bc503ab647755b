"""Polyglot check: a Node.js client built from protos/ alone works against a real server.

tests/polyglot/node/client.mjs loads protos/gym_metrics/v1/resources.proto at run time with
@grpc/proto-loader (no generated code, nothing from Python) and drives every RPC of a
`gym-metrics serve math_exact` subprocess. Its JSON output is compared here with what the
Python engine gives for the same inputs.

Skipped only when node or npm is absent, and failed instead under CI=true (tests/_ci.py). `npm ci` runs once per package-lock.json (a stamp in
node_modules/ records which); the first run needs the npm registry.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.aggregate import AgentAggregate, AggregateOptions
from gym_metrics.rollouts import RolloutColumns

from _ci import need_tool

REPO = Path(__file__).resolve().parents[2]
NODE_DIR = REPO / "tests" / "polyglot" / "node"
SAMPLE = REPO / "gym_metrics_servers" / "math_exact" / "sample.jsonl"
STAMP = NODE_DIR / "node_modules" / ".gym-metrics-install-stamp"

NPM_CI_TIMEOUT_S = 180
SERVER_START_TIMEOUT_S = 30
CLIENT_TIMEOUT_S = 60
BIG_TASKS = 60_000
"""Tasks of the many-part aggregation: enough for an answer over the server's 8 MiB part size."""

_FOUND = {name: shutil.which(name) for name in ("node", "npm")}
NODE = _FOUND["node"] or "node"
NPM = _FOUND["npm"] or "npm"

pytestmark = [
    pytest.mark.timeout(NPM_CI_TIMEOUT_S + SERVER_START_TIMEOUT_S + CLIENT_TIMEOUT_S + 30),
]

@pytest.fixture(autouse=True, scope="module")
def _node_and_npm() -> None:
    for name in ("node", "npm"):
        need_tool(name, "the polyglot check needs Node.js")


AGENT = "node_agent"
KINDS = {"reward": "VALUE_KIND_FLOAT", "output_tokens": "VALUE_KIND_INT", "is_correct": "VALUE_KIND_BOOL"}


def _row(task: int, rollout: int, reward: float | None, tokens: int | None, correct: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"task_index": task, "rollout_index": rollout, "is_correct": correct}
    if reward is not None:
        row["reward"] = reward
    if tokens is not None:
        row["output_tokens"] = tokens
    return row


# 4 tasks x 3 rollouts in 2 batches; task 1 rollout 1 has no reward and task 3 rollout 2 no
# output_tokens, so both columns carry a `missing` entry.
BATCHES = [
    [
        _row(0, 0, 1.0, 120, True),
        _row(0, 1, 0.0, 80, False),
        _row(0, 2, 0.5, 95, False),
        _row(1, 0, 0.25, 64, False),
        _row(1, 1, None, 70, False),
        _row(1, 2, 1.0, 33, True),
    ],
    [
        _row(2, 0, 0.0, 10, False),
        _row(2, 1, 0.0, 12, False),
        _row(2, 2, 0.75, 48, False),
        _row(3, 0, 1.0, 200, True),
        _row(3, 1, 1.0, 180, True),
        _row(3, 2, 0.125, None, False),
    ],
]
PRESENT_REWARDS = [r["reward"] for batch in BATCHES for r in batch if "reward" in r]


# ----------------------------------------------------------------------------- helpers


def _num(value: Any) -> float:
    """A double from the client's JSON (non-finite ones arrive as "NaN", "Infinity", ...)."""
    return float(value)


def _same(got: Any, want: Any) -> bool:
    got, want = _num(got), float(want)
    return (math.isnan(got) and math.isnan(want)) or got == want


def _assert_numeric_map(got: dict[str, Any], want: dict[str, Any], what: str) -> None:
    numeric = {k: float(v) for k, v in want.items() if isinstance(v, (bool, int, float))}
    assert sorted(got) == sorted(numeric), f"{what}: keys differ"
    bad = {k: (got[k], numeric[k]) for k in numeric if not _same(got[k], numeric[k])}
    assert not bad, f"{what}: (node, python) differ: {bad}"


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _install_stamp() -> str:
    node_version = subprocess.run([NODE, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((NODE_DIR / name).read_bytes())
    digest.update(node_version.encode())
    return digest.hexdigest()


@contextmanager
def _install_lock() -> Iterator[None]:
    """Serialise installs of this checkout across processes (e.g. pytest-xdist workers)."""
    try:
        import fcntl
    except ImportError:  # Windows: no concurrent runs expected
        yield
        return
    key = hashlib.sha256(str(NODE_DIR).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"gym-metrics-npm-{key}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _ensure_node_modules() -> None:
    """`npm ci` unless node_modules was installed from this very package-lock.json."""
    with _install_lock():
        stamp = _install_stamp()
        if STAMP.is_file() and STAMP.read_text() == stamp:
            return
        env = {**os.environ, "npm_config_update_notifier": "false"}
        started = time.monotonic()
        try:
            done = subprocess.run(
                [NPM, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                cwd=NODE_DIR,
                env=env,
                capture_output=True,
                text=True,
                timeout=NPM_CI_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"npm ci in {NODE_DIR} took over {NPM_CI_TIMEOUT_S} s:\n{_tail(str(exc.stderr or ''))}")
        if done.returncode != 0:
            pytest.fail(f"npm ci in {NODE_DIR} failed (exit {done.returncode}):\n{_tail(done.stdout + done.stderr)}")
        STAMP.write_text(stamp)
        print(f"npm ci took {time.monotonic() - started:.1f} s", file=sys.stderr)


@contextmanager
def _math_exact_server() -> Iterator[tuple[str, list[str]]]:
    """A `gym-metrics serve math_exact --port 0` subprocess: (HOST:PORT, its stderr lines so far)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gym_metrics.cli", "serve", "math_exact", "--port", "0"],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    seen: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:  # keeps reading: the access log must never fill the pipe
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            seen.put(line)
        seen.put(None)

    threading.Thread(target=drain, daemon=True).start()
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        address = None
        while address is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"server printed no 'listening on' within {SERVER_START_TIMEOUT_S} s:\n{''.join(lines)}")
            try:
                line = seen.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                pytest.fail(f"server exited (code {proc.wait()}) before listening:\n{''.join(lines)}")
            match = re.search(r"listening on (\S+:\d+)", line)
            address = match.group(1) if match else None
        yield address, lines
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _verify_reward(env: Any, line: str) -> float:
    return float(asyncio.run(env.verify_dict(line))["reward"])


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def math_env() -> Any:
    from gym_metrics_servers.math_exact import MathExactServer

    return MathExactServer()


@pytest.fixture(scope="module")
def bodies(math_env: Any) -> list[str]:
    """Verify bodies from the sample: known-correct first, then wrong, correct, wrong."""
    lines = [line for line in SAMPLE.read_text().splitlines() if line.strip()]
    rewards = [_verify_reward(math_env, line) for line in lines[:40]]
    correct = [line for line, r in zip(lines, rewards) if r == 1.0]
    wrong = [line for line, r in zip(lines, rewards) if r == 0.0]
    assert len(correct) >= 2 and len(wrong) >= 2, "sample.jsonl lost its mix of right and wrong answers"
    return [correct[0], wrong[0], correct[1], wrong[1]]


@pytest.fixture(scope="module")
def node_output(bodies: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Install the client's dependencies, serve math_exact, run the client once: its JSON."""
    _ensure_node_modules()
    work = tmp_path_factory.mktemp("polyglot")
    body_file = work / "bodies.jsonl"
    body_file.write_text("\n".join(bodies) + "\n")
    rows_file = work / "rows.json"
    rows_file.write_text(json.dumps({"agent": AGENT, "kinds": KINDS, "batches": BATCHES}))
    with _math_exact_server() as (address, server_log):
        command = [NODE, "client.mjs", address, "--body", str(body_file), "--rows", str(rows_file),
                   "--big-tasks", str(BIG_TASKS), "--deadline-s", "20"]  # fmt: skip
        try:
            done = subprocess.run(command, cwd=NODE_DIR, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log = _tail("".join(server_log))
            pytest.fail(f"node client did not finish within {CLIENT_TIMEOUT_S} s; server log:\n{log}")
        if done.returncode != 0:
            pytest.fail(
                f"node client failed (exit {done.returncode}):\n{done.stderr.strip()}\n"
                f"--- server log:\n{_tail(''.join(server_log))}"
            )
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        pytest.fail(f"node client printed no JSON ({exc}):\n{done.stdout[:2000]}")


@pytest.fixture(scope="module")
def python_aggregate(math_env: Any) -> AgentAggregate:
    """What the engine gives for BATCHES, columnar as they travel (no full rows)."""
    aggregator = math_env.new_aggregator(AGENT, AggregateOptions())
    for batch in BATCHES:
        aggregator.add(RolloutColumns.from_rows(batch, keep_rows=False))
    return math_env.finalize(aggregator)


# ----------------------------------------------------------------------------- tests


def test_verify_reward_of_a_correct_answer_is_one(node_output: dict[str, Any]) -> None:
    verify = node_output["verify"]
    assert verify["reward"] == 1.0
    assert verify["response"]["is_correct"] is True
    assert verify["response"]["reward"] == 1.0


def test_verify_stream_echoes_batches_and_int64_indices(
    node_output: dict[str, Any], bodies: list[str], math_env: Any
) -> None:
    batches = node_output["verify_stream"]["batches"]
    assert [b["batch_id"] for b in batches] == ["node-batch-0", "node-batch-1"]
    results = [r for b in batches for r in b["results"]]
    assert [(r["task_index"], r["rollout_index"]) for r in results] == [
        ("100", "0"), ("101", "0"), ("102", "0"), ("103", "0"),
        ("104", "1"), ("105", "1"), ("106", "1"),
        ("9007199254740993", "7"),  # 2^53 + 1: exact only because int64 travels as a string
        ("5", "0"),
    ]  # fmt: skip
    want = {i: _verify_reward(math_env, body) for i, body in enumerate(bodies)}
    assert [r["reward"] for r in results[:-1]] == [want[r["body_line"]] for r in results[:-1]]
    assert sorted({r["reward"] for r in results[:-1]}) == [0.0, 1.0]  # right and wrong answers both seen
    assert all(r["error_kind"] == "VERIFY_ERROR_KIND_UNSPECIFIED" for r in results[:-1])
    invalid = results[-1]
    assert invalid["error_kind"] == "VERIFY_ERROR_KIND_INVALID_REQUEST"
    assert invalid["reward"] == 0
    assert "expected_answer" in invalid["error_message"]


def test_aggregate_equals_python_engine(node_output: dict[str, Any], python_aggregate: AgentAggregate) -> None:
    agg = node_output["aggregate"]
    assert agg["parts"] == 1
    assert agg["received_rollouts"] == "12" and agg["duplicate_batches"] == "0"
    assert agg["agent_name"] == AGENT

    mean_reward = agg["agent_metrics"]["mean/reward"]
    assert mean_reward == python_aggregate.agent_metrics["mean/reward"]
    assert mean_reward == pytest.approx(sum(PRESENT_REWARDS) / len(PRESENT_REWARDS), rel=1e-15)  # missing one skipped
    _assert_numeric_map(agg["agent_metrics"], python_aggregate.agent_metrics, "agent_metrics")
    _assert_numeric_map(agg["key_metrics"], python_aggregate.key_metrics, "key_metrics")
    assert agg["key_metrics_order"] == list(python_aggregate.key_metrics)
    assert agg["non_finite_counts"] == {k: str(v) for k, v in python_aggregate.non_finite_counts.items()}


def test_aggregate_group_and_repeat_levels(node_output: dict[str, Any], python_aggregate: AgentAggregate) -> None:
    groups = node_output["aggregate"]["group_level_metrics"]
    want = python_aggregate.groups
    assert groups["task_index"] == ["0", "1", "2", "3"]
    assert groups["num_rollouts"] == ["3", "3", "3", "3"]
    assert groups["missing_num_rollouts"] == ["0", "0", "0", "0"]
    assert groups["reward_profile_completion_pct"] == [100.0] * 4
    assert sorted(groups["stats"]) == sorted(want.stats)  # a proto map: no order
    for key, column in want.stats.items():
        assert all(_same(g, w) for g, w in zip(groups["stats"][key], column, strict=True)), key
    assert [_num(v) for v in groups["stats"]["mean/reward"]] == [0.5, (0.25 + 1.0) / 2, 0.25, (2.125) / 3]
    assert groups["custom"] == want.custom  # math_exact's per-task pass@k, via custom_json

    infos = groups["rollout_infos"]
    assert infos["task_index"] == [str(t) for t in (0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3)]
    assert infos["rollout_index"] == [str(r) for r in (0, 1, 2) * 4]
    assert infos["values"]["reward"]["missing"] == [4]
    assert infos["values"]["reward"]["kind"] == "VALUE_KIND_FLOAT"
    assert infos["values"]["output_tokens"]["missing"] == [11]
    assert infos["values"]["output_tokens"]["kind"] == "VALUE_KIND_INT"
    assert infos["values"]["is_correct"] == {
        "values": [1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0], "missing": [], "kind": "VALUE_KIND_BOOL"
    }

    repeats = node_output["aggregate"]["repeat_level_metrics"]
    assert [r["rollout_index"] for r in repeats] == ["0", "1", "2"]
    assert len(repeats) == len(python_aggregate.repeat_level_metrics)
    for got, entry in zip(repeats, python_aggregate.repeat_level_metrics):
        assert got["sample_count"] == str(entry["sample_count"])
        assert got["missing_count"] == str(entry["missing_count"])
        stats = {k: v for k, v in entry.items() if k not in ("_ng_rollout_index", "sample_count", "missing_count")}
        _assert_numeric_map(got["stats"], stats, f"repeat {got['rollout_index']} stats")


def test_aggregate_answer_in_parts_reassembles(node_output: dict[str, Any], math_env: Any) -> None:
    """The client checks every task and value of the reassembled answer (each 1000th reward
    missing, so joined parts must shift `missing` positions); here: several parts really came,
    and the agent-level metrics equal the engine's."""
    big = node_output["big_aggregate"]
    assert big["parts"] > 1, f"{BIG_TASKS} tasks came back in one part: raise BIG_TASKS past the part size"
    assert big["tasks"] == BIG_TASKS
    rows = [
        {"task_index": t, "rollout_index": 0, **({} if t % 1000 == 999 else {"reward": (7 * t % 10) / 10})}
        for t in range(BIG_TASKS)
    ]
    aggregator = math_env.new_aggregator("node_big_agent", AggregateOptions())
    aggregator.add(RolloutColumns.from_rows(rows, keep_rows=False))
    want = math_env.finalize(aggregator)
    _assert_numeric_map(big["agent_metrics"], want.agent_metrics, "big agent_metrics")
    _assert_numeric_map(big["key_metrics"], want.key_metrics, "big key_metrics")


def test_server_info(node_output: dict[str, Any], math_env: Any) -> None:
    import gym_metrics

    info = node_output["server_info"]
    assert info["name"] == "math_exact"
    assert info["version"] == gym_metrics.__version__
    assert info["wants_rows"] is math_env.wants_rows is False  # columnar compute_metrics: no rows sent
    assert info["verify_request_required"] == ["expected_answer"]
    assert {"reward", "extracted_answer", "is_correct"} <= set(info["verify_response_properties"])
    assert info["metrics"] == list(math_env.metrics)


def test_dependencies_pinned_and_locked_to_the_npm_registry() -> None:
    package = json.loads((NODE_DIR / "package.json").read_text())
    lock = json.loads((NODE_DIR / "package-lock.json").read_text())
    for name, version in package["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name} is not pinned exactly: {version}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version, f"package-lock.json is stale for {name}"
    for path, entry in lock["packages"].items():
        if path:
            assert entry.get("integrity", "").startswith("sha512-"), f"{path} has no sha512 integrity"
            resolved = entry.get("resolved", "https://registry.npmjs.org/")
            assert resolved.startswith("https://registry.npmjs.org/"), f"{path} resolves elsewhere: {resolved}"
