"""What the server's HTTP doors (the reward endpoint, MCP) check before anything else: its auth
token, as at gRPC (`Authorization: Bearer <token>`, compared in constant time), and, on a door
bound to loopback, that the request is not a web page's (DNS rebinding: a Host that is not
loopback; a cross-site Origin), as the MCP SDK checks its own."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from gym_metrics._util.keys import is_loopback

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
    """An ASGI app in front of another (the MCP door: initialize, tools/list and every tool call
    alike): a request without the token (when there is one) gets 401, and on a door bound to a
    loopback address one that looks like a web page's gets 403, before the app sees it (the MCP
    SDK's own check knows 127.0.0.1, localhost and ::1 only: on 127.0.0.2 a rebound page drove it)."""

    def __init__(self, app: App, token: str | None, host: str = "127.0.0.1") -> None:
        self.app, self.token, self.host = app, token, host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = None if authorized(scope, self.token) else (401, REFUSAL)
            why = browser_refusal(scope, self.host) if refusal is None else None
            if why is not None:
                refusal = (403, b'{"error":' + json.dumps(why).encode() + b"}")
            if refusal is not None:
                status, body = refusal
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                if status == 401:
                    headers.append((b"www-authenticate", b"Bearer"))
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def browser_refusal(scope: Scope, bound_host: str) -> str | None:
    """Why a request to a door bound to `bound_host` looks like a web page's (None when it does
    not): only for a loopback door, which a page on any site could otherwise reach through the
    user's browser (with a DNS name rebound to 127.0.0.1)."""
    if not is_loopback(bound_host):
        return None
    headers = dict(scope.get("headers") or ())
    host = headers.get(b"host", b"").decode("latin-1")
    if host and not is_loopback(_name(host)):
        return f"Host {host!r} is not this loopback server's (a browser's request to a rebound name?)"
    origin = headers.get(b"origin", b"").decode("latin-1")
    if origin and not is_loopback(_name(origin.partition("://")[2].split("/")[0])):
        return f"Origin {origin!r} is another site's"
    return None


def _name(host_port: str) -> str:
    """`host:port` (or `[v6]:port`, or a bare host) without its port."""
    if host_port.startswith("["):
        return host_port.split("]")[0] + "]"
    return host_port.rsplit(":", 1)[0] if host_port.count(":") == 1 else host_port
