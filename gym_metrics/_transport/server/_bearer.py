"""The server's auth token at its HTTP doors (the reward endpoint, MCP), as at gRPC: a request
is let through only with `Authorization: Bearer <token>` (compared in constant time)."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
REFUSAL = b'{"error":"missing or wrong bearer token"}'


def authorized(scope: Scope, token: str | None) -> bool:
    """Whether an HTTP request carries the server's token (always, when it has none)."""
    if token is None:
        return True
    given = dict(scope.get("headers") or ()).get(b"authorization", b"")
    return hmac.compare_digest(given, f"Bearer {token}".encode())


class BearerGate:
    """An ASGI app in front of another: every HTTP request without the token gets 401, before
    the app sees it (the MCP door: initialize, tools/list and every tool call alike)."""

    def __init__(self, app: App, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not authorized(scope, self.token):
            headers = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                       (b"content-length", str(len(REFUSAL)).encode())]  # fmt: skip
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": REFUSAL})
            return
        await self.app(scope, receive, send)
