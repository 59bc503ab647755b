"""Bad input and limits on a real server: undecodable bytes, malformed JSON, negative indices,
and each AggregateMetrics limit refused with RESOURCE_EXHAUSTED naming its flag."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics._util.limits import CallLimits
from gym_metrics.environments import MAX_ROW_BYTES
from gym_metrics.testing import serve_environment
from gym_metrics._transport.client import ResourcesClient, is_transient
from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc

from _transport_helpers import AnswerEnv, bad_request

HEADER = pb.AggregateMetricsRequest(header=pb.AggregateMetricsHeader(agent_ref=pb.AgentRef(name="a")))


def batch(tasks: range, batch_id: str = "") -> pb.AggregateMetricsRequest:
    b = pb.RolloutBatch(batch_id=batch_id, task_index=list(tasks), rollout_index=[0] * len(tasks))
    b.columns["reward"].values.extend([1.0] * len(tasks))
    return pb.AggregateMetricsRequest(batch=b)


async def aggregate(stub: Any, messages: list[Any]) -> list[Any]:
    return [part async for part in stub.AggregateMetrics(iter(messages), timeout=30)]


@pytest.fixture
async def server(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, grpc.aio.Channel]]:
    limits = getattr(request, "param", CallLimits())
    running = await start_server(AnswerEnv(), ServerConfig(port=0, limits=limits, log_requests=False))
    channel = grpc.aio.insecure_channel(running.address)
    try:
        yield resources_pb2_grpc.ResourcesServiceStub(channel), channel
    finally:
        await channel.close()
        await running.stop(0)


@pytest.mark.parametrize("method", ["Verify", "GetServerInfo"])
async def test_undecodable_unary_request_is_invalid_argument(server: Any, method: str) -> None:
    _, channel = server
    call = channel.unary_unary(f"/gym_metrics.v1.ResourcesService/{method}")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call(b"\xff\xff\xff\x01", timeout=10)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    [(field, why)] = bad_request(err.value)
    assert field == "request" and "do not decode as gym_metrics.v1." in why


@pytest.mark.parametrize("method", ["VerifyStream", "AggregateMetrics"])
async def test_undecodable_stream_message_is_invalid_argument(server: Any, method: str) -> None:
    _, channel = server
    call = channel.stream_stream(f"/gym_metrics.v1.ResourcesService/{method}")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in call(iter([b"\xff\xff\xff\x01"]), timeout=10):
            pass
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err.value)[0][0] == "request[0]"


async def test_row_json_nested_too_deep_is_invalid_argument(server: Any) -> None:
    stub, _ = server
    deep = '{"_ng_task_index": 0, "_ng_rollout_index": 0, "x": ' + "[" * 10_000 + "]" * 10_000 + "}"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await aggregate(stub, [HEADER, pb.AggregateMetricsRequest(batch=pb.RolloutBatch(row_json=[deep]))])
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    [(field, why)] = bad_request(err.value)
    assert field.startswith("request[1].batch.row_json[0]") and "nested too deeply" in why


async def test_huge_integer_in_a_row_is_invalid_argument(server: Any) -> None:
    stub, _ = server
    row = '{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": ' + "1" * 100_000 + "}"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await aggregate(stub, [HEADER, pb.AggregateMetricsRequest(batch=pb.RolloutBatch(row_json=[row]))])
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_deep_or_huge_verify_body_is_invalid_argument(server: Any) -> None:
    stub, _ = server
    for body in ('{"answer": ' + "[" * 10_000 + "]" * 10_000 + "}", '{"answer": ' + "1" * 100_000 + "}"):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Verify(pb.VerifyRequest(body_json=body), timeout=10)
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert bad_request(err.value)[0][0] == "body_json"


async def test_a_seed_request_past_the_row_bound_is_refused_before_it_is_decoded(server: Any) -> None:
    """A 17 MB SeedSession was decoded, and its row made a str, before its size was checked:
    tens of milliseconds of the event loop, every other call waiting. It is refused from its bytes alone,
    naming body_json; a row of exactly MAX_ROW_BYTES still seeds."""
    stub, _ = server
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.SeedSession(pb.SeedSessionRequest(body_json='{"pad": "' + "x" * MAX_ROW_BYTES + '"}'), timeout=30)
    [(field, why)] = bad_request(err.value)
    assert field == "body_json" and why == f"a request of {MAX_ROW_BYTES + 16:,} bytes; a session keeps at most {MAX_ROW_BYTES:,} (MAX_ROW_BYTES)"
    row = '{"pad": "' + "x" * (MAX_ROW_BYTES - 11) + '"}'
    seeded = await stub.SeedSession(pb.SeedSessionRequest(body_json=row), timeout=30)
    assert (await stub.CloseSession(pb.CloseSessionRequest(session_id=seeded.session_id), timeout=10)).closed


async def test_negative_indices_in_verify_stream_are_invalid_argument(server: Any) -> None:
    stub, _ = server
    items = [pb.VerifyItem(task_index=0, rollout_index=-2, body_json="{}"), pb.VerifyItem(task_index=-1, body_json="{}")]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in stub.VerifyStream(iter([pb.VerifyStreamRequest(batch_id="0", items=items)]), timeout=10):
            pass
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in bad_request(err.value)] == ["request[0].items[0].rollout_index", "request[0].items[1].task_index"]


async def test_a_raising_verify_is_a_failed_rollout_not_a_failed_call(server: Any) -> None:
    stub, _ = server
    items = [pb.VerifyItem(body_json='{"answer": "boom"}'), pb.VerifyItem(task_index=1, body_json='{"answer": "a", "expected": "a"}')]
    [response] = [r async for r in stub.VerifyStream(iter([pb.VerifyStreamRequest(items=items)]), timeout=10)]
    assert [r.error_kind for r in response.results] == [pb.VERIFY_ERROR_KIND_VERIFY_FAILED, 0]
    assert response.results[1].reward == 1.0


def _exhausted(err: grpc.aio.AioRpcError, flag: str) -> None:
    assert err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, err
    assert flag in (err.details() or ""), err.details()


@pytest.mark.parametrize("server", [CallLimits(max_rollouts_per_call=1000)], indirect=True)
async def test_too_many_rollouts_are_refused_naming_the_flag(server: Any) -> None:
    stub, _ = server
    assert len(await aggregate(stub, [HEADER, batch(range(600)), batch(range(600, 1000))])) == 1  # at the limit: fine
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await aggregate(stub, [HEADER, batch(range(600)), batch(range(600, 1001))])
    _exhausted(err.value, "--max-rollouts-per-call")
    assert not is_transient(err.value)  # too big: the same call would fail again


@pytest.mark.parametrize("server", [CallLimits(max_tasks_per_call=100)], indirect=True)
async def test_too_many_tasks_are_refused_naming_the_flag(server: Any) -> None:
    stub, _ = server
    header = pb.AggregateMetricsRequest(header=pb.AggregateMetricsHeader(agent_ref=pb.AgentRef(name="a")))
    header.header.expected_task_indices.extend(range(101))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await aggregate(stub, [header])
    _exhausted(err.value, "--max-tasks-per-call")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await aggregate(stub, [HEADER, batch(range(101))])
    _exhausted(err.value, "--max-tasks-per-call")
    many_rollouts = batch(range(100)), batch(range(100))  # 200 rollouts of 100 tasks: fine
    many_rollouts[1].batch.rollout_index[:] = [1] * 100
    assert len(await aggregate(stub, [HEADER, *many_rollouts])) == 1


@pytest.mark.parametrize("server", [CallLimits(max_rows_per_batch=500)], indirect=True)
async def test_a_batch_past_the_rows_per_batch_is_refused_naming_the_flag(server: Any) -> None:
    """One batch message is decoded on the loop: its rows are bounded, not only the call's."""
    stub, _ = server
    assert len(await aggregate(stub, [HEADER, batch(range(500)), batch(range(500, 1000))])) == 1  # at the bound: fine
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await aggregate(stub, [HEADER, batch(range(501), batch_id="big")])
    _exhausted(err.value, "--max-rows-per-batch")
    assert "batch 'big' carries 501 rollouts" in (err.value.details() or "")


