"""What the judge and remote-metric clients share: one pooled httpx client per event loop,
bounded concurrency, and a bearer key that never reaches a message."""

from __future__ import annotations

import asyncio
import os

import httpx

from gym_metrics.errors import FieldViolation, InvalidInputError


def read_key(var: str | None, what: str) -> str | None:
    """The bearer key held by environment variable `var` (None: no key); unset is a config
    error raised before any request."""
    if var is None:
        return None
    key = os.environ.get(var)
    if not key:
        raise InvalidInputError(
            f"{what} API key not found",
            [FieldViolation("config.api_key_env", f"environment variable {var} is not set or empty")],
        )
    return key


class PooledHttp:
    """Base of the HTTP clients: subclasses call `_session()` and pass texts through `_scrub`."""

    def __init__(self, key: str | None, timeout_seconds: float, max_concurrency: int) -> None:
        self._key = key
        self._timeout = timeout_seconds
        self._concurrency = max_concurrency
        self._http: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _session(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """The pooled client and semaphore of the running loop (new ones after a loop change)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._semaphore is None or self._loop is not loop:
            n = self._concurrency
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(self._timeout),
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            )
            self._semaphore = asyncio.Semaphore(n)
            self._loop = loop
        return self._http, self._semaphore

    async def aclose(self) -> None:
        """Close the pooled connections (safe to call twice)."""
        http, self._http = self._http, None
        if http is not None:
            try:
                await http.aclose()
            except RuntimeError:  # created on a loop that is gone: nothing left to close
                pass
