"""Malformed requests get the exact status code and a BadRequest naming the field and row,
and the server keeps serving afterwards."""

from __future__ import annotations

import math
from typing import Any

import grpc
import grpc.aio
import orjson
import pytest

from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.environments import SimpleResourcesServer
from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc

from _transport_helpers import aggregate_call, bad_request


class StrictRequest(BaseVerifyRequest):
    answer: str
    """Required: a body without it fails the model."""


class StrictEnv(SimpleResourcesServer):
    async def verify(self, body: StrictRequest) -> BaseVerifyResponse:
        if body.answer == "boom":
            raise ValueError("boom in verify")
        return BaseVerifyResponse(reward=float(body.answer == "42"))


@pytest.fixture
def resources_env() -> SimpleResourcesServer:
    return StrictEnv()


@pytest.fixture
def stub(grpc_server: tuple[int, grpc.aio.Channel]) -> resources_pb2_grpc.ResourcesServiceStub:
    return resources_pb2_grpc.ResourcesServiceStub(grpc_server[1])


async def _assert_still_serves(stub: resources_pb2_grpc.ResourcesServiceStub) -> None:
    response = await stub.Verify(pb.VerifyRequest(body_json='{"answer": "42"}'))
    assert response.reward == 1.0


def _header(name: str = "agent") -> pb.AggregateMetricsRequest:
    return pb.AggregateMetricsRequest(
        header=pb.AggregateMetricsHeader(agent_ref=pb.AgentRef(name=name), options=pb.AggregateOptions())
    )


def _batch(**kw: Any) -> pb.AggregateMetricsRequest:
    return pb.AggregateMetricsRequest(batch=pb.RolloutBatch(**kw))


def _ok_batch(batch_id: str, tasks: list[int], repeats: list[int]) -> pb.AggregateMetricsRequest:
    return _batch(
        batch_id=batch_id,
        task_index=tasks,
        rollout_index=repeats,
        columns={"reward": pb.NumericColumn(values=[1.0] * len(tasks))},
    )


async def _aggregate_fails(
    stub: resources_pb2_grpc.ResourcesServiceStub, requests: list[pb.AggregateMetricsRequest]
) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await aggregate_call(stub, requests)
    return info.value


async def test_stream_without_header(stub: Any) -> None:
    err = await _aggregate_fails(stub, [_ok_batch("0", [0], [0])])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("stream must start with a header")
    assert bad_request(err) == [("request[0].header", "first message holds batch")]
    await _assert_still_serves(stub)


async def test_second_header(stub: Any) -> None:
    err = await _aggregate_fails(stub, [_header(), _ok_batch("0", [0], [0]), _header()])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[2].header", "got a second header; expected a batch")]
    await _assert_still_serves(stub)


async def test_empty_stream(stub: Any) -> None:
    err = await _aggregate_fails(stub, [])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[0]", "the stream is empty: it must start with a header")]
    await _assert_still_serves(stub)


async def test_empty_agent_name(stub: Any) -> None:
    err = await _aggregate_fails(stub, [_header(""), _ok_batch("0", [0], [0])])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[0].header.agent_ref.name", "must not be empty")]
    await _assert_still_serves(stub)


async def test_columns_of_unequal_length(stub: Any) -> None:
    bad = _batch(task_index=[0, 1, 2, 3, 4, 5], rollout_index=[0, 0, 0, 0, 0])
    err = await _aggregate_fails(stub, [_header(), _ok_batch("0", [9], [0]), bad])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[2].batch.rollout_index", "has 5 values, task_index has 6")]
    assert "request[2].batch.rollout_index: has 5 values, task_index has 6" in err.details()
    await _assert_still_serves(stub)


async def test_numeric_column_of_wrong_length(stub: Any) -> None:
    bad = _batch(task_index=[0, 1], rollout_index=[0, 0], columns={"reward": pb.NumericColumn(values=[1.0, 2.0, 3.0])})
    err = await _aggregate_fails(stub, [_header(), bad])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[1].batch.columns[reward].values", "has 3 values, task_index has 2")]
    await _assert_still_serves(stub)


