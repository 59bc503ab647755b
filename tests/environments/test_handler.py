"""The environment handler without the transport (DESIGN: unit-test domain code without gRPC):
batch verification records each failure on its rollout, streams are answered in order with a
bounded look-ahead and resent batch ids answered once, and aggregation stays within its limits."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping
from typing import Any

import pytest

from gym_metrics._util.limits import CallLimits
from gym_metrics.aggregate import AggregateOptions
from gym_metrics.environments import INVALID_REQUEST, TIMEOUT, VERIFY_FAILED, EnvironmentHandler, SimpleResourcesServer
from gym_metrics.errors import OverloadedError, UserCodeError
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.rollouts import RolloutColumns


class Request(BaseVerifyRequest):
    answer: str = ""
    sleep: float = 0.0


class Scored(BaseVerifyResponse):
    score: float = 0.0


class Env(SimpleResourcesServer):
    async def verify(self, body: Request) -> Scored:
        if body.sleep:
            await asyncio.sleep(body.sleep)
        if body.answer == "boom":
            raise ValueError("boom in verify")
        if body.answer == "block":
            time.sleep(0.5)  # synchronous: wait_for cannot stop it
        if body.answer in ("nan", "inf"):
            return Scored(reward=float("nan") if body.answer == "nan" else 1.0, score=float(body.answer))
        return Scored(reward=1.0 if body.answer == "yes" else 0.0)


class Recorded:
    """A Recorder that keeps what it was told."""

    def __init__(self) -> None:
        self.verified = 0
        self.failed: dict[str, int] = {}
        self.queue: list[int] = []
        self.running: list[int] = []

    def rollouts(self, verified: int, failed: Mapping[str, int] | None = None) -> None:
        self.verified += verified
        for kind, n in (failed or {}).items():
            self.failed[kind] = self.failed.get(kind, 0) + n

    def queued(self, rollouts: int) -> None:
        self.queue.append(rollouts)

    def aggregating(self, change: int) -> None:
        self.running.append(change)


def body(answer: str, sleep: float = 0.0) -> str:
    return f'{{"responses_create_params": {{"input": []}}, "response": {{}}, "answer": "{answer}", "sleep": {sleep}}}'


async def test_a_batch_records_every_failure_on_its_rollout_and_counts_them() -> None:
    recorder = Recorded()
    handler = EnvironmentHandler(Env(), verify_timeout_s=0.2, recorder=recorder)
    results: dict[int, tuple[float, str, str | None, str]] = {}
    bodies = [body("yes"), body("no"), "{not json", body("boom"), body("yes", sleep=5.0)]
    await handler.verify_batch(
        bodies, lambda i, reward, response, kind, message: results.__setitem__(i, (reward, response, kind, message)),
        handler.slots(), lambda i: (i, 0),
    )  # fmt: skip
    assert results[0][0] == 1.0 and results[0][2] is None and '"reward"' in results[0][1]
    assert results[1][0] == 0.0 and results[1][2] is None
    assert results[2][:3] == (0.0, "", INVALID_REQUEST)
    assert results[3][2] == VERIFY_FAILED and "boom in verify" in results[3][3]
    assert results[4][2] == TIMEOUT and "0.2 s" in results[4][3]
    assert (recorder.verified, recorder.failed) == (2, {INVALID_REQUEST: 1, VERIFY_FAILED: 1, TIMEOUT: 1})
    assert recorder.queue == [5, -5]  # in flight while the batch ran, none after


async def test_a_blocking_verify_fails_as_a_timeout_and_nan_is_no_value() -> None:
    """A verify that blocks the loop past --verify-timeout was scored as in time: now a timeout,
    in a batch and alone. NaN or an infinity in a gym-metrics environment's answer is written
    as null, no value (a ported NeMo Gym environment's fails: tests/nemo_gym/test_routes.py)."""
    handler = EnvironmentHandler(Env(), verify_timeout_s=0.2)
    results: dict[int, tuple[float, str, str | None, str]] = {}
    bodies = [body("nan"), body("inf"), body("block"), body("yes")]
    await handler.verify_batch(
        bodies, lambda i, reward, response, kind, message: results.__setitem__(i, (reward, response, kind, message)),
        handler.slots(), lambda i: (i, 0),
    )  # fmt: skip
    assert results[0][2] is None and '"reward":null' in results[0][1] and '"score":null' in results[0][1]
    assert results[1][:3] == (1.0, results[1][1], None) and '"score":null' in results[1][1]
    assert results[2][2] == TIMEOUT and "verify exceeded 0.2 s: it ran 0.5 s without yielding" in results[2][3]
    assert results[3][:3] == (1.0, results[3][1], None)
    with pytest.raises(asyncio.TimeoutError, match="without yielding"):  # one verify, as a session's is
        await handler.verify(body("block"))


async def test_a_cancelled_batch_stops_every_rollout_in_it() -> None:
    """The client went away (its stream cancelled): every verify of the batch stops, not only
    the one awaited (the others ran to the end, 28 of 32, and twice when a batch was resent)."""
    running: list[asyncio.Task[object]] = []

    class Slow(SimpleResourcesServer):
        async def verify(self, body: Request) -> BaseVerifyResponse:
            running.append(asyncio.current_task())  # type: ignore[arg-type]
            await asyncio.sleep(60)
            return BaseVerifyResponse(reward=1.0)

    handler = EnvironmentHandler(Slow())
    batch = asyncio.ensure_future(handler.verify_batch([body("yes")] * 6, lambda *a: None, handler.slots(), lambda i: (i, 0)))
    for _ in range(100):  # bounded: until all six run
        if len(running) == 6:
            break
        await asyncio.sleep(0.01)
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    await asyncio.sleep(0)
    assert len(running) == 6 and all(t.done() for t in running)


async def test_one_verify_raises_and_labels_the_environments_own_crash() -> None:
    handler = EnvironmentHandler(Env())
    assert (await handler.verify(body("yes")))[0] == 1.0
    with pytest.raises(UserCodeError, match="verify raised ValueError: boom in verify"):
        await handler.verify(body("boom"))


def _columns(tasks: list[int]) -> RolloutColumns:
    return RolloutColumns.from_rows([{"_ng_task_index": t, "_ng_rollout_index": 0, "reward": 1.0} for t in tasks])


async def test_aggregation_counts_resends_and_refuses_past_its_limits() -> None:
    recorder = Recorded()
    limits = CallLimits(max_rollouts_per_call=5, max_tasks_per_call=3, max_concurrent_aggregations=1)
    handler = EnvironmentHandler(Env(), limits=limits, recorder=recorder)
    async with handler.aggregation("agent", AggregateOptions(), header_bytes=10) as call:
        with pytest.raises(OverloadedError, match="max_concurrent_aggregations"):
            async with handler.aggregation("other", AggregateOptions(), header_bytes=10):
                pass
        assert call.batch("b1", 2) == (0, 0)
        call.add(_columns([0, 1]))
        assert call.batch("b1", 2) is None  # a resend
        assert call.batch("", 1) == (2, 4)
        call.add(_columns([2]))
        result = await call.finish(lambda agg, received, duplicates: (agg.agent_name, received, duplicates))
    assert result == ("agent", 3, 1)
    assert recorder.running == [1, -1]
    with pytest.raises(OverloadedError, match="max_tasks_per_call"):
        async with handler.aggregation("agent", AggregateOptions(expected_task_indices=[0, 1, 2, 3]), header_bytes=10):
            pass
    async with handler.aggregation("agent", AggregateOptions(), header_bytes=10) as call:
        call.batch("x", 5)
        call.received(limits.max_call_bytes - 10)
        with pytest.raises(OverloadedError, match="max_call_mb"):
            call.received(1)
        with pytest.raises(OverloadedError, match="max_rollouts_per_call"):
            call.batch("y", 1)
    async with handler.aggregation("agent", AggregateOptions(), header_bytes=10) as call:
        call.add(_columns([0, 1, 2, 3]))
        with pytest.raises(OverloadedError, match="max_tasks_per_call"):
            await call.finish(lambda *args: args)


def test_the_handler_loads_no_grpc() -> None:
    import subprocess

    code = "import sys, gym_metrics.environments; assert 'grpc' not in sys.modules, sorted(m for m in sys.modules if 'grpc' in m)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr



async def test_failed_verifies_log_three_tracebacks_then_a_line_at_each_power_of_ten(caplog: pytest.LogCaptureFixture) -> None:
    """A batch of thousands failing wrote a 25-line traceback each (each row's error is in its answer)."""
    import logging

    from gym_metrics import BaseVerifyRequest, SimpleResourcesServer
    from gym_metrics.environments import EnvironmentHandler

    class Broken(SimpleResourcesServer):
        async def verify(self, body: BaseVerifyRequest) -> Any:
            raise ValueError("no judge")

    handler = EnvironmentHandler(Broken())
    written: list[str | None] = []
    bodies = [{"responses_create_params": {"input": "q"}, "response": {"output": []}}] * 120
    with caplog.at_level(logging.WARNING, logger="gym_metrics"):
        await handler.verify_batch(bodies, lambda i, r, t, kind, m: written.append(kind), handler.slots(), lambda i: (i, 0))
    said = [r for r in caplog.records if "verif" in r.getMessage()]
    assert len(written) == 120 and set(written) == {"verify_failed"}
    assert sum(r.exc_info is not None for r in said) == 3 and len(said) == 5  # 3 tracebacks, then at the 10th and 100th
    assert "100 verifies failed so far" in said[-1].getMessage() and "ValueError: no judge" in said[-1].getMessage()