@pytest.mark.parametrize("server", [CallLimits(max_call_mb=1.0)], indirect=True)
async def test_too_many_bytes_are_refused_naming_the_flag(server: Any) -> None:
    stub, _ = server
    rows = pb.RolloutBatch(row_json=[f'{{"_ng_task_index": {i}, "_ng_rollout_index": 0, "pad": "{"x" * 1000}"}}' for i in range(1500)])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await aggregate(stub, [HEADER, pb.AggregateMetricsRequest(batch=rows)])
    _exhausted(err.value, "--max-call-mb")


@pytest.mark.parametrize("server", [CallLimits(max_concurrent_aggregations=1)], indirect=True)
async def test_concurrent_aggregations_past_the_limit_are_refused(server: Any) -> None:
    stub, _ = server
    release = asyncio.Event()

    async def held_open() -> AsyncIterator[pb.AggregateMetricsRequest]:
        yield HEADER
        yield batch(range(10))
        await release.wait()

    first = stub.AggregateMetrics(held_open(), timeout=30)
    first_done = asyncio.ensure_future(_drain(first))
    await asyncio.sleep(0.5)  # the first call holds the only slot
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await aggregate(stub, [HEADER, batch(range(10))])
    _exhausted(err.value, "--max-concurrent-aggregations")
    assert is_transient(err.value)  # busy: it says when to retry (RetryInfo), so clients do
    release.set()
    assert len(await first_done) == 1
    assert len(await aggregate(stub, [HEADER, batch(range(10))])) == 1  # the slot is free again


