"""The environment's tools over the Model Context Protocol (streamable HTTP; the `mcp` extra), so
any MCP client or agent framework can drive an episode (`serve --mcp-port P`, docs/grpc.md#mcp).

Every tool call runs in a gym-metrics session, the same sessions gRPC's SeedSession opens:
- the session named by the request's `_meta["gym-metrics/session"]` (any protocol version,
  the stateless 2026-07-28 one included: seed with the `gym_metrics_seed_session` tool or with
  gRPC SeedSession, then send its id), else
- the MCP session's own (a stateful connection, `Mcp-Session-Id`): seeded on first use with
  the row given to `gym_metrics_seed_session`, or an empty row.
`gym_metrics_verify` verifies the episode in its session and ends it. A tool that raises, and
arguments that do not fit, come back as a result with `isError` (the model reads them); a
session that is gone, as an MCP error. Sessions are the server's (bounded, idle TTL).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

import orjson

from gym_metrics._transport.server._bearer import BearerGate
from gym_metrics._transport.server._uvicorn import Served, start_uvicorn
from gym_metrics.environments import EnvironmentHandler, hook
from gym_metrics.errors import GymMetricsError, InvalidInputError, NotFoundError

T = TypeVar("T")
SESSION_META = "gym-metrics/session"
"""The `_meta` key naming the session a call runs in."""
SEED, VERIFY = "gym_metrics_seed_session", "gym_metrics_verify"

_ROW_SCHEMA = {"type": "object", "properties": {"row": {"type": "object", "description": "the task row"}}}
_BODY_SCHEMA = {"type": "object", "properties": {"body": {"type": "object", "description": "the verify request body"}}, "required": ["body"]}


class McpTools:
    """The MCP handlers of one served environment (list_tools, call_tool)."""

    def __init__(self, handler: EnvironmentHandler) -> None:
        self.sessions = handler.sessions
        self.env = handler.env
        self._by_connection: dict[str, str] = {}
        """MCP session id (stateful connections) -> gym-metrics session id."""

    async def list_tools(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        tools = [types.Tool(name=s.name, description=s.description, input_schema=s.parameters_schema()) for s in hook(self.env, "tools")().values()]
        tools.append(types.Tool(name=SEED, description="Start an episode: open a session seeded with the task row; returns its session_id.", input_schema=_ROW_SCHEMA))
        tools.append(types.Tool(name=VERIFY, description="End the episode: verify it in its session; returns the reward and the verify response.", input_schema=_BODY_SCHEMA))
        return types.ListToolsResult(tools=tools)

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        arguments: Mapping[str, Any] = params.arguments or {}
        try:
            if params.name == SEED:
                text, failed = await self._seed(ctx, arguments.get("row") or {}), False
            elif params.name == VERIFY:
                text, failed = await self._verify(ctx, arguments.get("body")), False
            else:
                session_id = await self._session(ctx)
                text, failed, _ = await _while_connected(ctx, self.sessions.call_tool(session_id, params.name, orjson.dumps(dict(arguments))))
        except InvalidInputError as exc:  # the model's mistake: its to read
            text, failed = orjson.dumps({"error": str(exc)}).decode(), True
        except NotFoundError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        except GymMetricsError as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=str(exc)) from None
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=failed)

    async def _seed(self, ctx: Any, row: Any) -> str:
        if not isinstance(row, Mapping):
            raise InvalidInputError("the row must be a JSON object")
        session = await self.sessions.seed(orjson.dumps(dict(row)), _client(ctx))
        connection = _connection(ctx)
        if connection is not None and _named(ctx) is None:
            previous = self._by_connection.pop(connection, None)
            if previous is not None:
                await self.sessions.close(previous)
            self._remember(connection, session.id)
        return orjson.dumps({"session_id": session.id}).decode()

    async def _verify(self, ctx: Any, body: Any) -> str:
        if not isinstance(body, Mapping):
            raise InvalidInputError("gym_metrics_verify needs `body`, the verify request as a JSON object")
        session_id = await self._session(ctx)
        connection = _connection(ctx)
        if connection is not None and self._by_connection.get(connection) == session_id:
            del self._by_connection[connection]
        reward, response_json = await self.sessions.verify(session_id, orjson.dumps(dict(body)))
        return f'{{"reward":{orjson.dumps(reward).decode()},"response":{response_json}}}'

    async def _session(self, ctx: Any) -> str:
        """The session a call runs in (see the module docstring)."""
        named = _named(ctx)
        if named is not None:
            return named
        connection = _connection(ctx)
        if connection is None:
            raise NotFoundError(
                f"no session: call {SEED} and send its session_id in _meta[{SESSION_META!r}] "
                "(or connect with a stateful session, mode='legacy')"
            )
        session_id = self._by_connection.get(connection)
        if session_id is None or session_id not in self.sessions.store:
            session_id = (await self.sessions.seed(b"{}", _client(ctx))).id
            self._remember(connection, session_id)
        return session_id

    async def end_connection(self, connection: str) -> None:
        """A stateful connection ended (DELETE /mcp): its session is closed with it (it held a
        place of --max-sessions until its idle TTL)."""
        session_id = self._by_connection.pop(connection, None)
        if session_id is not None:
            await self.sessions.close(session_id)

    def _remember(self, connection: str, session_id: str) -> None:
        """A connection's session; the map is pruned of sessions no longer live (a connection
        abandoned, its session closed idle) once it holds as many as the server's sessions."""
        if len(self._by_connection) >= self.sessions.store.max_sessions:
            self._by_connection = {c: s for c, s in self._by_connection.items() if s in self.sessions.store}
        self._by_connection[connection] = session_id


