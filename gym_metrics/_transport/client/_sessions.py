"""The session and tool calls of ResourcesClient: seed a rollout's session, call a tool in it,
close it (verify in a session is ResourcesClient.verify with `session_id`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc.aio

from gym_metrics._transport._batches import dumps_json
from gym_metrics._transport.client._status import translate
from gym_metrics.v1 import resources_pb2 as pb


@dataclass(frozen=True)
class ToolOutput:
    """One tool call's answer: the text the model reads, and whether the tool failed."""

    output: str
    failed: bool


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
        """Call tool `name` in a session; NotFoundError / InvalidInputError (translated) for
        an unknown session or tool and for arguments that do not fit."""
        request = pb.CallToolRequest(session_id=session_id, name=name, arguments_json=json_text(arguments))
        try:
            answer = await self._stub.CallTool(request, metadata=self._metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise translate(exc) from None
        return ToolOutput(answer.output, answer.failed)

    async def close_session(self, session_id: str, *, timeout: float | None = None) -> bool:
        """Close a session; False when it was not live."""
        try:
            answer = await self._stub.CloseSession(pb.CloseSessionRequest(session_id=session_id), metadata=self._metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise translate(exc) from None
        return bool(answer.closed)