@pytest.mark.parametrize("server", [CallLimits(max_concurrent_aggregations=1)], indirect=True)
async def test_a_stalled_aggregation_is_ended_and_frees_its_place(server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that sends a header and then nothing held a place of
    --max-concurrent-aggregations for as long as its connection lived (every other client
    refused meanwhile); past AGGREGATION_IDLE_S without a message the call is ended."""
    from gym_metrics._transport.server import _servicer

    monkeypatch.setattr(_servicer, "AGGREGATION_IDLE_S", 0.5)
    stub, _ = server
    stalled = asyncio.Event()

    async def header_then_nothing() -> AsyncIterator[pb.AggregateMetricsRequest]:
        yield HEADER
        await stalled.wait()

    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _drain(stub.AggregateMetrics(header_then_nothing(), timeout=30))
    assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and "sent nothing for 0.5 s" in str(err.value.details())
    assert len(await aggregate(stub, [HEADER, batch(range(10))])) == 1  # its place is free
    stalled.set()


async def _drain(call: Any) -> list[Any]:
    return [part async for part in call]


async def test_rows_sent_as_json_count_their_non_numeric_values(server: Any) -> None:
    stub, _ = server
    rows = [
        '{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}',
        '{"_ng_task_index": 0, "_ng_rollout_index": 1, "reward": "1.0"}',
        '{"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": [1]}',
    ]
    for batch_ in (pb.RolloutBatch(row_json=rows), pb.RolloutBatch(row_json=rows, task_index=[0, 0, 1], rollout_index=[0, 1, 0])):
        [part] = await aggregate(stub, [HEADER, pb.AggregateMetricsRequest(batch=batch_)])
        assert dict(part.metrics.non_numeric_counts) == {"reward": 2}
        assert json.loads(part.metrics.agent_metrics_json)["mean/reward"] == 1.0


@pytest.mark.parametrize("server", [CallLimits(max_concurrent_aggregations=1)], indirect=True)
async def test_the_client_waits_for_a_busy_server_instead_of_failing(server: Any, tmp_path: Any) -> None:
    from gym_metrics.collector import CollectOptions, collect_async

    stub, channel = server
    release = asyncio.Event()

    async def held_open() -> AsyncIterator[pb.AggregateMetricsRequest]:
        yield HEADER
        await release.wait()

    busy = asyncio.ensure_future(_drain(stub.AggregateMetrics(held_open(), timeout=30)))
    await asyncio.sleep(0.3)
    asyncio.get_running_loop().call_later(1.5, release.set)  # the slot frees while collect retries
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, "answer": "x", "expected": "x"}) + "\n" for _ in range(3)))
    client = ResourcesClient(channel)
    result = await collect_async(client, src, tmp_path / "out.jsonl", CollectOptions())
    assert [a.agent_metrics["mean/reward"] for a in result.aggregates] == [1.0]
    assert len(await busy) == 1


async def test_grpc_options_replace_the_servers_own() -> None:
    options = [("grpc.max_receive_message_length", 4096)]
    async with serve_environment(AnswerEnv(), grpc_options=options) as running:
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = resources_pb2_grpc.ResourcesServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Verify(pb.VerifyRequest(body_json='{"answer": "' + "x" * 10_000 + '"}'), timeout=10)
    assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
