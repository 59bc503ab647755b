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

`Lifespan` runs the app's ASGI lifespan as uvicorn runs it under NeMo Gym: the lifespan contexts
environments wrap around FastAPI's (a background task, a cleanup at exit) and its
`on_event("startup")` handlers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from typing import Any

from gym_metrics.errors import InvalidInputError

JSON = [(b"content-type", b"application/json")]
log = logging.getLogger("gym_metrics.serve")
_STATES: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
"""Per app, the state its lifespan set up: each request gets a copy (`request.state`), as uvicorn
hands it."""


async def post(app: Any, path: str, body: bytes, session: dict[str, Any], headers: Any = None) -> tuple[int, str]:
    """(status, body text) of `POST path` with the JSON `body` in `session` (`headers`: the
    caller's own, a mapping of text)."""
    given = [(str(k).lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in (headers or {}).items()
             if str(k).lower() not in ("content-type", "content-length")]  # fmt: skip
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
        "headers": [*JSON, (b"content-length", str(len(body)).encode()), *given],
        "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 80), "session": session,
    }  # fmt: skip
    state = _STATES.get(app)
    if state is not None:
        scope["state"] = dict(state)
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


class Lifespan:
    """One app's lifespan: `start` sends its startup and waits for the answer (a failed startup
    raises, naming the app's message: the server does not start, as uvicorn exits there); `stop`
    sends its shutdown and waits at most `timeout` seconds. An app that ends its lifespan
    without answering does not speak the protocol: it serves on, as uvicorn's default has it."""

    def __init__(self, app: Any, name: str) -> None:
        self.app, self.name = app, name
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        state: dict[str, Any] = {}
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": state}
        self._task = task = asyncio.ensure_future(self.app(scope, self._inbox.get, self._replies.put))
        task.add_done_callback(_ended)
        self._inbox.put_nowait({"type": "lifespan.startup"})
        reply = await self._reply(task)
        if reply is not None and reply["type"] == "lifespan.startup.failed":
            raise InvalidInputError(f"cannot start the environment: {self.name}'s startup (its app's lifespan) failed: {_last_line(reply)}")
        _STATES[self.app] = state

    async def stop(self, timeout: float) -> None:
        task, self._task = self._task, None
        if task is None or task.done():
            return
        self._inbox.put_nowait({"type": "lifespan.shutdown"})
        try:
            reply = await asyncio.wait_for(self._reply(task), timeout)
        except asyncio.TimeoutError:
            log.warning("%s's shutdown (its app's lifespan) took over %g s: cancelled", self.name, timeout)
            task.cancel()
            return
        if reply is not None and reply["type"] == "lifespan.shutdown.failed":
            log.error("%s's shutdown (its app's lifespan) failed: %s", self.name, _last_line(reply))
        await asyncio.wait({task}, timeout=timeout)

    async def _reply(self, task: asyncio.Task[None]) -> dict[str, Any] | None:
        """The app's next message, or None when its lifespan (`task`) ended without one."""
        getter = asyncio.ensure_future(self._replies.get())
        try:
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
        return getter.result() if getter.done() and not getter.cancelled() else None


def _ended(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:  # its message said it (Starlette sends, then raises)
        log.debug("an app's lifespan ended with %r", task.exception())


def _last_line(reply: dict[str, Any]) -> str:
    lines = [line for line in str(reply.get("message", "")).splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no message"


def json_text(value: Any) -> str:
    """`value` as Starlette's JSONResponse renders it (compact, UTF-8 as is)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


__all__ = ["Lifespan", "json_text", "post"]