async def test_column_values_that_do_not_fit_their_kind(stub: Any) -> None:
    """7.0 in a BOOL column, or 1.5 in an INT one, was averaged (and shown) as given."""
    for kind, values, why in ((pb.VALUE_KIND_BOOL, [1.0, 7.0], "7.0 is not 0 or 1"), (pb.VALUE_KIND_INT, [1.5, 2.0], "1.5 is not a whole number")):
        bad = _batch(task_index=[0, 1], rollout_index=[0, 0], columns={"reward": pb.NumericColumn(values=values, kind=kind)})
        err = await _aggregate_fails(stub, [_header(), bad])
        assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
        [(field, description)] = bad_request(err)
        assert field.startswith("request[1].batch.columns[reward].values") and description.startswith(why), (field, description)
    nan_is_any_kind = _batch(task_index=[0, 1], rollout_index=[0, 0], columns={"reward": pb.NumericColumn(values=[1.0, float("nan")], kind=pb.VALUE_KIND_BOOL)})
    assert (await aggregate_call(stub, [_header(), nan_is_any_kind])).metrics.agent_ref.name
    await _assert_still_serves(stub)


async def test_duplicate_keys_within_a_batch(stub: Any) -> None:
    err = await _aggregate_fails(stub, [_header(), _ok_batch("0", [0, 1, 0], [0, 0, 0])])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [
        ("request[1].batch.task_index[2]", "duplicate key (task 0, rollout 0), also at request[1].batch.task_index[0]")
    ]
    await _assert_still_serves(stub)


async def test_duplicate_keys_across_batches(stub: Any) -> None:
    err = await _aggregate_fails(stub, [_header(), _ok_batch("a", [0, 0], [0, 1]), _ok_batch("b", [1, 0], [0, 1])])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [
        ("request[2].batch.task_index[1]", "duplicate key (task 0, rollout 1), also at request[1].batch.task_index[1]")
    ]
    assert "(task 0, rollout 1)" in err.details()
    await _assert_still_serves(stub)


async def test_duplicate_keys_are_named_by_the_message_and_field_that_sent_them(stub: Any) -> None:
    """They were named by row numbers across the whole stream (`[stream row 4]`), which a client
    had to count back to its messages, resent batches included."""
    rows = _batch(batch_id="b", row_json=['{"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 1}', '{"_ng_task_index": 0, "_ng_rollout_index": 1, "reward": 0}'])
    err = await _aggregate_fails(stub, [_header(), _ok_batch("a", [0, 0], [0, 1]), _ok_batch("a", [0, 0], [0, 1]), rows])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[3].batch.row_json[1]", "duplicate key (task 0, rollout 1), also at request[1].batch.task_index[1]")]
    await _assert_still_serves(stub)


async def test_repeated_batch_id_is_not_a_duplicate_key(stub: Any) -> None:
    response = await aggregate_call(stub, [_header(), _ok_batch("a", [0, 0], [0, 1]), _ok_batch("a", [0, 0], [0, 1])])
    assert (response.received_rollouts, response.duplicate_batches) == (2, 1)


async def test_negative_index(stub: Any) -> None:
    err = await _aggregate_fails(stub, [_header(), _ok_batch("0", [0, 0, -1], [0, 1, 0])])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[1].batch.task_index[2]", "must be >= 0, got -1")]
    assert "row 2: request[1].batch.task_index: must be >= 0, got -1" in err.details()
    await _assert_still_serves(stub)


async def test_non_integer_index_in_row_json(stub: Any) -> None:
    rows = ['{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}', '{"_ng_task_index": 1.5, "_ng_rollout_index": 0}']
    err = await _aggregate_fails(stub, [_header(), _batch(row_json=rows)])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[1].batch.row_json[1]._ng_task_index", "must be an integer, got 1.5")]
    await _assert_still_serves(stub)


async def test_row_json_not_an_object(stub: Any) -> None:
    bad = _batch(task_index=[0, 1], rollout_index=[0, 0], columns={"reward": pb.NumericColumn(values=[1, 0])}, row_json=["{}", "[]"])
    err = await _aggregate_fails(stub, [_header(), bad])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[1].batch.row_json[1]", "is not a JSON object")]
    await _assert_still_serves(stub)


