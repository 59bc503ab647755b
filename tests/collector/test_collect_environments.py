"""`gym-metrics collect --server AGENT=HOST:PORT`: one input mixing agents of two environments
(as a NeMo Gym training mix or eval suite does), each agent's rollouts verified and aggregated
by its own server. Two real `serve` subprocesses of different environments, each refusing or
misscoring the other's rows; the reference is each agent's rows collected alone through its own
server: the mixed run writes their lines in key order and their metrics, also when resumed."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_collector_faults import Procs, cli

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

ENVS = Path(__file__).with_name("_collector_envs.py")


def serve(procs: Procs, target: str, log: Path) -> str:
    proc = procs.start(cli("serve", f"{ENVS}:{target}", "--port", "0"), log, log.parent)
    deadline = time.monotonic() + 20
    while not (match := re.search(r"listening on (\S+:\d+)", log.read_text(errors="replace"))):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.02)
    return match.group(1)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Agent `count` on CountingEnv (reward: answer == expected; a row without them scores 1),
    agent `hash` on SlowHashEnv (needs `x`: a counting row sent there fails verify)."""
    folder = tmp_path_factory.mktemp("envs")
    procs = Procs()
    try:
        yield {"count": serve(procs, "CountingEnv", folder / "count.log"), "hash": serve(procs, "SlowHashEnv", folder / "hash.log")}
    finally:
        procs.kill_all()


def count_rows() -> list[dict[str, object]]:
    return [{"agent_ref": {"name": "count"}, "_ng_task_index": t, "_ng_rollout_index": r, "answer": "a" if (t + r) % 3 else "b", "expected": "a"}
            for t in range(6) for r in range(2)]  # fmt: skip


def hash_rows() -> list[dict[str, object]]:
    return [{"agent_ref": {"name": "hash"}, "_ng_task_index": 10 + t, "_ng_rollout_index": r, "x": 3 * t + 1} for t in range(5) for r in range(3)]


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def collect(out: Path, src: Path, *servers: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    """`collect` of `src` with these `--server`s (and the flags among them)."""
    args = [a for s in servers for a in (() if s.startswith("--") or s.isdigit() else ("--server",)) + (s,)]
    done = subprocess.run(cli("collect", *args, "--input", str(src), "--output", str(out)), capture_output=True, text=True, timeout=120)
    assert done.returncode == expect, done.stdout + done.stderr
    return done


def key(line: bytes) -> tuple[int, int, str]:
    row = json.loads(line)
    return row["_ng_task_index"], row["_ng_rollout_index"], row["agent_ref"]["name"]


@pytest.fixture(scope="module")
def alone(servers: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> tuple[list[bytes], list[object]]:
    """Each agent collected alone through its own server: (their lines in key order, their
    metrics entries by agent name)."""
    folder = tmp_path_factory.mktemp("alone")
    lines: list[bytes] = []
    metrics: list[object] = []
    for agent, rows in (("count", count_rows()), ("hash", hash_rows())):
        out = folder / f"{agent}.jsonl"
        collect(out, write(folder / f"{agent}_in.jsonl", rows), servers[agent])
        lines += out.read_bytes().splitlines(keepends=True)
        metrics += json.loads(out.with_name(f"{agent}_aggregate_metrics.json").read_text())
    return sorted(lines, key=key), sorted(metrics, key=lambda m: m["agent_ref"]["name"])  # type: ignore[index]


def metrics_of(out: Path) -> list[object]:
    return json.loads(out.with_name(out.stem + "_aggregate_metrics.json").read_text())


def mixed(tmp_path: Path) -> Path:
    rows = count_rows() + hash_rows()
    rows.sort(key=lambda r: (r["_ng_rollout_index"], r["_ng_task_index"]))  # type: ignore[return-value]  # interleaved
    return write(tmp_path / "mixed.jsonl", rows)


def test_each_agent_goes_to_its_own_server(servers: dict[str, str], alone: tuple[list[bytes], list[object]], tmp_path: Path) -> None:
    lines, metrics = alone
    assert {json.loads(m)["reward"] for m in lines if b'"count"' in m} == {0.0, 1.0}  # (the reference discriminates)
    for name, given in (("named", [f"count={servers['count']}", f"hash={servers['hash']}"]),
                        ("default", [servers["hash"], f"count={servers['count']}"]),
                        ("two each", [f"count={servers['count']}", f"hash={servers['hash']}", "--processes", "2"])):  # fmt: skip
        out = tmp_path / name / "out.jsonl"
        out.parent.mkdir()
        done = collect(out, mixed(tmp_path), *given)
        assert out.read_bytes().splitlines(keepends=True) == lines, name
        assert metrics_of(out) == metrics, name
        assert "27 verified" in done.stdout, done.stdout
        assert f"| {4 if name == 'two each' else 2} processes" in done.stdout + done.stderr, done.stderr  # (two environments, each its share)
        assert not out.with_name(f".{out.name}.shards").exists()


def test_a_cut_run_resumes_by_agent(servers: dict[str, str], alone: tuple[list[bytes], list[object]], tmp_path: Path) -> None:
    lines, metrics = alone
    out = tmp_path / "out.jsonl"
    kept = lines[::2]  # what a cut run had written: rows of both agents
    out.write_bytes(b"".join(kept))
    given = [f"count={servers['count']}", f"hash={servers['hash']}"]
    done = subprocess.run(cli("collect", *(a for s in given for a in ("--server", s)), "--input", str(mixed(tmp_path)), "--output", str(out), "--resume"),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_bytes().splitlines(keepends=True) == lines
    assert metrics_of(out) == metrics
    assert f"{len(lines) - len(kept)} verified" in done.stdout, done.stdout


def test_an_agent_without_a_server_is_named(servers: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = collect(out, mixed(tmp_path), f"count={servers['count']}", expect=2)
    said = done.stdout + done.stderr
    assert "agent 'hash' has none" in said and "--server hash=HOST:PORT" in said, said
    assert not out.exists() or not out.read_bytes()


def test_servers_by_agent_are_refused_on_ray(servers: dict[str, str], tmp_path: Path) -> None:
    args = cli("collect", "--server", f"count={servers['count']}", "--input", str(mixed(tmp_path)), "--output", str(tmp_path / "o.jsonl"), "--ray")
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--ray: not with --server AGENT=HOST:PORT" in done.stderr, done.stderr


def test_an_address_holding_an_equals_sign_is_no_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`unix:/run/a=b.sock` is an address (a `=` after its `:`), so it names no agent's server."""
    from gym_metrics import cli
    from gym_metrics.collector import Environments, split_server

    assert split_server("unix:/run/a=b.sock") == (None, "unix:/run/a=b.sock") and split_server("math=127.0.0.1:1") == ("math", "127.0.0.1:1")
    assert Environments.parse(["unix:/run/a=b.sock"]) is None
    src = write(tmp_path / "in.jsonl", hash_rows())
    code = cli.main(["collect", "--server", "unix:/run/a=b.sock", "--input", str(src), "--output", str(tmp_path / "o.jsonl"), "--reverify-failed", "--connect-timeout", "0.2"])
    said = capsys.readouterr().err
    assert code != 0 and "give one environment's plain HOST:PORT" not in said, said  # (refused for its own reasons, not as servers by agent)
