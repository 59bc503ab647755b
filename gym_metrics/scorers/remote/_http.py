"""Async POST of JSON to the user's endpoint, with pooling, bounded concurrency and retries.

One pooled `httpx.AsyncClient` per event loop, a semaphore bounding requests in flight, a
timeout per attempt, and retries with exponential backoff and jitter on 408, 429, 500, 502,
503, 504, timeouts and connection errors, honouring `Retry-After` (same policy as the judge
client, gym_metrics/scorers/judge/_client.py, whose Retry-After parser this reuses). Any other 4xx
(or other non-2xx) fails at once. The bearer key is read once from the environment variable
the config names and scrubbed from every message this module produces.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

import httpx
import orjson

from gym_metrics._http import PooledHttp, read_key
from gym_metrics._json import loads
from gym_metrics.scorers import RowError
from gym_metrics.scorers.judge._client import _retry_after
from gym_metrics.scorers.remote._config import RemoteMetricConfig

log = logging.getLogger("gym_metrics.scorers.remote")

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_sleep = asyncio.sleep  # module-level so tests can record the backoff delays
_SNIPPET = 300


class _Failure(Exception):
    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable, self.retry_after = retryable, retry_after


class RemoteClient(PooledHttp):
    """`await client.post_json(body)` -> the endpoint's parsed JSON answer, after retries.
    Failures raise RowError("endpoint", reason)."""

    def __init__(self, config: RemoteMetricConfig) -> None:
        super().__init__(read_key(config.api_key_env, "remote metric"), config.timeout_seconds, config.max_concurrency)
        self.config = config
        self.attempts = 0
        """HTTP attempts made so far (all rows)."""

    def __repr__(self) -> str:  # the key stays out
        return f"RemoteClient(url={self.config.url!r})"

    async def post_json(self, body: Any) -> Any:
        # Yield before touching httpx: eager callers run the first step in another task.
        await asyncio.sleep(0)
        try:
            payload = orjson.dumps(body)
        except TypeError as exc:
            raise RowError("body", f"rendered body is not JSON-serialisable: {exc}") from None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        attempt = 0
        while True:
            try:
                raw = await self._attempt(payload, headers)
                break
            except _Failure as exc:
                if not exc.retryable or attempt >= self.config.max_retries:
                    suffix = f" (gave up after {attempt + 1} attempts)" if exc.retryable and attempt else ""
                    raise RowError("endpoint", f"{exc}{suffix}") from None
                delay = self._delay(attempt, exc.retry_after)
                log.warning(
                    "remote metric attempt %d/%d failed (%s); retrying in %.2f s",
                    attempt + 1, self.config.max_retries + 1, exc, delay,
                )
                await _sleep(delay)
                attempt += 1
        try:  # as Python's json (so the SDK, through httpx) reads it: NaN / Infinity, big integers
            return loads(raw)
        except ValueError:
            snippet = self._scrub(raw[:_SNIPPET].decode("utf-8", "replace"))
            raise RowError("endpoint", f"answer is not valid JSON: {snippet!r}") from None

    async def _attempt(self, payload: bytes, headers: dict[str, str]) -> bytes:
        http, semaphore = self._session()
        async with semaphore:  # held for the request only, not during a backoff sleep
            self.attempts += 1
            try:
                response = await http.post(self.config.url, content=payload, headers=headers)
            except httpx.TimeoutException:
                raise _Failure(f"timed out after {self.config.timeout_seconds} s", retryable=True) from None
            except httpx.TransportError as exc:
                raise _Failure(self._scrub(f"cannot reach the endpoint: {type(exc).__name__}: {exc}"), retryable=True) from None
        status = response.status_code
        if not 200 <= status < 300:
            snippet = self._scrub(response.text[:_SNIPPET])
            raise _Failure(
                f"HTTP {status}: {snippet}",
                retryable=status in RETRYABLE_STATUS,
                retry_after=_retry_after(response.headers.get("retry-after")),
            )
        return response.content

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """The server's Retry-After, else exponential backoff with equal jitter; both capped."""
        cap = self.config.max_backoff_seconds
        if retry_after is not None:
            return min(cap, retry_after)
        base = min(cap, self.config.backoff_seconds * 2**attempt)
        return base / 2 + random.uniform(0, base / 2)
