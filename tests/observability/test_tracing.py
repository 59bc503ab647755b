"""OpenTelemetry: with a tracer provider configured, each RPC is a CLIENT span in the caller
and a SERVER span in the server, the server's the child of the client's (context sent in the
call's metadata). Run in a subprocess: the global tracer provider is process-wide and would
trace every later test."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from _observability_helpers import need

SCRIPT = r'''
import asyncio, json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from gym_metrics import ResourcesClient
from gym_metrics.testing import serve_environment

BODY = {"responses_create_params": {"input": [{"role": "user", "content": "2 + 2? SECRET-ROW"}]},
        "response": {"output": [{"type": "message", "role": "assistant",
                                 "content": [{"type": "output_text", "text": "\\boxed{4}"}]}]},
        "expected_answer": "4"}

async def main():
    async with serve_environment("math_exact", auth_token="tok-SECRET") as server:
        async with ResourcesClient(server.address, token="tok-SECRET") as client:
            with trace.get_tracer("test").start_as_current_span("collect"):
                await client.verify(BODY)
                assert len([o async for o in client.verify_stream([(0, 0, BODY), (0, 1, BODY)])]) == 2

asyncio.run(main())
print(json.dumps([{"name": s.name, "kind": s.kind.name, "trace": s.context.trace_id, "id": s.context.span_id,
                   "parent": s.parent.span_id if s.parent else None, "attributes": dict(s.attributes or {})}
                  for s in exporter.get_finished_spans()]))
'''


@pytest.mark.slow
def test_a_span_per_rpc_with_the_client_context_propagated() -> None:
    need("opentelemetry.sdk")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    spans = json.loads(done.stdout.strip().splitlines()[-1])
    by_id = {s["id"]: s for s in spans}
    [root] = [s for s in spans if s["name"] == "collect"]
    servers = [s for s in spans if s["kind"] == "SERVER"]
    assert {s["attributes"]["rpc.method"] for s in servers} >= {"Verify", "VerifyStream"}
    for server in servers:
        if server["attributes"]["rpc.method"] not in ("Verify", "VerifyStream"):
            continue
        client = by_id[server["parent"]]  # the server span's parent is the caller's CLIENT span
        assert client["kind"] == "CLIENT" and client["name"] == server["name"]
        assert client["parent"] == root["id"] and server["trace"] == client["trace"] == root["trace"]
        assert server["attributes"]["rpc.grpc.status_code"] == 0
    assert "SECRET" not in done.stdout
