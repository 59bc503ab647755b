"""VerifyStream's answers (_transport/server/_verify_stream.py): whole batches in request order,
or rollout by rollout as they finish (`answer_each`), within bounded read-ahead; a resent batch
answered from its first answer; leaving early cancels what runs. Then the same over a real
server on 127.0.0.1:0, where one slow verify must not hold back the rest."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gym_metrics._transport.client import ResourcesClient, VerifyInput
from gym_metrics._transport.server._verify_stream import ROLLOUTS_PER_LOOK_AHEAD, answers
from gym_metrics.environments import SimpleResourcesServer
from gym_metrics.models import BaseVerifyResponse
from gym_metrics.v1 import resources_pb2 as pb

from _transport_helpers import AnswerRequest


def request(batch_id: str, delays: list[float], answer_each: bool = False) -> pb.VerifyStreamRequest:
    """A batch whose item i takes delays[i] seconds (carried as its body)."""
    out = pb.VerifyStreamRequest(batch_id=batch_id, answer_each=answer_each)
    for i, delay in enumerate(delays):
        out.items.add(task_index=int(batch_id or 0), rollout_index=i, body_json=str(delay))
    return out


class Verifier:
    """Writes each result after its delay; counts batches verified and rollouts admitted."""

    def __init__(self) -> None:
        self.verified: list[str] = []
        self.open = self.peak = 0

    async def __call__(self, req: pb.VerifyStreamRequest, response: pb.VerifyStreamResponse, finished: Callable[[int, int], None] | None) -> int | None:
        """None: the answer's size is left to be measured."""
        self.verified.append(req.batch_id)
        self.open += len(req.items)
        self.peak = max(self.peak, self.open)
        results = [response.results.add(task_index=item.task_index, rollout_index=item.rollout_index) for item in req.items]

        async def one(i: int, delay: float) -> None:
            if delay:
                await asyncio.sleep(delay)
            results[i].reward = delay
            self.open -= 1
            if finished is not None:
                finished(i, results[i].ByteSize() + 8)  # (a result's size and its field's tag and length)

        await asyncio.gather(*(one(i, float(item.body_json)) for i, item in enumerate(req.items)))
        return None


async def _stream(requests: list[pb.VerifyStreamRequest]) -> AsyncIterator[tuple[pb.VerifyStreamRequest, int]]:
    for r in requests:
        yield r, r.ByteSize()


async def collected(requests: list[pb.VerifyStreamRequest], verifier: Verifier, look_ahead: int = 4, remember: int = 8) -> list[pb.VerifyStreamResponse]:
    stream = answers(_stream(requests), verifier, look_ahead=look_ahead, remember=remember, max_bytes=64 << 20)
    return [m async for m in stream]


async def test_whole_batches_come_in_request_order_once_per_batch_id() -> None:
    verifier = Verifier()
    requests = [request("1", [0.05]), request("2", [0.01]), request("1", [0.0]), request("3", [0.03]), request("", [0.01]), request("", [0.0])]
    out = await collected(requests, verifier)
    assert [m.batch_id for m in out] == ["1", "2", "1", "3", "", ""]
    assert [m.results[0].reward for m in out] == [0.05, 0.01, 0.05, 0.03, 0.01, 0.0]  # the resend: its first answer
    assert verifier.verified == ["1", "2", "3", "", ""]  # a resend is not verified again; no id, no reuse
    assert all(not m.positions and not m.more for m in out)


async def test_read_ahead_is_bounded_by_rollouts_not_yet_answered() -> None:
    verifier = Verifier()
    size = ROLLOUTS_PER_LOOK_AHEAD // 2
    requests = [request(str(b), [0.001] * size) for b in range(12)]
    out = await collected(requests, verifier, look_ahead=1)
    assert len(out) == 12 and verifier.peak <= ROLLOUTS_PER_LOOK_AHEAD + size  # one batch past the budget at most


