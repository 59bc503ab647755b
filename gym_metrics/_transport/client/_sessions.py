"""The session and tool calls of ResourcesClient: seed a rollout's session, call a tool in it,
step it (an environment that answers turns), close it (verify in a session is ResourcesClient.verify with `session_id`), and the tool caller
the agent loop uses."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import grpc.aio

from gym_metrics._transport._batches import dumps_json
from gym_metrics._transport.client._status import REJECTED, RemoteCallError, ServerUnavailableError, translate
from gym_metrics.errors import InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb


class SessionLostError(ServerUnavailableError):
    """The session is gone from its server (restarted, or idle past its TTL): the episode must
    start again, on a fresh session (another replica, if there is one)."""


def session_error(exc: grpc.aio.AioRpcError) -> Exception:
    """`translate`, with NOT_FOUND for a session that is no longer live as SessionLostError."""
    error = translate(exc)
    if isinstance(error, RemoteCallError) and error.code == "NOT_FOUND" and "no live session" in error.details:
        return SessionLostError(error.details)
    return error


@dataclass(frozen=True)
class ToolOutput:
    """One tool call's answer: the text the model reads, and whether the tool failed."""

    output: str
    failed: bool
    status: int = 0
    """The HTTP status a NeMo Gym app's tool route answered; 0 for a tool that is not a route."""


MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest message a client sends or reads (its channel's limits; a server's default too)."""


def json_text(value: Mapping[str, Any] | str | bytes) -> str:
    """A JSON object as text (text and bytes are sent as they are)."""
    if isinstance(value, bytes):
        return value.decode()
    return value if isinstance(value, str) else dumps_json(value)


class SessionCalls:
    """Mixed into ResourcesClient (which sets `_stub` and `_metadata`)."""

    _stub: Any
    _metadata: Any

    async def seed_session(self, row: Mapping[str, Any] | str | bytes, *, timeout: float | None = None) -> str:
        """Open a session for the task row `row`; its id."""
        try:
            answer = await self._stub.SeedSession(pb.SeedSessionRequest(body_json=json_text(row)), metadata=self._metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise translate(exc) from None
        return str(answer.session_id)

    async def call_tool(
        self, session_id: str, name: str, arguments: Mapping[str, Any] | str | bytes, *, timeout: float | None = None
    ) -> ToolOutput:
        """Call tool `name` in a session: SessionLostError when the session is gone,
        RemoteCallError NOT_FOUND for an unknown tool, InvalidInputError for arguments that do
        not fit."""
        request = pb.CallToolRequest(session_id=session_id, name=name, arguments_json=json_text(arguments))
        try:
            answer = await self._stub.CallTool(request, metadata=self._metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise session_error(exc) from None
        return ToolOutput(answer.output, answer.failed, answer.status)

    async def reset_session(self, row: Mapping[str, Any] | str | bytes, *, timeout: float | None = None) -> tuple[str, dict[str, Any]]:
        """Open a session of an environment that answers turns (ServerInfo.steps): (its id,
        what its reset answered: {"observation", "info"})."""
        try:
            answer = await self._stub.SeedSession(pb.SeedSessionRequest(body_json=json_text(row)), metadata=self._metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise translate(exc) from None
        return str(answer.session_id), reset_of(answer.reset_json)

    async def step(self, session_id: str, response: Mapping[str, Any] | str | bytes, *, timeout: float | None = None) -> dict[str, Any]:
        """One step with the model's turn `response`: {"observation", "reward", "terminated",
        "truncated", "info"}; SessionLostError when the session is gone (a step that ended the
        episode closed it)."""
        try:
            answer = await self._stub.Step(pb.StepRequest(session_id=session_id, response_json=json_text(response)), metadata=self._metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise session_error(exc) from None
        return step_of(answer.step_json)

    async def close_session(self, session_id: str, *, timeout: float | None = None) -> bool:
        """Close a session; False when it was not live."""
        try:
            answer = await self._stub.CloseSession(pb.CloseSessionRequest(session_id=session_id), metadata=self._metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise translate(exc) from None
        return bool(answer.closed)


def reset_of(reset_json: str) -> dict[str, Any]:
    """A SeedSession's reset answer ({} for an environment that does not answer turns)."""
    out: dict[str, Any] = json.loads(reset_json) if reset_json else {}
    return out


def step_of(step_json: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(step_json)
    return out


class CallsTools(Protocol):
    """What can call a tool in a session: a ResourcesClient, or its SessionStream."""

    async def call_tool(self, session_id: str, name: str, arguments: Mapping[str, Any] | str | bytes) -> ToolOutput: ...


def tool_caller(
    client: CallsTools, session_id: str, tools: Iterable[str], any_name: bool = False
) -> Callable[[str, str], Awaitable[tuple[str, bool]]]:
    """CallTool as the agent loop calls it, (name, arguments) -> (output, failed): what the
    model got wrong (a tool the environment does not have, arguments that do not fit) comes
    back as an error output for the model to read; a lost session raises SessionLostError.
    With `any_name` (ServerInfo.any_tool_name) every name goes to the server, which answers it."""
    known = None if any_name else tools if isinstance(tools, frozenset) else frozenset(tools)

    async def call(name: str, arguments: str) -> tuple[str, bool]:
        if known is not None and name not in known:
            listed = ", ".join(sorted(known)) or "none"
            return _error(f"no tool {name!r} in this environment (tools: {listed})"), True
        try:
            answer = await client.call_tool(session_id, name, arguments)
        except InvalidInputError as exc:
            return _error(str(exc).removeprefix(REJECTED)), True
        return answer.output, answer.failed

    return call


def _error(message: str) -> str:
    """An error output, as the server writes a tool's (compact JSON)."""
    return json.dumps({"error": message}, separators=(",", ":"), ensure_ascii=False)
