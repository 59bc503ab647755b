"""VerifyStream answers read column-wise (VerifiedBatch), bodies sent as bytes, results made in
the response in place: the same outcomes as before, over a real server on 127.0.0.1:0."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson

from gym_metrics._transport.client import ResourcesClient, VerifiedBatch, VerifyInput, VerifyOutcome
from gym_metrics.models import BaseVerifyResponse
from gym_metrics.environments import SimpleResourcesServer

from _transport_helpers import AnswerEnv, AnswerRequest

ITEMS: list[VerifyInput] = [
    (0, 0, b'{"answer": "a", "expected": "a"}'),  # bytes, as the collector sends them
    (0, 1, '{"answer": "b", "expected": "a"}'),  # str
    (1, 0, {"answer": "boom"}),  # verify raises: a failed rollout
    (1, 1, b'{"answer": 5}'),  # fails the request model
    (2, 0, "not json"),
    (2, 1, {"answer": "\u00e9", "expected": "\u00e9"}),
]


async def _batches(items: Sequence[VerifyInput], size: int) -> AsyncIterator[tuple[str, list[VerifyInput]]]:
    for b in range(0, len(items), size):
        yield str(b), list(items[b : b + size])


async def test_columns_and_outcomes_agree(serve_env: Any) -> None:
    _, channel = await serve_env(AnswerEnv())
    client = ResourcesClient(channel)
    columns = [(i, v) async for i, v in client.verify_batch_columns(_batches(ITEMS, 4))]
    outcomes = [(i, o) async for i, o in client.verify_batches(_batches(ITEMS, 4))]
    assert [i for i, _ in columns] == [i for i, _ in outcomes] == ["0", "4"]
    flat: list[VerifyOutcome] = [o for _, batch in outcomes for o in batch]
    assert flat == [o for _, v in columns for o in v.outcomes()]
    assert [(o.task_index, o.rollout_index) for o in flat] == [(t, r) for t, r, _ in ITEMS]
    assert [o.reward for o in flat[:2]] == [1.0, 0.0] and flat[5].reward == 1.0
    assert [o.error_kind for o in flat] == [None, None, "verify_failed", "invalid_request", "invalid_request", None]
    assert "boom in verify" in flat[2].error_message and flat[2].response is None
    assert flat[0].response == {"reward": 1.0, "mask_sample": False, "answer_len": 1}
    first = columns[0][1]
    assert len(first) == 4 and first.response_json[2] == "" and first.error_kind[:2] == [None, None]
    assert orjson.loads(first.response_json[0]) == flat[0].response


async def test_verify_stream_items_that_suspend_fill_their_own_results(serve_env: Any) -> None:
    """Results are made in the response before their verify finishes: items that suspend
    (and a timeout among them) still land at their own positions."""

    class Mixed(SimpleResourcesServer):
        async def verify(self, body: AnswerRequest) -> BaseVerifyResponse:
            if body.answer == "slow":
                await asyncio.sleep(5)
            elif body.answer.startswith("wait"):
                await asyncio.sleep(0.01 * int(body.answer[4:]))
            return BaseVerifyResponse(reward=float(len(body.answer)), echo=body.answer)

    _, channel = await serve_env(Mixed(), verify_timeout_s=0.5)
    answers = ["wait3", "x", "slow", "wait1", "", "wait2"]
    items: list[VerifyInput] = [(i, 7, {"answer": a}) for i, a in enumerate(answers)]
    [(_, got)] = [b async for b in ResourcesClient(channel).verify_batch_columns(_batches(items, 10))]
    assert got.task_index == list(range(6)) and got.rollout_index == [7] * 6
    assert got.error_kind == [None, None, "timeout", None, None, None]
    assert got.reward == [5.0, 1.0, 0.0, 5.0, 0.0, 5.0]
    assert [orjson.loads(t)["echo"] if t else None for t in got.response_json] == [*answers[:2], None, *answers[3:]]


def test_from_outcomes_round_trips() -> None:
    outcomes = [VerifyOutcome(3, 1, 0.5, {"reward": 0.5, "x": [1, 2]}), VerifyOutcome(4, 0, 0.0, None, "timeout", "slow")]
    batch = VerifiedBatch.from_outcomes(outcomes)
    assert batch.response_json[1] == "" and batch.error_kind == [None, "timeout"]
    assert batch.outcomes() == outcomes


async def test_a_failing_batch_source_raises_its_error_not_a_broken_stream(serve_env: Any) -> None:
    """grpc swallows what the request iterator raises and cancels the call; read as a broken
    stream, the collector retried and then took the input as finished: a short file, exit 0."""
    _, channel = await serve_env(AnswerEnv())
    client = ResourcesClient(channel)

    async def breaking() -> AsyncIterator[tuple[str, list[VerifyInput]]]:
        yield "0", list(ITEMS[:2])
        await asyncio.sleep(0.05)
        raise OSError("the input file went away")

    got: list[str] = []
    try:
        async for batch_id, _ in client.verify_batch_columns(breaking()):
            got.append(batch_id)
    except OSError as exc:
        assert "the input file went away" in str(exc)
    else:
        raise AssertionError("the source's error was lost")
    try:
        async for _ in client.verify_stream(iter([ITEMS[0], (0, 9, {1, 2})])):  # a set is not JSON
            pass
    except TypeError:
        pass
    else:
        raise AssertionError("the encoding error was lost")
