"""The metrics of one server in-process: unary Verify counted by outcome, a made-up method
name never becomes a label (its calls count as "unknown"), refused calls are counted with
their code; the job server's /metrics holds its RPCs beside the job states."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import grpc
import pytest

from _observability_helpers import need
from gym_metrics import ResourcesClient
from gym_metrics.testing import serve_environment

SECRET = "tok-never-in-a-label"
BODY = {
    "responses_create_params": {"input": [{"role": "user", "content": "What is 2 + 2? ROWTEXT"}]},
    "response": {"output": [{"type": "message", "role": "assistant",
                             "content": [{"type": "output_text", "text": "\\boxed{4}"}]}]},
    "expected_answer": "4",
}  # fmt: skip


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


async def _scrape_until(port: int, line: str, timeout_s: float = 5.0) -> str:
    """The metrics page once it holds `line` (or at `timeout_s`): a refused call is counted when
    its handler ends, just after its status went to the client."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        text = await asyncio.to_thread(_scrape, port)
        if line in text or asyncio.get_running_loop().time() > deadline:
            return text
        await asyncio.sleep(0.02)


async def test_unary_verify_unknown_methods_and_refusals(tmp_path: Path) -> None:
    need("prometheus_client")
    async with serve_environment("math_exact", prometheus_port=0, auth_token=SECRET) as server:
        assert server.metrics_port
        async with ResourcesClient(server.address, token=SECRET) as client:
            assert (await client.verify(BODY))["reward"] == 1.0
        async with grpc.aio.insecure_channel(server.address) as channel:
            made_up = channel.unary_unary(f"/evil.Service/{SECRET}-ROWTEXT")
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await made_up(b"", metadata=(("authorization", f"Bearer {SECRET}"),))
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
            verify = channel.unary_unary("/gym_metrics.v1.ResourcesService/Verify")
            with pytest.raises(grpc.aio.AioRpcError) as no_token:
                await verify(b"")
            assert no_token.value.code() == grpc.StatusCode.UNAUTHENTICATED
        verify_path = "/gym_metrics.v1.ResourcesService/Verify"
        refused_line = f'gym_metrics_rpcs_total{{code="UNAUTHENTICATED",method="{verify_path}"}} 1.0'
        text = await _scrape_until(server.metrics_port, refused_line)
    assert f'gym_metrics_rpcs_total{{code="OK",method="{verify_path}"}} 1.0' in text
    assert refused_line in text
    assert 'gym_metrics_rollouts_verified_total{environment="math_exact"} 1.0' in text
    assert SECRET not in text and "ROWTEXT" not in text and "evil" not in text


async def test_calls_to_unknown_methods_count_as_unknown() -> None:
    """Every made-up path, unary or streaming, is answered UNIMPLEMENTED and counted under one
    label value, "unknown" (docs/exporters.md), whatever the paths: bounded label values."""
    need("prometheus_client")
    async with serve_environment("math_exact", prometheus_port=0) as server:
        assert server.metrics_port
        async with grpc.aio.insecure_channel(server.address) as channel:
            for i in range(3):
                with pytest.raises(grpc.aio.AioRpcError) as unknown:
                    await channel.unary_unary(f"/bogus.Service/Method{i}-ROWTEXT")(b"", timeout=10)
                assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
            stream = channel.stream_stream("/bogus.Service/Stream")(timeout=10)  # sends nothing, never half-closes
            with pytest.raises(grpc.aio.AioRpcError) as streaming:
                await stream.read()
            assert streaming.value.code() == grpc.StatusCode.UNIMPLEMENTED
        text = await asyncio.to_thread(_scrape, server.metrics_port)
    assert 'gym_metrics_rpcs_total{code="UNIMPLEMENTED",method="unknown"} 4.0' in text
    assert 'gym_metrics_rpc_duration_seconds_count{code="UNIMPLEMENTED",method="unknown"} 4.0' in text
    assert 'gym_metrics_rpcs_in_flight{method="unknown"} 0.0' in text
    assert "bogus" not in text and "ROWTEXT" not in text


async def test_job_server_metrics_hold_rpcs_and_job_states(tmp_path: Path) -> None:
    need("prometheus_client")
    from gym_metrics._transport.client import JobClient
    from gym_metrics._transport.jobs import JobServerOptions, start_job_server
    from gym_metrics._transport.server import ServerConfig

    config = ServerConfig(host="127.0.0.1", port=0, log_requests=False)
    running = await start_job_server(config, JobServerOptions(db=tmp_path / "jobs.sqlite", prometheus_port=0))
    try:

        def list_jobs() -> None:
            with JobClient(running.address) as client:
                client.list()

        await asyncio.to_thread(list_jobs)
        assert running.metrics_port is not None
        text = await asyncio.to_thread(_scrape, running.metrics_port)
    finally:
        await running.stop(0)
    assert 'gym_metrics_jobs{state="QUEUED"} 0.0' in text
    assert 'gym_metrics_rpcs_total{code="OK",method="/gym_metrics.v1.JobService/ListJobs"} 1.0' in text


def test_serve_without_prometheus_client_exits_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from gym_metrics.cli import main

    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if the extra were not installed
    assert main(["serve", "math_exact", "--port", "0", "--prometheus-port", "0"]) == 2
    assert "pip install 'gym-metrics[prometheus]'" in capsys.readouterr().err
