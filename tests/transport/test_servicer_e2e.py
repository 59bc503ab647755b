"""One end-to-end test per RPC over a real grpc.aio channel, and the streaming-equals-offline test."""

from __future__ import annotations

import asyncio
import io
import json
import time
from pathlib import Path
from typing import Any

import grpc.aio
import numpy as np
import orjson
import pytest

from gym_metrics._transport.client import ResourcesClient
from gym_metrics._transport._batches import columns_to_batches
from gym_metrics._transport._convert import metrics_to_aggregate
from gym_metrics.aggregate import AgentAggregate, aggregate_file, perf_sections
from gym_metrics.rollouts import perf_blocks, read_rollouts
from gym_metrics.aggregate.render._output import write_json
from gym_metrics.models import BaseVerifyResponse
from gym_metrics.environments import SimpleResourcesServer
from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc

from _transport_helpers import AnswerEnv, AnswerRequest, aggregate_call

DATA = Path(__file__).parents[1] / "data"
ROLLOUT_FILES = sorted((DATA / "nemo_gym").glob("*.jsonl")) + sorted((DATA / "nemo_gym_extra").glob("*.jsonl"))


def _json(aggs: list[AgentAggregate], extra: Any = None) -> bytes:
    buf = io.BytesIO()
    write_json(buf, aggs, extra)
    return buf.getvalue()


async def test_verify(grpc_server: tuple[int, grpc.aio.Channel]) -> None:
    port, channel = grpc_server
    stub = resources_pb2_grpc.ResourcesServiceStub(channel)
    response = await stub.Verify(pb.VerifyRequest(body_json='{"answer": "4", "expected": "4"}'))
    assert response.reward == 1.0
    assert orjson.loads(response.response_json) == {"reward": 1.0, "mask_sample": False, "answer_len": 1}
    async with ResourcesClient(f"127.0.0.1:{port}") as client:  # the client over its own channel
        assert (await client.verify({"answer": "3", "expected": "4"}))["reward"] == 0.0


async def test_verify_stream(grpc_server: tuple[int, grpc.aio.Channel], resources_env: AnswerEnv) -> None:
    _, channel = grpc_server
    stub = resources_pb2_grpc.ResourcesServiceStub(channel)

    def batch(batch_id: str, answers: list[str]) -> pb.VerifyStreamRequest:
        return pb.VerifyStreamRequest(
            batch_id=batch_id,
            items=[
                pb.VerifyItem(task_index=i, rollout_index=7, body_json=orjson.dumps({"answer": a, "expected": "x"}).decode())
                for i, a in enumerate(answers)
            ],
        )

    requests = [
        batch("a", ["x", "y", "boom"]),
        pb.VerifyStreamRequest(batch_id="b", items=[pb.VerifyItem(task_index=9, rollout_index=1, body_json='{"answer": 5}')]),
        batch("a", ["x", "y", "boom"]),  # a retried batch: answered from the cache
    ]
    responses = [r async for r in stub.VerifyStream(iter(requests))]
    assert [r.batch_id for r in responses] == ["a", "b", "a"]
    first = responses[0].results
    assert [(r.task_index, r.rollout_index, r.reward) for r in first] == [(0, 7, 1.0), (1, 7, 0.0), (2, 7, 0.0)]
    assert [r.error_kind for r in first] == [0, 0, pb.VERIFY_ERROR_KIND_VERIFY_FAILED]
    assert first[2].error_message == "verify raised ValueError: boom in verify" and first[2].response_json == ""
    assert orjson.loads(first[0].response_json)["answer_len"] == 1
    invalid = responses[1].results[0]
    assert (invalid.task_index, invalid.error_kind) == (9, pb.VERIFY_ERROR_KIND_INVALID_REQUEST)
    assert "body_json.answer" in invalid.error_message and "row" not in invalid.error_message  # the item is the key
    assert responses[2] == responses[0]
    assert resources_env.calls == 3  # "boom" counts; the retried batch did not verify again


async def test_verify_stream_client_keeps_order_and_runs_concurrently(serve_env: Any) -> None:
    class SlowEnv(SimpleResourcesServer):
        def __init__(self) -> None:
            self.running = self.peak = 0

        async def verify(self, body: AnswerRequest) -> BaseVerifyResponse:
            self.running += 1
            self.peak = max(self.peak, self.running)
            await asyncio.sleep(0.01 * (int(body.answer) % 3))
            self.running -= 1
            return BaseVerifyResponse(reward=float(body.answer))

    env = SlowEnv()
    _, channel = await serve_env(env, max_concurrent_verifies=8)
    client = ResourcesClient(channel)
    items = [(i, 0, {"answer": str(i)}) for i in range(40)]
    outcomes = [o async for o in client.verify_stream(items, batch_size=16)]
    assert [o.task_index for o in outcomes] == list(range(40))
    assert [o.reward for o in outcomes] == [float(i) for i in range(40)]
    assert all(o.error_kind is None and o.response is not None for o in outcomes)
    assert 1 < env.peak <= 8


