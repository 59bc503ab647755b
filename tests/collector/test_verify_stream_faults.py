"""collect's verify stream (collector/_verify.py) against real gRPC servers that misbehave or
go away: one that ends the stream (status OK) with batches unanswered, one that answers a
rollout twice, a server stopped while a batch is being made; and a row no verify message can
carry. Every rollout is recorded exactly once, the retries are the ones said, or the run stops
naming the row."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from gym_metrics import ResourcesClient
from gym_metrics.collector._input import Rollout
from gym_metrics.collector._options import RetryPolicy
from gym_metrics.collector._verify import MAX_BODY_BYTES, Batch, make_batches, verify_all
from gym_metrics.errors import InvalidInputError
from gym_metrics.testing import serve_environment
from gym_metrics.v1 import resources_pb2 as pb, resources_pb2_grpc as pbg

pytestmark = pytest.mark.timeout(60)

FAST = RetryPolicy(max_retries=3, base_s=0.001, max_s=0.002)


def rollouts(n: int) -> list[Rollout]:
    return [Rollout(agent="a", task=i, rollout=0, row={"t": i}, verified=False, line=i + 1) for i in range(n)]


def result(item: Any) -> pb.VerifyResult:
    return pb.VerifyResult(task_index=item.task_index, rollout_index=item.rollout_index, reward=1.0, response_json="{}")


class Misbehaving(pbg.ResourcesServiceServicer):  # type: ignore[misc]
    """`ends early`: answers the first batch of each stream, then ends it (status OK) with the
    others unanswered. `twice`: answers each rollout of a batch twice, the first again after
    the batch was whole (a late duplicate)."""

    def __init__(self, mode: str) -> None:
        self.mode, self.streams, self.batches_seen = mode, 0, Counter[str]()

    async def VerifyStream(self, requests: Any, context: Any) -> AsyncIterator[pb.VerifyStreamResponse]:
        self.streams += 1
        async for request in requests:
            self.batches_seen[request.batch_id] += 1
            items = list(request.items)
            if self.mode == "ends early":
                yield pb.VerifyStreamResponse(batch_id=request.batch_id, results=[result(i) for i in items], positions=range(len(items)))
                return
            for p, item in enumerate(items):
                yield pb.VerifyStreamResponse(batch_id=request.batch_id, results=[result(item)], positions=[p], more=True)
                yield pb.VerifyStreamResponse(batch_id=request.batch_id, results=[result(item)], positions=[p], more=p < len(items) - 1)
            yield pb.VerifyStreamResponse(batch_id=request.batch_id, results=[result(items[0])], positions=[0])


async def run(servicer: Misbehaving, n: int, batch: int, log: list[str]) -> tuple[list[int], Any]:
    server = grpc.aio.server()
    pbg.add_ResourcesServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    recorded: list[int] = []
    try:
        async with ResourcesClient(f"127.0.0.1:{port}") as client:
            report = await asyncio.wait_for(
                verify_all(client, make_batches(iter(rollouts(n)), batch, 1 << 20), lambda b, v: recorded.extend(r.task for r, _ in b),
                           max_in_flight=3, retry=FAST, log=log.append),
                30,
            )  # fmt: skip
    finally:
        await server.stop(0)
    return recorded, report


async def test_a_server_that_ends_the_stream_with_batches_unanswered_gets_them_again() -> None:
    servicer, log = Misbehaving("ends early"), []
    recorded, report = await run(servicer, 20, 4, log)
    assert sorted(recorded) == list(range(20))  # each once
    assert report.answered == [5] and report.retired == frozenset()
    assert servicer.streams == 5 and len(log) == 4  # one batch a stream; attempts reset by each answer
    assert all(line.startswith("collect: server unavailable (the server closed the stream with batches unanswered)") for line in log), log
    assert set(servicer.batches_seen) == {str(i) for i in range(5)}


async def test_rollouts_answered_twice_are_recorded_once() -> None:
    servicer, log = Misbehaving("twice"), []
    recorded, report = await run(servicer, 12, 3, log)
    assert sorted(recorded) == list(range(12)) and len(recorded) == 12
    assert report.answered == [4] and not log and servicer.streams == 1
    assert set(servicer.batches_seen.values()) == {1}


class Gated:
    """A BatchSource (collect's generated batches) whose third batch waits for `gate`."""

    def __init__(self, batches: list[Batch]) -> None:
        self.batches, self.gate, self.waiting = batches, asyncio.Event(), asyncio.Event()

    async def next_batch(self) -> Batch | None:
        if len(self.batches) == 3:  # (two given)
            self.waiting.set()
            await self.gate.wait()
        return self.batches.pop(0) if self.batches else None


async def test_a_batch_made_while_its_stream_broke_goes_on_the_next_stream() -> None:
    """The server is stopped while the source makes a batch: the broken stream's reader, not
    cancelled by grpc, gets it and may not send it; it goes on the stream the retry opens (to
    the server started again on the same port), once."""
    source = Gated(list(make_batches(iter(math_rollouts(10)), 2, 1 << 20)))
    recorded: list[int] = []
    log: list[str] = []
    async with serve_environment("math_exact") as first:
        port = first.port
        async with ResourcesClient(f"127.0.0.1:{port}") as client:
            task = asyncio.ensure_future(verify_all(client, source, lambda b, v: recorded.extend(r.task for r, _ in b), max_in_flight=2,
                                                    retry=RetryPolicy(max_retries=50, base_s=0.05, max_s=0.1), log=log.append))  # fmt: skip
            waiting = asyncio.ensure_future(source.waiting.wait())
            await asyncio.wait({waiting, task}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():  # (a run that failed first says how, not only that the source waited in vain)
                waiting.cancel()
                raise AssertionError(f"the source was not asked for its third batch in 20 s; the run: {task.exception() if task.done() else 'still going'}")
            for _ in range(200):  # bounded: the two batches sent are answered
                if len(recorded) == 4:
                    break
                await asyncio.sleep(0.02)
            await first.stop(0)
            async with serve_environment("math_exact", port=port):
                await asyncio.sleep(0.3)  # the broken stream was given up and a retry waits on the source
                source.gate.set()
                report = await asyncio.wait_for(task, 30)
    assert sorted(recorded) == list(range(10)), recorded
    assert sum(report.answered) == 5 and report.retired == frozenset()
    assert log and all(line.startswith("collect: server unavailable") for line in log)


class Slow:
    """A BatchSource making each batch (and its end) in a while: two lanes' readers queue for it."""

    def __init__(self, batches: list[Batch]) -> None:
        self.batches, self.calls = batches, 0

    async def next_batch(self) -> Batch | None:
        self.calls += 1
        await asyncio.sleep(0.02)
        return self.batches.pop(0) if self.batches else None


async def test_two_lanes_sharing_a_slow_source_take_each_batch_once_and_stop_at_its_end() -> None:
    made = [[(r, make_body(r)) for r, _ in b] for b in make_batches(iter(math_rollouts(12)), 2, 1 << 20)]
    source = Slow(made)
    recorded: list[int] = []
    async with serve_environment("math_exact") as one, serve_environment("math_exact") as two:
        async with ResourcesClient(one.address) as a, ResourcesClient(two.address) as b:
            report = await asyncio.wait_for(verify_all([a, b], source, lambda batch, v: recorded.extend(r.task for r, _ in batch),
                                                       max_in_flight=8, retry=FAST), 30)  # fmt: skip
    assert sorted(recorded) == list(range(12))
    assert sum(report.answered) == 6 and report.retired == frozenset()
    assert source.calls == 7  # six batches and the end, asked once: the lane queued behind the end does not ask again


def math_rollouts(n: int) -> list[Rollout]:
    row = {"expected_answer": "4", "responses_create_params": {"input": [{"role": "user", "content": "2+2?"}]},
           "response": {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"}]}]}}  # fmt: skip
    return [Rollout(agent="a", task=i, rollout=0, row=dict(row), verified=False, line=i + 1) for i in range(n)]


def make_body(rollout: Rollout) -> bytes:
    from gym_metrics._util.jsonio import dumps_finite

    return dumps_finite(rollout.row)


def test_a_row_no_verify_message_can_carry_stops_the_batches_naming_its_line_after_those_before() -> None:
    rows = rollouts(3)
    rows[2] = Rollout(agent="a", task=2, rollout=0, row={"big": "x" * (MAX_BODY_BYTES + 1)}, verified=False, line=7)
    batches = make_batches(iter(rows), 10, 1 << 30)
    first = next(batches)
    assert [r.task for r, _ in first] == [0, 1]  # what was read before it is still verified
    with pytest.raises(InvalidInputError) as refused:
        next(batches)
    assert str(refused.value).startswith("a row too large to send")
    [violation] = refused.value.violations
    assert (violation.field, violation.row, violation.row_name) == ("(the row)", 7, "line")
    assert str(violation).startswith("line 7: (the row): ")
    assert violation.description.startswith(f"{(MAX_BODY_BYTES + 12) / (1 << 20):.1f} MB of JSON: past the {MAX_BODY_BYTES / (1 << 20):.1f} MB one verify message carries")
