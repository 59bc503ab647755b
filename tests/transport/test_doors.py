"""The doors other than gRPC hold as gRPC does. One auth token, every door (issue 36, item 1): a server started with a token refuses a
request without it at gRPC, at the HTTP reward endpoint and at MCP alike (initialize,
tools/list, seed, verify, and a tool call inside a token-holder's gRPC session), and lets the
token's holder through each."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from gym_metrics import ResourcesClient
from gym_metrics.testing import serve_environment

sys.path.insert(0, str(Path(__file__).parents[1]))
import _ci  # noqa: E402
from _tool_envs import Counter  # noqa: E402

_ci.need_module("mcp", "pip install 'gym-metrics[mcp]'")
import httpx2  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

pytestmark = pytest.mark.timeout(60)
TOKEN = "door-token-5c1e"
BODY = {"responses_create_params": {"input": "count"}, "response": {"output": []}, "expected_count": 1}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}  # fmt: skip


def mcp_calls(session: str) -> list[dict[str, Any]]:
    """What an MCP client without the token tries, one JSON-RPC request each."""
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    return [
        INITIALIZE,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {**call, "params": {"name": "gym_metrics_seed_session", "arguments": {"row": {}}}},
        {**call, "params": {"name": "gym_metrics_verify", "arguments": {"body": BODY}, "_meta": {"gym-metrics/session": session}}},
        {**call, "params": {"name": "increment_counter", "arguments": {"count": 1}, "_meta": {"gym-metrics/session": session}}},
    ]


async def test_every_door_refuses_a_request_without_the_token() -> None:
    async with serve_environment(Counter(), auth_token=TOKEN, mcp_port=0, http_port=0) as server:
        async with ResourcesClient(server.address, token=TOKEN) as holder:
            session = await holder.seed_session({})  # a token-holder's episode: nobody else may touch it
        channel = grpc.aio.insecure_channel(server.address)
        try:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await channel.unary_unary("/gym_metrics.v1.ResourcesService/GetServerInfo")(b"")
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        finally:
            await channel.close()
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        async with httpx.AsyncClient() as http:
            reward = await http.post(f"http://127.0.0.1:{server.http_port}/get_reward", json={"query": ["x"], "prompts": ["x"]})
            assert reward.status_code == 401
            for wrong in ({}, {"authorization": "Bearer not-it"}):
                for request in mcp_calls(session):
                    answer = await http.post(f"http://127.0.0.1:{server.mcp_port}/mcp", json=request, headers={**headers, **wrong})
                    assert answer.status_code == 401, (request["method"], answer.text)
                    assert answer.json() == {"error": "missing or wrong bearer token"}
        assert len(server.handler.sessions.store) == 1  # nothing seeded, nothing verified, nothing counted
        assert server.handler.sessions.store.get(session).state.get("count", 0) == 0


async def test_the_token_holder_gets_through_every_door() -> None:
    async with serve_environment(Counter(), auth_token=TOKEN, mcp_port=0, http_port=0) as server:
        async with ResourcesClient(server.address, token=TOKEN) as holder:
            session = await holder.seed_session({})
        auth = {"authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=auth) as http, Client(
            streamable_http_client(f"http://127.0.0.1:{server.mcp_port}/mcp", http_client=http)
        ) as client:
            await client.call_tool("increment_counter", {"count": 1}, meta={"gym-metrics/session": session})
            verified = await client.call_tool("gym_metrics_verify", {"body": BODY}, meta={"gym-metrics/session": session})
            assert json.loads(str(verified.content[0].text))["reward"] == 1.0
        async with httpx.AsyncClient(headers=auth) as plain:
            health = await plain.get(f"http://127.0.0.1:{server.http_port}/health")
            assert health.status_code == 200


async def test_a_web_page_cannot_drive_a_loopback_server_without_a_token() -> None:
    """A page on any site can make the user's browser POST to 127.0.0.1 (a form or text/plain
    body needs no CORS preflight) or to a name rebound to it: the loopback HTTP door refuses a
    non-JSON body, a Host that is not loopback and another site's Origin (issue 36, item 3)."""
    async with serve_environment("math_exact", http_port=0) as server:
        url = f"http://127.0.0.1:{server.http_port}/get_reward"
        body = json.dumps({"query": ["2+2"], "prompts": ["2+2"], "labels": ["4"]})
        async with httpx.AsyncClient() as http:
            plain = await http.post(url, content=body, headers={"content-type": "text/plain"})
            assert plain.status_code == 415 and "application/json" in plain.json()["error"]
            rebound = await http.post(url, content=body, headers={"content-type": "application/json", "host": "evil.example:80"})
            assert rebound.status_code == 403 and "evil.example" in rebound.json()["error"]
            cross = await http.post(url, content=body, headers={"content-type": "application/json", "origin": "https://evil.example"})
            assert cross.status_code == 403 and "Origin" in cross.json()["error"]
            local = await http.post(url, content=body, headers={"content-type": "application/json", "origin": "http://localhost:3000"})
            assert local.status_code == 200 and len(local.json()["rewards"]) == 1  # scored


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
async def test_a_web_page_cannot_drive_the_loopback_mcp_door_either(host: str) -> None:
    """The MCP door gets the same guards as the reward door, on any loopback address (the MCP
    SDK's own rebinding check knows 127.0.0.1, localhost and ::1: on 127.0.0.2 a rebound page's
    initialize and tool calls ran)."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with serve_environment("math_exact", host=host, mcp_port=0) as server, httpx.AsyncClient() as http:
        url = f"http://{host}:{server.mcp_port}/mcp"
        plain = await http.post(url, json=INITIALIZE, headers={**headers, "content-type": "text/plain"})
        rebound = await http.post(url, json=INITIALIZE, headers={**headers, "host": "evil.example"})
        cross = await http.post(url, json=INITIALIZE, headers={**headers, "origin": "https://evil.example"})
        same = await http.post(url, json=INITIALIZE, headers={**headers, "origin": f"http://{host}:{server.mcp_port}"})
    assert (plain.status_code, rebound.status_code, cross.status_code) == (400, 403, 403)
    assert "Content-Type" in plain.text and "Host" in rebound.text and "Origin" in cross.text
    assert same.status_code == 200 and same.json()["result"]["serverInfo"]["name"].startswith("gym-metrics")