async def test_one_huge_batch_keeps_a_bounded_number_of_rollouts_started(serve_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch's rollouts whose verify suspends are started at most STARTED_PER_BATCH at a time
    (a Task each, waiting for a slot): a batch of 100,000 was 100,000 Tasks at once. Every
    rollout is still answered, and at most max_concurrent_verifies verify at once."""
    from gym_metrics.environments import _handler

    monkeypatch.setattr(_handler, "STARTED_PER_BATCH", 40)

    class Yielding(SimpleResourcesServer):
        peak_tasks = running = peak = 0

        async def verify(self, body: AnswerRequest) -> BaseVerifyResponse:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.peak_tasks = max(self.peak_tasks, len(asyncio.all_tasks()))
            await asyncio.sleep(0)
            self.running -= 1
            return BaseVerifyResponse(reward=1.0)

    env = Yielding()
    _, channel = await serve_env(env, max_concurrent_verifies=4)
    items = [(i, 0, {"answer": "1"}) for i in range(600)]
    outcomes = [o async for o in ResourcesClient(channel).verify_stream(items, batch_size=600)]
    assert len(outcomes) == 600 and all(o.reward == 1.0 for o in outcomes)
    assert env.peak == 4 and env.peak_tasks <= 40 + 30, env.peak_tasks  # (30: the server's and the test's own tasks)


async def test_an_answer_each_batch_of_quick_verifies_comes_as_one_message(serve_env: Any) -> None:
    """A batch whose verifies never wait is answered whole, as one message, even with fewer
    verify slots than rollouts: its rollouts started a slot at a time (Python 3.11, a Task
    each), and the answer went out in 10 positioned pieces, each result copied."""
    _, channel = await serve_env(AnswerEnv(), max_concurrent_verifies=4)
    request = pb.VerifyStreamRequest(batch_id="b", answer_each=True)
    for i in range(40):
        request.items.add(task_index=i, body_json=json.dumps({"answer": "1"}))
    answers = [m async for m in resources_pb2_grpc.ResourcesServiceStub(channel).VerifyStream(iter([request]))]
    assert [(len(m.results), list(m.positions), m.more) for m in answers] == [(40, [], False)]


async def test_the_server_info_is_read_off_the_event_loop(serve_env: Any) -> None:
    """GetServerInfo read the environment's info on the event loop: a ported NeMo Gym
    environment's schemas took 100-270 ms each time, every other call waiting. It is read in a
    thread (on every call: an environment may answer differently over time)."""

    class SlowInfo(AnswerEnv):
        reads = 0

        def server_info(self) -> dict[str, Any]:
            self.reads += 1
            time.sleep(0.6)  # (a large schema's cost, stood in for)
            return super().server_info()

    env = SlowInfo()
    _, channel = await serve_env(env)
    client = ResourcesClient(channel)
    infos = asyncio.gather(*(client.server_info() for _ in range(3)))
    await asyncio.sleep(0.05)
    answer = await client.verify({"answer": "1", "expected": "1"})
    assert answer["reward"] == 1.0 and not infos.done()  # answered while the info was read
    assert len({info.name for info in await infos}) == 1 and (await client.server_info()).name == "answer_env"
    assert env.reads == 4


async def test_verify_stream_timeout(serve_env: Any) -> None:
    class Sleepy(SimpleResourcesServer):
        async def verify(self, body: AnswerRequest) -> BaseVerifyResponse:
            await asyncio.sleep(5 if body.answer == "slow" else 0)
            return BaseVerifyResponse(reward=1.0)

    _, channel = await serve_env(Sleepy(), verify_timeout_s=0.05)
    outcomes = [o async for o in ResourcesClient(channel).verify_stream([(0, 0, {"answer": "slow"}), (1, 0, {})])]
    assert [o.error_kind for o in outcomes] == ["timeout", None]
    assert outcomes[1].reward == 1.0


async def test_aggregate_metrics(grpc_server: tuple[int, grpc.aio.Channel]) -> None:
    _, channel = grpc_server
    stub = resources_pb2_grpc.ResourcesServiceStub(channel)
    cols = read_rollouts(DATA / "nemo_gym" / "worked_example.jsonl").agents["math_simple_agent"]
    batches = list(columns_to_batches(cols, 5, include_rows=True))
    header = pb.AggregateMetricsHeader(
        agent_ref=pb.AgentRef(name="math_simple_agent"),
        options=pb.AggregateOptions(),
        expected_rollouts_per_task=4,
    )
    requests = [pb.AggregateMetricsRequest(header=header)]
    requests += [pb.AggregateMetricsRequest(batch=b) for b in [*batches, batches[0]]]  # one batch retried
    response = await aggregate_call(stub, requests)
    assert response.received_rollouts == 12
    assert response.duplicate_batches == 1
    m = response.metrics
    assert m.agent_ref.name == "math_simple_agent"
    assert m.agent_metrics["mean/reward"] == 0.5
    assert round(m.agent_metrics["std/reward"], 4) == 0.5222
    assert round(m.agent_metrics["std_across_repeats/mean/reward"], 4) == 0.1925
    assert m.agent_metrics["num_repeats"] == 4.0
    assert orjson.loads(m.key_metrics_json) == {"mean/reward": 0.5}
    assert list(m.group_level_metrics.task_index) == [0, 1, 2]
    assert [round(x, 4) for x in m.group_level_metrics.stats["std/reward"].values] == [0.0, 0.0, 0.5774]
    assert list(m.group_level_metrics.missing_num_rollouts) == [0, 0, 0]
    assert len(m.group_level_metrics.rollout_infos.task_index) == 12
    assert [r.rollout_index for r in m.repeat_level_metrics] == [0, 1, 2, 3]
    assert orjson.loads(m.group_level_metrics.sample_json[0]) == {"agent_ref": {"name": "math_simple_agent"}, "reward": 1.0}


async def test_get_server_info(grpc_server: tuple[int, grpc.aio.Channel]) -> None:
    _, channel = grpc_server
    info = await ResourcesClient(channel).server_info()
    assert info.name == "answer_env"
    assert info.version
    assert info.wants_rows is False
    assert {"answer", "expected"} <= set(info.verify_request_schema["properties"])
    assert "reward" in info.verify_response_schema["properties"]


class RowsEnv(AnswerEnv):
    """compute_metrics reads full rows, so GetServerInfo says wants_rows."""

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return {
            "rows_seen": sum(len(t) for t in tasks),
            "verdicts": sorted({r.get("verdict", "") for t in tasks for r in t}),
            "per_task_metrics": [{"_ng_task_index": t[0]["_ng_task_index"], "first_rollout": t[0]["_ng_rollout_index"]} for t in tasks],
        }


async def test_aggregate_with_compute_metrics_sees_full_rows(serve_env: Any, tmp_path: Path) -> None:
    env = RowsEnv()
    _, channel = await serve_env(env)
    client = ResourcesClient(channel)
    assert (await client.server_info()).wants_rows is True
    path = DATA / "nemo_gym" / "basic.jsonl"
    cols = read_rollouts(path).agents["a"]
    streamed = await client.aggregate("a", cols, batch_size=3, order_seed=1)
    assert streamed.agent_metrics["rows_seen"] == 20
    assert streamed.agent_metrics["verdicts"] == ["bad", "ok"]
    assert streamed.groups.custom is not None and streamed.groups.custom[0] == {"first_rollout": 0}
    offline, _, _ = aggregate_file(path, tmp_path / "offline.json", compute_metrics=env.compute_metrics)
    assert _json([streamed]) == offline.read_bytes()


@pytest.mark.parametrize("path", ROLLOUT_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_streaming_equals_offline_aggregate_file(path: Path, tmp_path: Path, serve_env: Any) -> None:
    """THE transport test: any batch size, any batch order, same bytes as `aggregate_file`."""
    offline_path, _, rollouts = aggregate_file(path, tmp_path / "offline.json")
    expected = offline_path.read_bytes()
    _, channel = await serve_env(SimpleResourcesServer())
    client = ResourcesClient(channel)
    # the client adds what the rows' columns do not carry (perf_summary: from their ng_perf blocks), as collect does
    perf = perf_sections(perf_blocks(rollouts), {name: len(cols) for name, cols in rollouts.agents.items()})
    for batch_size, seed in ((1, 0), (3, 1), (7, 2), (1000, None)):
        streamed = [
            await client.aggregate(name, cols, batch_size=batch_size, order_seed=seed) for name, cols in rollouts.agents.items()
        ]
        assert [a.received_rollouts for a in streamed] == [len(c) for c in rollouts.agents.values()]
        assert _json(streamed, perf) == expected, f"batch_size={batch_size}"


@pytest.mark.parametrize("name", ["basic", "usage", "masked", "multi_agent"])
async def test_rows_only_batches_equal_offline(name: str, tmp_path: Path, serve_env: Any) -> None:
    """Batches of row_json alone (the server derives keys and numeric columns) give the same bytes."""
    await _rows_only_equal_offline(DATA / "nemo_gym" / f"{name}.jsonl", tmp_path, serve_env)


async def test_rows_nested_700_deep_or_holding_a_400_digit_integer_equal_offline(tmp_path: Path, serve_env: Any) -> None:
    """Both are rows the readers take (to 1,024 levels; 4,300 digits): the call accepted every
    batch, then failed INTERNAL writing the sample (past Python's recursion limit) or turning
    the integer into a float; the file gave an internal error for the integer too."""
    deep: Any = "leaf"
    for _ in range(700):
        deep = [deep]
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float(r), "size": t + r} for t in range(3) for r in range(2)]
    rows[0] |= {"deep": deep, "size": 10**400}
    path = tmp_path / "edge.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    await _rows_only_equal_offline(path, tmp_path, serve_env)
    assert '"deep":[[[[' in (tmp_path / "offline.json").read_text()


async def _rows_only_equal_offline(path: Path, tmp_path: Path, serve_env: Any) -> None:
    offline_path, _, rollouts = aggregate_file(path, tmp_path / "offline.json")
    _, channel = await serve_env(SimpleResourcesServer())
    stub = resources_pb2_grpc.ResourcesServiceStub(channel)
    streamed = []
    for agent, cols in rollouts.agents.items():
        requests = [
            pb.AggregateMetricsRequest(
                header=pb.AggregateMetricsHeader(
                    agent_ref=pb.AgentRef(name=agent), options=pb.AggregateOptions()
                )
            )
        ]
        for b in columns_to_batches(cols, 4, include_rows=True):
            requests.append(pb.AggregateMetricsRequest(batch=pb.RolloutBatch(batch_id=b.batch_id, row_json=b.row_json)))
        response = await aggregate_call(stub, requests)
        streamed.append(metrics_to_aggregate(response.metrics))
    assert _json(streamed) == offline_path.read_bytes()


@pytest.mark.parametrize("as_zero", [False, True])
async def test_failed_rollouts_and_sample_only_rows_equal_offline(as_zero: bool, tmp_path: Path, serve_env: Any) -> None:
    """Rows marked `_gm_error` travel as error_kind; sending only each task's first row (the
    sample) gives the same bytes as the offline file."""
    rows = [orjson.loads(line) for line in (DATA / "nemo_gym" / "basic.jsonl").read_bytes().splitlines()]
    for i in (1, 4, 5, 6, 7):  # task 1 loses every rollout
        rows[i].pop("reward")
        rows[i]["_gm_error"] = {"kind": "timeout" if i == 5 else "verify_failed", "message": "x"}
    path = tmp_path / "failed.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    from gym_metrics.aggregate import AggregateOptions

    offline_path, _, rollouts = aggregate_file(
        path, tmp_path / "offline.json", options=AggregateOptions(count_errors_as_zero=as_zero)
    )
    _, channel = await serve_env(SimpleResourcesServer())
    client = ResourcesClient(channel)
    cols = rollouts.agents["a"]
    firsts = np.flatnonzero(np.r_[True, cols.task_index[1:] != cols.task_index[:-1]])
    streamed = await client.aggregate("a", cols, batch_size=3, order_seed=4, row_positions=firsts,
                                      count_errors_as_zero=as_zero)
    assert streamed.agent_metrics["errors/total"] == 5 and streamed.agent_metrics["errors/timeout"] == 1
    assert _json([streamed]) == offline_path.read_bytes()


@pytest.mark.parametrize("name", ["large_random", "masked_rows", "nan_and_missing"])
async def test_answer_in_many_parts_equals_offline(name: str, tmp_path: Path, serve_env: Any) -> None:
    """Per-task metrics grow with the data, so the answer is streamed in size-bounded parts;
    reassembled, they give the offline bytes."""
    path = DATA / "nemo_gym_extra" / f"{name}.jsonl"
    offline_path, _, rollouts = aggregate_file(path, tmp_path / "offline.json")
    _, channel = await serve_env(SimpleResourcesServer(), max_response_part_bytes=400)
    stub = resources_pb2_grpc.ResourcesServiceStub(channel)
    client = ResourcesClient(channel)
    streamed = []
    for agent, cols in rollouts.agents.items():
        streamed.append(await client.aggregate(agent, cols, batch_size=50))
        header = pb.AggregateMetricsRequest(header=pb.AggregateMetricsHeader(agent_ref=pb.AgentRef(name=agent)))
        batches = [pb.AggregateMetricsRequest(batch=b) for b in columns_to_batches(cols, 50, include_rows=True)]
        parts = [p async for p in stub.AggregateMetrics(iter([header, *batches]))]
        assert len(parts) > 1 and parts[-1].last and not any(p.last for p in parts[:-1])
        assert all(p.metrics.agent_metrics_json == "" for p in parts[1:])
    assert _json(streamed) == offline_path.read_bytes()