async def test_answer_each_sends_what_finished_while_a_slow_rollout_runs() -> None:
    verifier = Verifier()
    slow = request("1", [0.5, 0.0, 0.01, 0.0], answer_each=True)
    behind = [request(str(b), [0.01, 0.0], answer_each=True) for b in range(2, 6)]
    started = time.monotonic()
    seen: list[tuple[str, list[int], bool, float]] = []
    async for m in answers(_stream([slow, *behind]), verifier, look_ahead=1, remember=8, max_bytes=64 << 20):
        seen.append((m.batch_id, list(m.positions) or list(range(len(m.results))), m.more, time.monotonic() - started))
    ones = [s for s in seen if s[0] == "1"]
    assert sorted(p for s in ones for p in s[1]) == [0, 1, 2, 3]  # every rollout once
    assert [s[2] for s in ones] == [True] * (len(ones) - 1) + [False]  # `more` until its last
    assert ones[-1][1] == [0] and ones[0][3] < 0.3  # the fast ones long before the slow one
    others = [s for s in seen if s[0] != "1"]
    assert {s[0] for s in others} == {"2", "3", "4", "5"} and all(s[3] < 0.3 for s in others)  # not held behind it
    for batch_id in "2345":
        mine = [s for s in others if s[0] == batch_id]
        assert sorted(p for s in mine for p in s[1]) == [0, 1] and mine[-1][2] is False


async def test_an_answer_each_batch_finished_at_once_comes_whole_without_positions() -> None:
    out = await collected([request("1", [0.0, 0.0, 0.0], answer_each=True), request("2", [], answer_each=True)], Verifier())
    assert [(m.batch_id, len(m.results), list(m.positions), m.more) for m in out] == [("1", 3, [], False), ("2", 0, [], False)]


async def test_answer_each_parts_stay_within_the_message_limit() -> None:
    verifier = Verifier()
    big = request("1", [0.2] + [0.0] * 40, answer_each=True)

    async def write_padded_first(req: pb.VerifyStreamRequest, response: pb.VerifyStreamResponse, finished: Callable[[int, int], None] | None) -> None:
        def padding(i: int, size: int) -> None:
            response.results[i].response_json = "x" * 100
            assert finished is not None
            finished(i, size + 100)

        await verifier(req, response, padding)

    out = [m async for m in answers(_stream([big]), write_padded_first, look_ahead=1, remember=1, max_bytes=1000)]
    assert all(m.ByteSize() <= 1000 for m in out) and len(out) > 2
    assert sorted(p for m in out for p in m.positions) == list(range(41)) and [m.more for m in out][-1] is False


async def test_leaving_early_cancels_what_still_runs() -> None:
    verifier = Verifier()
    stream = answers(_stream([request("1", [0.0]), request("2", [60.0], answer_each=True)]), verifier, look_ahead=4, remember=4, max_bytes=1 << 20)
    first = await stream.__anext__()
    assert first.batch_id == "1"
    await asyncio.sleep(0.05)
    await stream.aclose()  # the client went away: the slow verify must not keep running
    await asyncio.sleep(0.01)
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert not pending, pending


class OneSlow(SimpleResourcesServer):
    """'slow' takes 3 s; everything else answers at once (after a suspension)."""

    async def verify(self, body: AnswerRequest) -> BaseVerifyResponse:
        await asyncio.sleep(3 if body.answer == "slow" else 0.001)
        return BaseVerifyResponse(reward=1.0 if body.answer == body.expected else 0.0)


async def test_over_a_server_a_slow_verify_holds_back_only_itself(serve_env: Any) -> None:
    _, channel = await serve_env(OneSlow())
    client = ResourcesClient(channel)

    async def batches() -> AsyncIterator[tuple[str, list[VerifyInput]]]:
        for b in range(6):
            yield str(b), [(b, r, {"answer": "slow" if (b, r) == (0, 0) else "a", "expected": "a"}) for r in range(50)]

    started = time.monotonic()
    arrivals: dict[tuple[int, int], float] = {}
    lasts: list[str] = []
    async for part in client.verify_parts(batches()):
        for p, t, r in zip(part.positions, part.verified.task_index, part.verified.rollout_index):
            assert (t, r) == (int(part.batch_id), p)  # positions name the request's items
            arrivals[(t, r)] = time.monotonic() - started
        if part.last:
            lasts.append(part.batch_id)
    assert len(arrivals) == 300 and lasts[-1] == "0"
    assert max(v for k, v in arrivals.items() if k != (0, 0)) < 2.0 < arrivals[(0, 0)]


