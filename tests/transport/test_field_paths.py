"""One rule for BadRequest field paths on every RPC (docs/grpc.md#errors): from the request
message's top, proto field names joined by dots, `[i]` for a position, `request[N]` for the
N-th message of a stream, and inside JSON text (`*_json`) the document's own keys and
positions. Each case is a real call to a real server."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from gym_metrics.testing import serve_environment
from gym_metrics.v1 import jobs_pb2, jobs_pb2_grpc
from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc as pbg

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parents[1] / "jobs"))
from _service_helpers import JobServerThread  # noqa: E402
from _tool_envs import Counter  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def paths(exc: grpc.RpcError) -> list[str]:
    assert exc.code() is grpc.StatusCode.INVALID_ARGUMENT, exc  # type: ignore[attr-defined]
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    assert status is not None
    bad = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad)
    return [v.field for v in bad.field_violations]


async def test_resources_service_paths() -> None:
    async with serve_environment("math_exact") as server, grpc.aio.insecure_channel(server.address) as channel:
        stub = pbg.ResourcesServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as verify:
            await stub.Verify(pb.VerifyRequest(body_json='{"model_output": "4", "response": {"output": [1]}}'))
        assert "body_json.expected_answer" in paths(verify.value)

        async def stream(*batches: pb.RolloutBatch) -> AsyncIterator[pb.AggregateMetricsRequest]:
            yield pb.AggregateMetricsRequest(header=pb.AggregateMetricsHeader(agent_ref=pb.AgentRef(name="a"), expected_task_indices=[0, -3]))
            for batch in batches:
                yield pb.AggregateMetricsRequest(batch=batch)

        with pytest.raises(grpc.aio.AioRpcError) as header:
            async for _ in stub.AggregateMetrics(stream()):
                pass
        assert paths(header.value) == ["request[0].header.expected_task_indices[1]"]

        async def batches() -> AsyncIterator[pb.AggregateMetricsRequest]:
            yield pb.AggregateMetricsRequest(header=pb.AggregateMetricsHeader(agent_ref=pb.AgentRef(name="a")))
            yield pb.AggregateMetricsRequest(batch=pb.RolloutBatch(batch_id="ok", task_index=[0], rollout_index=[0], row_json=['{"reward": 1}']))
            yield pb.AggregateMetricsRequest(batch=pb.RolloutBatch(batch_id="bad", row_json=[
                '{"_ng_task_index": 0, "_ng_rollout_index": 1}', '{"_ng_task_index": "x", "_ng_rollout_index": 2}']))  # fmt: skip

        with pytest.raises(grpc.aio.AioRpcError) as row:
            async for _ in stub.AggregateMetrics(batches()):
                pass
        assert paths(row.value) == ["request[2].batch.row_json[1]._ng_task_index"]  # message 2, row 1, then inside it

    async with serve_environment(Counter()) as server, grpc.aio.insecure_channel(server.address) as channel:
        stub = pbg.ResourcesServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as seed:
            await stub.SeedSession(pb.SeedSessionRequest(body_json='{"initial_count": "many"}'))
        assert paths(seed.value) == ["body_json.initial_count"]
        session = (await stub.SeedSession(pb.SeedSessionRequest(body_json="{}"))).session_id
        with pytest.raises(grpc.aio.AioRpcError) as call:
            await stub.CallTool(pb.CallToolRequest(session_id=session, name="increment_counter", arguments_json='{"count": "x"}'))
        assert paths(call.value) == ["arguments_json.count"]


def test_job_service_paths(tmp_path: Path) -> None:
    with JobServerThread(tmp_path / "jobs.sqlite") as server, grpc.insecure_channel(server.address) as channel:
        stub = jobs_pb2_grpc.JobServiceStub(channel)

        def submit(**spec: object) -> list[str]:
            with pytest.raises(grpc.RpcError) as err:
                stub.SubmitJob(jobs_pb2.SubmitJobRequest(spec=jobs_pb2.JobSpec(**spec)), timeout=30)  # type: ignore[arg-type]
            return paths(err.value)

        rows = jobs_pb2.Dataset(rows=jobs_pb2.InlineRows(rows_json=["{}"]))
        assert submit(scorer="no_such_scorer", dataset=rows) == ["spec.scorer"]
        assert submit(scorer="tool_call_accuracy", dataset=jobs_pb2.Dataset(rows=jobs_pb2.InlineRows(rows_json=["{}", "{x"]))) == [
            "spec.dataset.rows.rows_json[1]"
        ]
        assert submit(scorer="tool_call_accuracy", dataset=rows, run=jobs_pb2.RunConfig(parallelism=-1)) == ["spec.run.parallelism"]
        assert submit(scorer="tool_call_accuracy", dataset=rows, secrets=["KNOWN_NOWHERE_A", "KNOWN_NOWHERE_B"])[:1] == ["spec.secrets[0]"]