def _named(ctx: Any) -> str | None:
    meta = getattr(ctx, "meta", None)
    extra = getattr(meta, "model_extra", None) or {}
    value = extra.get(SESSION_META) if isinstance(extra, dict) else None
    if value is None and isinstance(meta, Mapping):
        value = meta.get(SESSION_META)
    return value if isinstance(value, str) and value else None


DISCONNECT_POLL_S = 0.5
"""How often a running tool call looks whether its client is still there."""


async def _while_connected(ctx: Any, work: Awaitable[T]) -> T:
    """`work`'s result, cancelled when the client goes away (with JSON answers the SDK awaits
    the handler without watching the connection: a client that gave up left its tool running)."""
    gone = getattr(getattr(ctx, "request", None), "is_disconnected", None)
    task = asyncio.ensure_future(work)
    if gone is None:
        return await task
    try:
        while True:
            done, _ = await asyncio.wait([task], timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            if await gone():
                raise GymMetricsError("the client went away: its tool call was cancelled")
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class _EndsSessions:
    """The MCP app, with a client's DELETE of its MCP session closing the gym-metrics session
    that connection used."""

    def __init__(self, app: Any, tools: McpTools) -> None:
        self.app, self.tools = app, tools

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)
        if scope.get("type") == "http" and scope.get("method") == "DELETE":
            connection = dict(scope.get("headers") or ()).get(b"mcp-session-id")
            if connection:
                await self.tools.end_connection(connection.decode("latin-1"))


def _client(ctx: Any) -> str:
    """The calling client's address (Session.client), "" when the transport does not say."""
    client = getattr(getattr(ctx, "request", None), "client", None)
    return str(getattr(client, "host", "") or "")


def _connection(ctx: Any) -> str | None:
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    value = headers.get("mcp-session-id") if headers is not None else None
    return value or None


async def serve_mcp(handler: EnvironmentHandler, host: str, port: int, token: str | None = None) -> Served:
    """Start the MCP endpoint (`http://host:port/mcp`) on the running loop; with `token` (the
    server's auth token) every request must carry it, as at the gRPC door."""
    try:
        from mcp.server import Server
    except ImportError:
        raise InvalidInputError("--mcp-port needs the mcp extra: pip install 'gym-metrics[mcp]'") from None
    tools = McpTools(handler)
    server = Server(f"gym-metrics {handler.env.server_name()}", on_list_tools=tools.list_tools, on_call_tool=tools.call_tool)
    app = server.streamable_http_app(json_response=True, host=host, max_sessions=handler.sessions.store.max_sessions)
    return await start_uvicorn(BearerGate(_EndsSessions(app, tools), token, host), host, port, "--mcp-port", "mcp")
