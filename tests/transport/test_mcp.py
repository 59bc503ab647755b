"""The environment's tools over MCP (`serve --mcp-port`), driven by the official MCP client: a
stateful (legacy) connection is its own session; the stateless protocol names a seeded session
in `_meta`; errors come back as MCP errors or `isError` results the model reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient, tool
from gym_metrics.testing import serve_environment

sys.path.insert(0, str(Path(__file__).parents[1]))
import _ci  # noqa: E402
from _tool_envs import Counter  # noqa: E402

_ci.need_module("mcp", "pip install 'gym-metrics[mcp]'")
from mcp.client import Client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

pytestmark = pytest.mark.timeout(60)
BODY = {"responses_create_params": {"input": "count"}, "response": {"output": []}, "expected_count": 5}


def text(result: Any) -> str:
    return str(result.content[0].text)


async def test_a_stateful_mcp_connection_is_one_session() -> None:
    async with serve_environment(Counter(), mcp_port=0) as server:
        url = f"http://127.0.0.1:{server.mcp_port}/mcp"
        async with Client(url, mode="legacy") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["increment_counter", "get_counter_value", "explode", "gym_metrics_seed_session", "gym_metrics_verify"]
            await client.call_tool("gym_metrics_seed_session", {"row": {"initial_count": 2}})
            await client.call_tool("increment_counter", {"count": 3})
            assert json.loads(text(await client.call_tool("get_counter_value", {}))) == {"count": 5}
            broke = await client.call_tool("explode", {})
            assert broke.is_error and "RuntimeError: the tool broke" in text(broke)
            bad = await client.call_tool("increment_counter", {"count": "x"})
            assert bad.is_error and "arguments.count" in text(bad)
            verified = json.loads(text(await client.call_tool("gym_metrics_verify", {"body": BODY})))
            assert verified["reward"] == 1.0 and verified["response"]["final_count"] == 5
        async with Client(url, mode="legacy") as other:  # a new connection starts from its own session
            assert json.loads(text(await other.call_tool("get_counter_value", {}))) == {"count": 0}
        assert len(server.handler.sessions.store) == 0  # the verified one is gone; the other's client ended its MCP session (DELETE)


async def test_a_client_that_ends_its_mcp_session_frees_its_place() -> None:
    """Stateful clients that came and went (the SDK's client DELETEs its MCP session on exit)
    left their gym-metrics sessions open until the idle TTL: with --max-sessions 3, three of
    them locked out a fourth."""
    async with serve_environment(Counter(), mcp_port=0, max_sessions=3) as server:
        url = f"http://127.0.0.1:{server.mcp_port}/mcp"
        for n in range(4):
            async with Client(url, mode="legacy") as client:
                await client.call_tool("gym_metrics_seed_session", {"row": {"initial_count": n}})
                assert json.loads(text(await client.call_tool("get_counter_value", {}))) == {"count": n}
        assert len(server.handler.sessions.store) == 0


async def test_a_session_named_in_meta_wins_over_the_connections_own() -> None:
    """A stateful connection with a session of its own whose calls also name another in `_meta`
    (issue 36, item 7): the named one is used, seeding or verifying it leaves the connection's
    own as it was, and a call without `_meta` is back in the connection's."""
    async with serve_environment(Counter(), mcp_port=0) as server:
        url = f"http://127.0.0.1:{server.mcp_port}/mcp"
        async with ResourcesClient(server.address) as grpc_client, Client(url, mode="legacy") as client:
            await client.call_tool("gym_metrics_seed_session", {"row": {"initial_count": 1}})  # the connection's
            named: Any = {"gym-metrics/session": await grpc_client.seed_session({"initial_count": 100})}
            await client.call_tool("increment_counter", {"count": 4}, meta=named)
            assert json.loads(text(await client.call_tool("get_counter_value", {}, meta=named))) == {"count": 104}
            assert json.loads(text(await client.call_tool("get_counter_value", {}))) == {"count": 1}
            seeded = json.loads(text(await client.call_tool("gym_metrics_seed_session", {"row": {"initial_count": 7}}, meta=named)))
            assert seeded["session_id"] != named["gym-metrics/session"]
            verified = json.loads(text(await client.call_tool("gym_metrics_verify", {"body": {**BODY, "expected_count": 104}}, meta=named)))
            assert verified["reward"] == 1.0
            assert json.loads(text(await client.call_tool("get_counter_value", {}))) == {"count": 1}  # untouched throughout


async def test_the_stateless_protocol_names_its_session_in_meta() -> None:
    async with serve_environment(Counter(), mcp_port=0) as server:
        url = f"http://127.0.0.1:{server.mcp_port}/mcp"
        async with ResourcesClient(server.address) as grpc_client, Client(url) as client:
            session = await grpc_client.seed_session({"initial_count": 4})  # seeded over gRPC, used over MCP
            meta: Any = {"gym-metrics/session": session}
            await client.call_tool("increment_counter", {"count": 1}, meta=meta)
            assert json.loads(text(await client.call_tool("get_counter_value", {}, meta=meta))) == {"count": 5}
            assert (await grpc_client.verify(BODY, session_id=session))["reward"] == 1.0
            with pytest.raises(MCPError, match="no live session"):
                await client.call_tool("get_counter_value", {}, meta=meta)
            with pytest.raises(MCPError, match="no session: call gym_metrics_seed_session"):
                await client.call_tool("get_counter_value", {})
            fresh: Any = {"gym-metrics/session": await grpc_client.seed_session({})}
            with pytest.raises(MCPError, match="no tool 'nope'"):
                await client.call_tool("nope", {}, meta=fresh)


async def test_abandoned_connections_do_not_pile_up() -> None:
    """Each stateful connection maps to its session; connections abandoned (their sessions
    closed idle) are pruned once the map holds as many as the server's sessions (issue 36)."""
    from types import SimpleNamespace

    from gym_metrics._transport.server._mcp import McpTools
    from gym_metrics.environments import Sessions, SessionStore

    now = [0.0]
    env = Counter()
    sessions = Sessions(env, SessionStore(max_sessions=3, idle_ttl_s=10.0, clock=lambda: now[0]))
    tools = McpTools(SimpleNamespace(sessions=sessions, env=env))  # type: ignore[arg-type]
    for i in range(50):  # 50 connections, each used once and abandoned
        ctx = SimpleNamespace(request=SimpleNamespace(headers={"mcp-session-id": f"c{i}"}, client=SimpleNamespace(host="127.0.0.1")))
        result = await tools.call_tool(ctx, SimpleNamespace(name="increment_counter", arguments={"count": 1}))
        assert not result.is_error
        now[0] += 11.0  # idle past the TTL: the next seed's sweep closes it
        assert len(tools._by_connection) <= 3
    await sessions.aclose()


class Sleepy(Counter):
    """A counter with a slow tool that says whether it finished or was cancelled."""

    ended: list[str] = []

    @tool
    async def wait_a_while(self) -> str:
        """Sleeps five seconds."""
        import asyncio

        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            Sleepy.ended.append("cancelled")
            raise
        Sleepy.ended.append("finished")
        return "done"


async def test_a_client_that_goes_away_mid_call_cancels_its_tool() -> None:
    """With JSON answers the SDK awaited the tool whatever the client did: a client that gave up
    after 1 s left a 6 s tool running to its end."""
    import asyncio

    import httpx

    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    Sleepy.ended.clear()
    async with serve_environment(Sleepy(), mcp_port=0) as server:
        url = f"http://127.0.0.1:{server.mcp_port}/mcp"
        async with httpx.AsyncClient() as http:
            opened = await http.post(url, json=initialize, headers=headers)
            session = {**headers, "mcp-protocol-version": "2025-06-18", "mcp-session-id": opened.headers["mcp-session-id"]}
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "wait_a_while", "arguments": {}}}
            with pytest.raises(httpx.TimeoutException):
                await http.post(url, json=call, headers=session, timeout=1.0)
        for _ in range(60):
            if Sleepy.ended:
                break
            await asyncio.sleep(0.1)
    assert Sleepy.ended == ["cancelled"]
