"""NeMo Gym's `server_utils.request`: an outbound HTTP call to any URL (a search API, a task
registry) through one aiohttp session per event loop, answered with aiohttp's own
ClientResponse (`async with`, `.ok`, `.status`, `.json()`, `.content.iter_chunked()`), as
environments use it under NeMo Gym.

A `json=` body is sent as orjson's bytes with `Content-Type: application/json`. A connection
that fails (a dropped connection, an OS error, a timeout) is tried again after 0.5 s, at most
`_max_connection_retries` times when given, as NeMo Gym does; where NeMo Gym retries a dropped
connection forever when it is not given, here every call stops after MAX_NUM_TRIES attempts, so
a dead endpoint cannot hold a verify forever."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Optional

import aiohttp
import orjson

MAX_NUM_TRIES = 3
RETRY_ERROR_CODES = (408, 409, 429, 500, 502, 503, 504)
"""HTTP statuses a model-server call is retried on."""
RATE_LIMIT_ERROR_CODES = (429,)
RETRY_DELAY_S = 0.5
_SESSIONS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession]" = weakref.WeakKeyDictionary()


def _session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    session = _SESSIONS.get(loop)
    if session is None or session.closed:
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(), cookie_jar=aiohttp.DummyCookieJar())
        _SESSIONS[loop] = session
    return session


async def request(
    method: str,
    url: str,
    _internal: bool = False,
    _max_connection_retries: Optional[int] = None,
    _server_name: Optional[str] = None,
    **kwargs: Any,
) -> Any:
    """`method url` with aiohttp's request options; the answer is aiohttp's ClientResponse,
    whatever its status (the caller reads it)."""
    if kwargs.get("json"):
        kwargs["data"] = orjson.dumps(kwargs.pop("json"))
        kwargs["headers"] = {**(kwargs.get("headers") or {}), "Content-Type": "application/json"}
    limit = MAX_NUM_TRIES if _max_connection_retries is None else max(1, _max_connection_retries)
    attempt = 1
    while True:
        try:
            return await _session().request(method=method, url=url, **kwargs)
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
            if attempt >= limit:
                raise
            attempt += 1
            await asyncio.sleep(RETRY_DELAY_S)


async def close_request_session() -> None:
    """Close this event loop's session (the server's stop calls it)."""
    session = _SESSIONS.pop(asyncio.get_running_loop(), None)
    if session is not None and not session.closed:
        await session.close()


__all__ = ["MAX_NUM_TRIES", "close_request_session", "request"]
