"""Async client of an OpenAI-compatible chat-completions judge.

One pooled `httpx.AsyncClient` per event loop, a semaphore bounding requests in flight,
a timeout per attempt, and retries with exponential backoff and jitter on the failures that
are worth retrying (408, 429, 5xx, timeouts, connection errors), honouring `Retry-After`.
Any other 4xx fails at once: resending the same bad request cannot succeed.

The API key is read once from the environment variable the config names, sent only as a
bearer header, and scrubbed from every message this module produces.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import orjson

from gym_metrics._http import PooledHttp, read_key
from gym_metrics.errors import GymMetricsError
from gym_metrics.scorers.judge._config import JudgeConfig

log = logging.getLogger("gym_metrics.scorers.judge")

RETRYABLE_STATUS = frozenset({408, 429})
_sleep = asyncio.sleep  # module-level so tests can record the backoff delays
_BODY_SNIPPET = 300


class JudgeError(GymMetricsError):
    """The judge could not give an answer: HTTP error, timeout, or a malformed response."""

    def __init__(
        self, message: str, *, status: int | None = None, retryable: bool = False, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.retryable = status, retryable
        self.retry_after = retry_after
        """Seconds the server asked us to wait (its `Retry-After`), when it said."""


class JudgeClient(PooledHttp):
    """`await client.complete(messages)` -> the judge's reply text."""

    def __init__(self, config: JudgeConfig) -> None:
        super().__init__(read_key(config.api_key_env, "judge"), config.timeout_seconds, config.max_concurrency)
        self.config = config

    def __repr__(self) -> str:  # the key stays out
        return f"JudgeClient(endpoint={self.config.endpoint()!r}, model={self.config.model!r})"

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """The content of the first choice of one chat completion, after retries."""
        # Yield once before touching httpx: callers that start coroutines eagerly (evaluate,
        # the gRPC servicer) run the first step in THEIR task and resume it in a new one, and
        # httpx's cancel scopes must be entered and left in the same task.
        await asyncio.sleep(0)
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.config.temperature if temperature is None else temperature,
        }
        tokens = max_tokens if max_tokens is not None else self.config.max_tokens
        if tokens is not None:
            body["max_tokens"] = tokens
        payload = orjson.dumps(body)
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        attempt = 0
        while True:
            try:
                return await self._attempt(payload, headers)
            except JudgeError as exc:
                if not exc.retryable or attempt >= self.config.max_retries:
                    if exc.retryable and attempt:
                        raise JudgeError(f"{exc} (gave up after {attempt + 1} attempts)", status=exc.status) from None
                    raise
                delay = self._delay(attempt, exc.retry_after)
                log.warning(
                    "judge attempt %d/%d failed (%s); retrying in %.2f s",
                    attempt + 1, self.config.max_retries + 1, exc, delay,
                )
                await _sleep(delay)
                attempt += 1

    async def _attempt(self, payload: bytes, headers: dict[str, str]) -> str:
        http, semaphore = self._session()
        async with semaphore:  # held for the request only, not during a backoff sleep
            try:
                response = await http.post(self.config.endpoint(), content=payload, headers=headers)
            except httpx.TimeoutException:
                raise JudgeError(f"judge timed out after {self.config.timeout_seconds} s", retryable=True) from None
            except httpx.TransportError as exc:
                raise JudgeError(self._scrub(f"cannot reach the judge: {type(exc).__name__}: {exc}"), retryable=True) from None
        status = response.status_code
        if not 200 <= status < 300:
            snippet = self._scrub(response.text[:_BODY_SNIPPET])
            retryable = status in RETRYABLE_STATUS or status >= 500
            raise JudgeError(
                f"judge returned HTTP {status}: {snippet}",
                status=status,
                retryable=retryable,
                retry_after=_retry_after(response.headers.get("retry-after")),
            )
        return self._content(response.content)

    def _content(self, raw: bytes) -> str:
        try:
            data = orjson.loads(raw)
            content = data["choices"][0]["message"].get("content")
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
            snippet = self._scrub(raw[:_BODY_SNIPPET].decode("utf-8", "replace"))
            raise JudgeError(f"judge response is not a chat completion: {snippet}") from None
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise JudgeError("judge reply has no text content")
        return content

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry `attempt + 1`: the server's Retry-After, else exponential
        backoff with equal jitter (half fixed, half random), both capped."""
        cap = self.config.max_backoff_seconds
        if retry_after is not None:
            return min(cap, retry_after)
        base = min(cap, self.config.backoff_seconds * 2**attempt)
        return base / 2 + random.uniform(0, base / 2)


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