async def test_verify_stream_answer_each_yields_outcomes_as_they_finish(serve_env: Any) -> None:
    """What `evaluate --server` uses: its rows are keyed by task, so they need no order."""
    _, channel = await serve_env(OneSlow())
    client = ResourcesClient(channel)
    items: list[VerifyInput] = [(t, 0, {"answer": "slow" if t == 0 else ("a" if t % 2 else "b"), "expected": "a"}) for t in range(20)]
    ordered = [o.task_index async for o in client.verify_stream(items[1:], batch_size=8)]
    assert ordered == list(range(1, 20))
    outcomes = [o async for o in client.verify_stream(items, batch_size=8, answer_each=True)]
    assert outcomes[-1].task_index == 0 and sorted(o.task_index for o in outcomes) == list(range(20))
    assert {o.task_index: o.reward for o in outcomes} == {t: 1.0 if t % 2 else 0.0 for t in range(20)}


async def test_a_stream_mixing_both_keeps_the_whole_ones_in_order_and_holds_no_answer_each_behind_them() -> None:
    verifier = Verifier()
    requests = [request("1", [0.3]), request("2", [0.0, 0.01], answer_each=True), request("3", [0.0]), request("4", [0.01], answer_each=True)]
    order = [m.batch_id for m in await collected(requests, verifier)]
    assert order.index("1") < order.index("3")  # whole answers keep their request order
    assert max(i for i, b in enumerate(order) if b in "24") < order.index("1")  # answer_each ones never wait behind them


async def test_a_batch_id_reused_for_other_rollouts_is_refused_naming_it() -> None:
    """A resend must repeat its batch; the same id with other rollouts was answered with the
    first batch's results (silently the wrong rows)."""
    from gym_metrics.errors import InvalidInputError

    other = request("7", [0.0, 0.0])  # same id, two rollouts where the first had one
    with pytest.raises(InvalidInputError) as refused:
        await collected([request("7", [0.0]), other], Verifier())
    assert refused.value.violations[0].field == "request[1].batch_id" and "'7'" in refused.value.violations[0].description


@pytest.mark.parametrize("told", [False, True])
async def test_answers_kept_for_resends_are_bounded_in_bytes(told: bool) -> None:
    """The answers kept to answer a resend take at most the read-ahead's byte budget (16 MiB a
    unit of look-ahead), the oldest forgotten first: 256 answers of any size were kept. Their
    sizes measured, or as the verify told them (the server's: counted as they were written)."""

    class Large(Verifier):
        async def __call__(self, req: pb.VerifyStreamRequest, response: pb.VerifyStreamResponse, finished: Callable[[int, int], None] | None) -> int | None:
            await super().__call__(req, response, finished)
            for result in response.results:
                result.response_json = "x" * (1 << 20)
            return response.ByteSize() if told else None

    async def sent() -> AsyncIterator[tuple[pb.VerifyStreamRequest, int]]:
        for b in range(24):
            yield request(str(b), [0.0]), 16
        await asyncio.sleep(0.2)  # (every answer made before the resends)
        yield request("23", [0.0]), 16
        yield request("0", [0.0]), 16

    verifier = Large()
    out = [m async for m in answers(sent(), verifier, look_ahead=1, remember=256, max_bytes=64 << 20)]
    assert len(out) == 26
    assert verifier.verified == [str(b) for b in range(24)] + ["0"]  # 23 answered from what was kept; 0 forgotten (24 MiB > 16)
