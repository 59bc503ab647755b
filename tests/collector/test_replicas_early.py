"""A replica lost early (issue 23 item 11): `collect --server A --server B --server C` goes on
while any replica serves, whenever the others die, including before the first batch.

Each victim is a real `serve` process that SIGKILLs itself at one moment of the collect (the
`DiesAt...Env` classes of _collector_envs.py), so the moment is exact, with no sleeps:

- its first GetServerInfo (collect's environment check, right after the connection probe);
- its second (the worker check that opens its connections, before any verify call);
- its first verify (before it answered a batch);
- its first compute_metrics (aggregation runs on the first replica given).

The run exits 0 with the rows and metrics file of a run on one server. With every replica
lost right after the connection probe, collect exits 4 in one line, bounded by --connect-timeout.
A call that goes to one replica (aggregation) moves on to the next at once when it fails, even
with no retries allowed.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_collector_faults import TOTAL, Procs, assert_complete, metrics_of, start_server, write_tasks
from test_replicas import ENV, collect, per_server, sorted_lines

from gym_metrics._transport.client import ServerUnavailableError
from gym_metrics.collector import RetryPolicy
from gym_metrics.collector._replicas import on_any

pytestmark = pytest.mark.timeout(240)

VICTIMS = {
    "environment check": "DiesAtFirstInfoEnv",
    "opening connections": "DiesAtSecondInfoEnv",
    "first verify": "DiesAtFirstVerifyEnv",
    "aggregation": "DiesAtAggregationEnv",
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The rollouts file of a run on one server that nothing disturbs (its metrics beside it)."""
    tmp = tmp_path_factory.mktemp("reference")
    procs = Procs()
    try:
        _, port = start_server(procs, ENV, 0, tmp / "server.log")
        src = write_tasks(tmp / "tasks.jsonl")
        out = tmp / "rollouts.jsonl"
        done = subprocess.run(collect([f"127.0.0.1:{port}"], src, out), capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        procs.kill_all()
    yield out


@pytest.mark.slow
@pytest.mark.parametrize("moment", list(VICTIMS))
def test_a_replica_lost_early_leaves_the_run_to_the_others(
    moment: str, procs: Procs, tmp_path: Path, reference: Path
) -> None:
    victim, port = start_server(procs, VICTIMS[moment], 0, tmp_path / "victim.log")
    others = [start_server(procs, ENV, 0, tmp_path / f"server{i}.log")[1] for i in (1, 2)]
    addresses = [f"127.0.0.1:{p}" for p in (port, *others)]  # the victim first: aggregation goes there
    src = write_tasks(tmp_path / "tasks.jsonl")
    out = tmp_path / "rollouts.jsonl"
    done = subprocess.run(
        collect(addresses, src, out, "--connect-timeout", "2", "--max-retries", "3"),
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert victim.wait(timeout=10) == -signal.SIGKILL  # it did die, at that moment
    counts = per_server(done.stdout)
    assert all(counts[a] > 0 for a in addresses[1:]), counts
    assert moment == "aggregation" or counts.get(addresses[0], 0) == 0, counts  # it answered none
    assert sum(counts.values()) == TOTAL // 8  # every batch answered once, none twice
    assert metrics_of(out).read_bytes() == metrics_of(reference).read_bytes()
    assert sorted_lines(out) == sorted_lines(reference)
    assert_complete(out)
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_every_replica_lost_right_after_connecting_exits_4(procs: Procs, tmp_path: Path) -> None:
    ports = [start_server(procs, "DiesAtFirstInfoEnv", 0, tmp_path / f"server{i}.log")[1] for i in range(3)]
    addresses = [f"127.0.0.1:{p}" for p in ports]
    src = write_tasks(tmp_path / "tasks.jsonl")
    out = tmp_path / "rollouts.jsonl"
    started = time.monotonic()
    done = subprocess.run(
        collect(addresses, src, out, "--connect-timeout", "1", "--max-retries", "2"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 4, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: cannot reach any of the 3 servers"), done.stderr
    assert "Traceback" not in done.stderr
    assert 1 <= elapsed < 20, elapsed  # it waited --connect-timeout, and not much more
    assert not metrics_of(out).exists()


class Replica:
    """A client double whose server is up or gone; counts the calls it got."""

    def __init__(self, target: str, up: bool) -> None:
        self.target, self.up, self.calls = target, up, 0

    async def answer(self) -> str:
        self.calls += 1
        if not self.up:
            raise ServerUnavailableError("UNAVAILABLE: Connection refused")
        return self.target


async def test_a_call_on_any_replica_skips_a_dead_one_without_a_retry() -> None:
    dead, a, b = Replica("dead", False), Replica("a", True), Replica("b", True)
    order = [dead, a, b]
    log: list[str] = []
    no_retries = RetryPolicy(max_retries=0)
    for _ in range(3):  # one per agent: the dead one is asked once, then goes last
        got = await on_any(order, lambda c: c.answer(), no_retries, log.append)  # type: ignore[arg-type, attr-defined]
        assert got == "a"
    assert (dead.calls, a.calls, b.calls) == (1, 3, 0)
    assert order == [a, b, dead]
    assert log == ["collect: server dead unavailable (UNAVAILABLE: Connection refused)"]

    gone = [Replica("x", False), Replica("y", False)]
    with pytest.raises(ServerUnavailableError, match="gave up after 1 retries"):
        await asyncio.wait_for(
            on_any(gone, lambda c: c.answer(), RetryPolicy(max_retries=1, base_s=0.001), log.append),  # type: ignore[arg-type, attr-defined]
            timeout=10,
        )
    assert [r.calls for r in gone] == [2, 2]  # each asked once a round, two rounds
