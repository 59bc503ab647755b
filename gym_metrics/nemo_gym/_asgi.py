"""One POST through a ported environment's own FastAPI app, in process, as NeMo Gym's agent
sends it over HTTP: FastAPI matches the route (path parameters and catch-all routes included),
validates the body, runs the endpoint and encodes its answer through the route's response
model; an HTTPException is its status and `{"detail": ...}`, a body that does not fit is 422
with FastAPI's error list, an unknown path 404. An exception from the endpoint is answered as
NeMo Gym's exception middleware answers it: status 500, the JSON string of its `repr`. The
caller reads the body whatever the status, as NeMo Gym's simple_agent does.

No socket and no cookie: the session NeMo Gym keeps in a signed cookie is handed to the app in
the ASGI scope (`request.session` reads `scope["session"]`), the same dict for every call of one
rollout.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

JSON = [(b"content-type", b"application/json")]


async def post(app: Any, path: str, body: bytes, session: dict[str, Any]) -> tuple[int, str]:
    """(status, body text) of `POST path` with the JSON `body` in `session`."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
        "headers": [*JSON, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 80), "session": session,
    }  # fmt: skip
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Future()  # the client never goes away on its own: only a cancel ends this
        raise AssertionError  # pragma: no cover

    status, chunks = 500, []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    try:
        await app(scope, receive, send)
    except Exception as exc:  # NeMo Gym's exception middleware: the model reads repr(exc)
        return 500, json_text(repr(exc))
    return status, b"".join(chunks).decode("utf-8", errors="replace")


def json_text(value: Any) -> str:
    """`value` as Starlette's JSONResponse renders it (compact, UTF-8 as is)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


__all__ = ["json_text", "post"]
