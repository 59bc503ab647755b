"""`request.session` for a ported app reached over real HTTP (a FastAPI TestClient in an
environment's own tests, `uvicorn` in a script), as NeMo Gym keeps it: a signed cookie named
after the server, a `session_id` given on the first call and sent back on every answer.

gym-metrics' own calls into the app (_asgi.post) carry the rollout's session in the ASGI scope
already; they pass straight through, so the cookie costs them one dict lookup.
"""

from __future__ import annotations

import uuid
from typing import Any

from gym_metrics.nemo_gym.server_utils import SESSION_ID_KEY

_INSTALLED = "nemo_gym_session_middleware_installed"
"""The flag on `app.state` NeMo Gym sets, so a second `setup_session_middleware` adds nothing."""


class CookieSession:
    """An ASGI middleware: a scope without a session gets Starlette's signed-cookie session,
    with a `session_id` in it; a scope that has one (an in-process call) is left alone."""

    def __init__(self, app: Any, secret_key: str, cookie: str) -> None:
        self._app = app
        self._key, self._cookie = secret_key, cookie
        self._signed: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if "session" in scope or scope["type"] not in ("http", "websocket"):
            await self._app(scope, receive, send)
            return
        if self._signed is None:  # made on the first HTTP call: in-process serving never needs it
            from starlette.middleware.sessions import SessionMiddleware

            self._signed = SessionMiddleware(self._with_id, secret_key=self._key, session_cookie=self._cookie)
        await self._signed(scope, receive, send)

    async def _with_id(self, scope: Any, receive: Any, send: Any) -> None:
        session = scope["session"]
        # assigned even when present: a session marked modified is sent back on every answer
        session[SESSION_ID_KEY] = session.get(SESSION_ID_KEY, str(uuid.uuid4()))
        await self._app(scope, receive, send)


def install(app: Any, key: str) -> None:
    """The cookie session on `app` once, its cookie and signing key `key` (NeMo Gym's
    `<class>___<server name>`)."""
    if getattr(app.state, _INSTALLED, False):
        return
    setattr(app.state, _INSTALLED, True)
    app.add_middleware(CookieSession, secret_key=key, cookie=key)