async def test_masked_of_wrong_length(stub: Any) -> None:
    bad = _batch(task_index=[0, 1], rollout_index=[0, 0], masked=[True, False, True])
    err = await _aggregate_fails(stub, [_header(), bad])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[1].batch.masked", "has 3 values, task_index has 2")]
    await _assert_still_serves(stub)


async def test_missing_position_out_of_range(stub: Any) -> None:
    bad = _batch(task_index=[0, 1], rollout_index=[0, 0], columns={"reward": pb.NumericColumn(values=[1, 0], missing=[9])})
    err = await _aggregate_fails(stub, [_header(), bad])
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [("request[1].batch.columns[reward].missing", "position 9 is out of range for a batch of 2 rows")]
    await _assert_still_serves(stub)


async def test_non_finite_numbers_are_data(stub: Any) -> None:
    batch = _batch(
        task_index=[0, 0, 1, 1],
        rollout_index=[0, 1, 0, 1],
        columns={"reward": pb.NumericColumn(values=[1.0, math.nan, math.inf, -math.inf])},
    )
    response = await aggregate_call(stub, [_header(), batch])
    assert response.received_rollouts == 4
    assert dict(response.metrics.non_finite_counts) == {"reward": 3}
    assert response.metrics.agent_metrics["mean/reward"] == 1.0


async def test_verify_body_fails_the_model(stub: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Verify(pb.VerifyRequest(body_json='{"answer": 7, "other": 1}'))
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(info.value) == [("body_json.answer", "Input should be a valid string")]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Verify(pb.VerifyRequest(body_json="{}"))
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(info.value) == [("body_json.answer", "Field required")]
    assert "StrictRequest" in info.value.details()
    await _assert_still_serves(stub)


async def test_verify_body_not_json(stub: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Verify(pb.VerifyRequest(body_json="{nope"))
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in bad_request(info.value)] == ["body_json"]
    await _assert_still_serves(stub)


async def test_user_verify_raises(stub: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Verify(pb.VerifyRequest(body_json='{"answer": "boom"}'))
    assert info.value.code() is grpc.StatusCode.INTERNAL
    assert info.value.details() == "verify raised ValueError: boom in verify"
    assert "Traceback" not in info.value.details()
    await _assert_still_serves(stub)


async def test_verify_stream_item_failures_do_not_fail_the_call(stub: Any) -> None:
    items = [
        pb.VerifyItem(task_index=0, rollout_index=0, body_json='{"answer": "42"}'),
        pb.VerifyItem(task_index=0, rollout_index=1, body_json="{}"),
        pb.VerifyItem(task_index=0, rollout_index=2, body_json='{"answer": "boom"}'),
        pb.VerifyItem(task_index=0, rollout_index=3, body_json="[1]"),
    ]
    responses = [r async for r in stub.VerifyStream(iter([pb.VerifyStreamRequest(batch_id="x", items=items)]))]
    results = responses[0].results
    assert [r.error_kind for r in results] == [
        pb.VERIFY_ERROR_KIND_UNSPECIFIED,
        pb.VERIFY_ERROR_KIND_INVALID_REQUEST,
        pb.VERIFY_ERROR_KIND_VERIFY_FAILED,
        pb.VERIFY_ERROR_KIND_INVALID_REQUEST,
    ]
    assert results[1].error_message.endswith(": body_json.answer: Field required")  # no batch row: the item is the key
    assert results[2].error_message == "verify raised ValueError: boom in verify"
    assert "body_json" in results[3].error_message and "row" not in results[3].error_message
    assert results[0].reward == 1.0 and orjson.loads(results[0].response_json)["reward"] == 1.0
    await _assert_still_serves(stub)


async def test_oversized_message(serve_env: Any) -> None:
    _, channel = await serve_env(StrictEnv(), max_receive_message_length=4096)
    stub = resources_pb2_grpc.ResourcesServiceStub(channel)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Verify(pb.VerifyRequest(body_json=orjson.dumps({"answer": "x" * 10_000}).decode()))
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "4096" in (info.value.details() or "")
    await _assert_still_serves(stub)
