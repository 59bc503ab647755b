"""Many replicas, one collect (issue 15 item 2): `collect --server A --server B --server C`
and `--server dns:///name:port`, as a user runs them (real `serve` subprocesses on loopback).

- Three replicas, one SIGKILLed mid-run: collect finishes (exit 0) by itself, the metrics file
  and the set of rollout lines are those of a one-server run, and every replica answered
  batches (the collector's "batches per server" line).
- Every replica gone mid-run: exit 4 after the bounded retries, one line; `--resume` on one
  server then finishes with the same metrics.
- `dns:///localhost:PORT` (round_robin over the name's addresses) works; nothing reachable
  exits 4 in one line; a --server given twice is refused (exit 2).
- verify_all with fake replicas: the batches of one that dies for good go to the others,
  each recorded once; a late duplicate answer is dropped.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_collector_faults import (
    AGENTS,
    REPEATS,
    TASKS,
    TOTAL,
    Procs,
    assert_complete,
    cli,
    free_port,
    metrics_of,
    start_server,
    wait_for_lines,
    write_tasks,
)

from gym_metrics._transport.client import ServerUnavailableError, VerifiedBatch, VerifiedPart, VerifyOutcome
from gym_metrics.collector import RetryPolicy
from gym_metrics.collector._input import Rollout
from gym_metrics.collector._verify import _Sender, make_batches, verify_all

pytestmark = pytest.mark.timeout(150)

ENV = "SlowHashMetricsEnv"
"""5 ms per verify and a compute_metrics (every row streamed to the replica that aggregates)."""
BATCHES = ("--batch-size", "8", "--max-in-flight", "6")
PER_SERVER = re.compile(r"batches per server: (.*)")
SAMPLE = Path(__file__).parents[2] / "gym_metrics_servers" / "math_exact" / "sample.jsonl"


def collect(servers: list[str], src: Path, out: Path, *extra: str) -> list[str]:
    args = ["collect", *(a for s in servers for a in ("--server", s)), "--input", str(src), "--output", str(out)]
    return cli(*args, "--num-repeats", str(REPEATS), *BATCHES, *extra)


def per_server(stdout: str) -> dict[str, int]:
    match = PER_SERVER.search(stdout)
    assert match, stdout
    return {name: int(n) for name, n in (item.rsplit(" ", 1) for item in match.group(1).split(", "))}


def sorted_lines(path: Path) -> list[bytes]:
    return sorted(path.read_bytes().splitlines(keepends=True))


@pytest.mark.slow
def test_three_replicas_one_sigkilled_mid_run(procs: Procs, tmp_path: Path) -> None:
    servers = [start_server(procs, ENV, 0, tmp_path / f"server{i}.log") for i in range(3)]
    addresses = [f"127.0.0.1:{port}" for _, port in servers]
    src = write_tasks(tmp_path / "tasks.jsonl")

    ref = tmp_path / "reference" / "rollouts.jsonl"
    done = subprocess.run(collect(addresses[:1], src, ref), capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "batches per server" not in done.stdout  # one server: the report as before

    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()
    log = tmp_path / "collector.log"
    collector = procs.start(collect(addresses, src, out, "--max-retries", "2"), log, tmp_path)
    wait_for_lines(collector, out, TOTAL // 4)
    victim = servers[1][0]
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(timeout=10) == -signal.SIGKILL
    assert collector.wait(timeout=90) == 0, log.read_text(errors="replace")[-3000:]

    text = log.read_text(errors="replace")
    assert f"collect: server {addresses[1]} unavailable" in text  # then "given up", unless the others finished first
    counts = per_server(text)
    assert list(counts) == addresses and all(n > 0 for n in counts.values()), counts
    assert sum(counts.values()) == TOTAL // 8  # every batch answered once, none twice
    assert metrics_of(out).read_bytes() == metrics_of(ref).read_bytes()
    assert sorted_lines(out) == sorted_lines(ref)
    assert_complete(out)


@pytest.mark.slow
def test_processes_report_the_batches_each_server_answered(procs: Procs, tmp_path: Path) -> None:
    """With --processes the shards' counts were added up but not theirs per server: the line was missing."""
    addresses = [f"127.0.0.1:{port}" for _, port in (start_server(procs, ENV, 0, tmp_path / f"server{i}.log") for i in range(2))]
    src = write_tasks(tmp_path / "tasks.jsonl")
    done = subprocess.run(collect(addresses, src, tmp_path / "out.jsonl", "--processes", "2"), capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = per_server(done.stdout)
    assert list(counts) == addresses and all(n > 0 for n in counts.values()), counts
    assert TOTAL // 8 <= sum(counts.values()) <= TOTAL // 8 + 2  # each shard's last batch may be short
    assert_complete(tmp_path / "out.jsonl")


@pytest.mark.slow
def test_every_replica_gone_exits_4_then_resume_finishes(procs: Procs, tmp_path: Path) -> None:
    servers = [start_server(procs, ENV, 0, tmp_path / f"server{i}.log") for i in range(2)]
    addresses = [f"127.0.0.1:{port}" for _, port in servers]
    src = write_tasks(tmp_path / "tasks.jsonl")
    out = tmp_path / "rollouts.jsonl"
    log = tmp_path / "collector.log"
    collector = procs.start(collect(addresses, src, out, "--max-retries", "1"), log, tmp_path)
    wait_for_lines(collector, out, TOTAL // 5)
    for proc, _ in servers:
        proc.send_signal(signal.SIGKILL)
    assert collector.wait(timeout=60) == 4
    errors = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "gave up after 1 retries" in errors[0], errors
    assert "Traceback" not in log.read_text(errors="replace")
    assert not metrics_of(out).exists()

    _, port = start_server(procs, ENV, 0, tmp_path / "server_new.log")
    done = subprocess.run(collect([f"127.0.0.1:{port}"], src, out, "--resume"), capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    ref = tmp_path / "reference" / "rollouts.jsonl"
    done = subprocess.run(collect([f"127.0.0.1:{port}"], src, ref), capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    assert metrics_of(out).read_bytes() == metrics_of(ref).read_bytes()
    assert_complete(out)


@pytest.mark.slow  # 10-26 s: on the default Python only (CI's time bound)
def test_dns_target_unreachable_and_duplicate_servers(procs: Procs, tmp_path: Path) -> None:
    """math_exact's sample through `dns:///localhost:PORT`: the same files as `127.0.0.1:PORT`."""
    _, port = start_math_exact(procs, tmp_path / "server.log")
    runs = {}
    for name, server in (("plain", f"127.0.0.1:{port}"), ("dns", f"dns:///localhost:{port}")):
        out = tmp_path / name / "rollouts.jsonl"
        args = cli("collect", "--server", server, "--input", str(SAMPLE), "--output", str(out))
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-3000:]
        runs[name] = out
    assert metrics_of(runs["dns"]).read_bytes() == metrics_of(runs["plain"]).read_bytes()
    assert sorted_lines(runs["dns"]) == sorted_lines(runs["plain"])

    down = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    args = ["--input", str(SAMPLE), "--output", str(tmp_path / "x.jsonl"), "--connect-timeout", "0.5"]
    done = subprocess.run(cli("collect", "--server", down[0], "--server", down[1], *args), capture_output=True, text=True, timeout=60)
    assert done.returncode == 4, done.stderr
    assert done.stderr.startswith("error: cannot reach any of the 2 servers") and done.stderr.count("\n") == 1, done.stderr
    assert "Connection refused" in done.stderr

    twice = f"127.0.0.1:{port}"
    done = subprocess.run(cli("collect", "--server", twice, "--server", twice, *args), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"{twice} given twice" in done.stderr, done.stderr
    assert not (tmp_path / "x.jsonl").exists()


def start_math_exact(procs: Procs, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    from test_collector_faults import LISTENING
    import time

    proc = procs.start(cli("serve", "math_exact", "--port", "0"), log, log.parent)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        match = LISTENING.search(log.read_text(errors="replace"))
        if match:
            return proc, int(match.group(2))
        assert proc.poll() is None, log.read_text(errors="replace")
        time.sleep(0.02)
    raise AssertionError(log.read_text(errors="replace"))


class FakeReplica:
    """Answers VerifyStream batches; after `die_after` answers it is gone for good (every
    call, this one included, fails UNAVAILABLE)."""

    def __init__(self, die_after: int | None = None) -> None:
        self.die_after, self.answered, self.dead = die_after, 0, False
        self.target = f"fake{id(self)}"

    async def verify_batches(self, requests: Any) -> AsyncIterator[tuple[str, list[VerifyOutcome]]]:
        async for batch_id, items in requests:
            if self.dead or (self.die_after is not None and self.answered >= self.die_after):
                self.dead = True
                raise ServerUnavailableError("UNAVAILABLE: gone")
            await asyncio.sleep(0.001)
            self.answered += 1
            yield batch_id, [VerifyOutcome(t, r, 1.0, {"reward": 1.0}) for t, r, _ in items]


def make_rollouts(n: int) -> list[Rollout]:
    return [Rollout(agent="a", task=i, rollout=0, row={"x": i}, verified=False, line=i + 1) for i in range(n)]


async def run_fakes(replicas: list[FakeReplica], log: list[str]) -> tuple[list[tuple[int, int]], Any]:
    recorded: list[tuple[int, int]] = []
    batches = make_batches(iter(make_rollouts(300)), max_items=5, max_bytes=1 << 20)
    report = await asyncio.wait_for(
        verify_all(
            replicas,  # type: ignore[arg-type]
            batches,
            lambda batch, _: recorded.extend((r.task, r.rollout) for r, _ in batch),
            max_in_flight=4,
            retry=RetryPolicy(max_retries=2, base_s=0.001, max_s=0.002),
            log=log.append,
            names=[r.target for r in replicas],
        ),
        timeout=10,
    )
    return recorded, report


async def test_a_dead_replicas_batches_go_to_the_others() -> None:
    replicas = [FakeReplica(), FakeReplica(die_after=3), FakeReplica()]
    log: list[str] = []
    recorded, report = await run_fakes(replicas, log)
    assert sorted(recorded) == [(i, 0) for i in range(300)]  # each exactly once
    assert report.retired == {1} and report.answered[1] == 3 and sum(report.answered) == 60
    assert all(n > 0 for n in report.answered)
    assert any(line.startswith(f"collect: server {replicas[1].target} given up") for line in log), log


async def test_every_fake_replica_gone_raises() -> None:
    log: list[str] = []
    with pytest.raises(ServerUnavailableError, match="gave up after 2 retries"):
        await run_fakes([FakeReplica(die_after=2), FakeReplica(die_after=4)], log)


def _part(batch_id: str, positions: list[int], last: bool) -> VerifiedPart:
    return VerifiedPart(batch_id, positions, VerifiedBatch([0] * len(positions), positions, [1.0] * len(positions), ["{}"] * len(positions), [None] * len(positions), [""] * len(positions)), last)


async def test_a_late_duplicate_answer_is_dropped() -> None:
    sender = _Sender(make_batches(iter(make_rollouts(3)), max_items=1, max_bytes=1 << 20), 4, 2, None)
    stream = sender.new_stream(0)
    requests = sender.requests(stream)
    batch_id, _ = await anext(requests)
    assert sender.answered(_part(batch_id, [0], True), 1) is not None
    assert sender.answered(_part(batch_id, [0], True), 0) is None  # the same batch again, from another replica
    assert sender.answered_by == [0, 1]


async def test_each_rollout_is_recorded_once_and_a_resent_batch_carries_only_the_rest() -> None:
    sender = _Sender(make_batches(iter(make_rollouts(4)), max_items=4, max_bytes=1 << 20), 1, 1, 4)
    stream = sender.new_stream(0)
    batch_id, items = await anext(sender.requests(stream))
    assert [i[0] for i in items] == [0, 1, 2, 3] and sender.waiting == 4
    taken = sender.answered(_part(batch_id, [2, 0], False), 0)
    assert taken is not None
    batch, verified = taken
    assert [r.task for r, _ in batch] == [2, 0] and verified.rollout_index == [2, 0]
    again = sender.answered(_part(batch_id, [0, 3], False), 0)  # 0 again (a duplicate) with a new one
    assert again is not None and [r.task for r, _ in again[0]] == [3] and again[1].rollout_index == [3]
    assert sender.waiting == 1 and batch_id in sender.unanswered
    sender.release(stream)  # the stream broke: the batch goes again with its one rollout left
    _, resent = await anext(sender.requests(sender.new_stream(0)))
    assert [i[0] for i in resent] == [1]
    done = sender.answered(_part(batch_id, [0], True), 0)
    assert done is not None and [r.task for r, _ in done[0]] == [1]
    assert not sender.unanswered and sender.answered_by == [1] and sender.waiting == 0


async def test_an_answer_that_ends_short_or_names_a_position_past_its_batch_breaks_the_stream() -> None:
    sender = _Sender(make_batches(iter(make_rollouts(4)), max_items=2, max_bytes=1 << 20), 2, 1, 8)
    requests = sender.requests(sender.new_stream(0))
    first, _ = await anext(requests)
    second, _ = await anext(requests)
    with pytest.raises(ServerUnavailableError, match="1 of its rollouts unanswered"):
        sender.answered(_part(first, [1], True), 0)
    with pytest.raises(ServerUnavailableError, match="past batch"):
        sender.answered(_part(second, [0, 5], False), 0)


@pytest.mark.slow
def test_round_robin_target_spreads_streams_over_its_addresses(procs: Procs, tmp_path: Path) -> None:
    """`ipv4:A,B,C` is resolved by grpc like a dns name with three addresses (a headless
    Service): one stream per address, placed round_robin, so each replica verifies a share."""
    ports = [start_server(procs, "PidEnv", 0, tmp_path / f"server{i}.log")[1] for i in range(3)]
    src = tmp_path / "tasks.jsonl"
    src.write_text("".join(f'{{"agent_ref": {{"name": "a"}}, "t": {t}}}\n' for t in range(TASKS)))
    out = tmp_path / "rollouts.jsonl"
    target = "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports)
    done = subprocess.run(collect([target], src, out), capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    pids = {json.loads(line)["worker_pid"] for line in out.read_bytes().splitlines()}
    assert len(pids) == 3, pids


async def test_a_call_grpc_cancels_itself_raises_what_broke_it() -> None:
    """grpc cancels a call whose request stream fails and reports CancelledError. When the
    batches' own source raised, that error is raised (read as a broken stream, the lane retried
    on an exhausted source and the run ended short, exit 0); when grpc's sending failed (a
    connection that just died) it is ServerUnavailableError, and the lane retries. A caller's
    own cancel stays a cancel."""
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics._transport.server import ServerConfig, start_server

    async def requests() -> AsyncIterator[tuple[str, list[Any]]]:
        yield "0", [(0, 0, '{"expected_answer": "1", "response": {"output": []}}')]
        raise RuntimeError("the request stream fails")

    async with await start_server("math_exact", ServerConfig(port=0, log_requests=False)) as server:
        async with ResourcesClient(server.address) as client:
            with pytest.raises(RuntimeError, match="the request stream fails"):
                async for _ in client.verify_batch_columns(requests()):
                    pass

            async def idle() -> AsyncIterator[tuple[str, list[Any]]]:
                await asyncio.Event().wait()
                yield "0", []

            async def drain() -> None:
                async for _ in client.verify_batch_columns(idle()):
                    pass

            task = asyncio.ensure_future(drain())
            await asyncio.sleep(0.2)
            task.cancel()  # the caller's own cancellation stays one
            with pytest.raises(asyncio.CancelledError):
                await task


async def test_replicas_must_say_the_same_of_their_environment(tmp_path: Path) -> None:
    """Two servers each serving an `Env` (its `app.py`'s class name), one scoring 1 and listing
    pass@1, the other scoring 0: their rewards were mixed in one file. Everything
    GetServerInfo says must agree, and the refusal names what differs."""
    from gym_metrics import ResourcesClient, SimpleResourcesServer
    from gym_metrics.collector import collect_async
    from gym_metrics.errors import InvalidInputError
    from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
    from gym_metrics.testing import serve_environment

    def env(reward: float, reducers: list[str]) -> type[SimpleResourcesServer]:
        class Env(SimpleResourcesServer):
            async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
                return BaseVerifyResponse(reward=reward)

        Env.reducers = reducers
        return Env

    rows = tmp_path / "in.jsonl"
    rows.write_text('{"agent_ref": {"name": "a"}, "response": {"output": []}}\n')
    async with serve_environment(env(1.0, ["pass@1"])) as one, serve_environment(env(0.0, [])) as two:
        async with ResourcesClient(one.address) as a, ResourcesClient(two.address) as b:
            with pytest.raises(InvalidInputError, match="the servers serve different environments") as caught:
                await collect_async([a, b], rows, tmp_path / "out.jsonl")
    assert "they differ in metrics" in str(caught.value) and not (tmp_path / "out.jsonl").exists()
