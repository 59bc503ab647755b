"""One HTTP client for the judge, remote-scorer and model-target clients: its config, one
pooled httpx client per event loop, bounded concurrency, one retry policy, and a bearer key
that never reaches a message.

The retry policy: a timeout per attempt; retries with exponential backoff and equal jitter
(half fixed, half random), or the server's `Retry-After`, both capped, on the failures worth
retrying (408, 429, 5xx or the client's narrower set, timeouts, connection errors); any other
non-2xx fails at once, since resending the same bad request cannot succeed. The key is read
once from the environment variable the config names, sent only as `Authorization: Bearer`,
and scrubbed from every message and log line this module produces.
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib.util
import logging
import os
import random
import sys
import time
from collections.abc import Container, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ClassVar, Final

import httpx
import orjson
import pydantic
from pydantic import Field

from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError

RETRY_STATUSES: Final[frozenset[int]] = frozenset({408, 429, *range(500, 600)})
"""Statuses retried by default: request timeout, too many requests, every 5xx."""
SNIPPET: Final = 300
"""Characters of a failed answer's body quoted in the error."""
_sleep = asyncio.sleep  # module-level so tests can record the backoff delays

if importlib.util.find_spec("sniffio") is None:
    # httpcore runs `import sniffio` on every request to learn the event loop, and anyio 4 no
    # longer installs it: each failed import walks sys.path (~1 ms of CPU per request: judges,
    # remote scorers, targets). A None entry fails the same import at once, same outcome.
    sys.modules.setdefault("sniffio", None)  # type: ignore[arg-type]


class HttpClientConfig(pydantic.BaseModel):
    """An HTTP endpoint and how hard to push it: the knobs every client config shares (the
    judge's, the remote scorer's, ...), under the same keys in each.

    The API key itself is never part of a config: only the NAME of the environment variable
    holding it, so configs can be logged, printed and checked in without leaking a secret.
    """

    model_config = pydantic.ConfigDict(extra="forbid")

    url: str = Field(min_length=1)
    """The URL requests are POSTed to (http:// or https://)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (sent as `Authorization: Bearer`).
    None: no key is sent. The key never appears in logs, errors, reprs or outputs."""
    timeout_seconds: float = Field(default=30.0, gt=0)
    """Seconds one HTTP attempt may wait to connect, and for each read or write (httpx's
    timeout); an endpoint that stays silent longer is a timeout, retried like a 503."""
    max_retries: int = Field(default=3, ge=0)
    """Retries after a retryable failure (408, 429, 5xx, timeout, connection error): up to
    max_retries + 1 attempts."""
    max_concurrency: int = Field(default=8, ge=1)
    """Requests in flight at once, over all rows (one pooled connection set)."""
    backoff_seconds: float = Field(default=0.5, ge=0)
    """First retry delay; it doubles on each retry, with jitter (half fixed, half random)."""
    max_backoff_seconds: float = Field(default=30.0, ge=0)
    """Cap on one retry delay, including a server's `Retry-After`."""

    @pydantic.field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value


class HttpError(GymMetricsError):
    """An HTTP call that gave no usable answer: a non-2xx status, a timeout, a connection error
    (after the retries it deserved), or an answer the client cannot read."""

    def __init__(
        self, message: str, *, status: int | None = None, retryable: bool = False, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.retryable = status, retryable
        self.retry_after = retry_after
        """Seconds the server asked us to wait (its `Retry-After`), when it said."""


_KEYS: ContextVar[Mapping[str, str] | None] = ContextVar("gym_metrics_keys", default=None)


@contextmanager
def keys_from(keys: Mapping[str, str]) -> Iterator[None]:
    """In this context (this thread, this task and the tasks it starts), a key named by
    `api_key_env` is looked up in `keys` before the environment: a job server hands each job
    the secrets it resolved without writing them into the process environment."""
    token = _KEYS.set(keys)
    try:
        yield
    finally:
        _KEYS.reset(token)


def read_key(var: str | None, what: str) -> str | None:
    """The bearer key named `var` (None: no key), from `keys_from` or else the environment;
    unset is a config error raised before any request."""
    if var is None:
        return None
    keys = _KEYS.get()
    key = (keys.get(var) if keys is not None else None) or os.environ.get(var)
    if not key:
        raise InvalidInputError(
            f"{what} API key not found",
            [FieldViolation("config.api_key_env", f"environment variable {var} is not set or empty")],
        )
    return key


def retry_after_seconds(value: str | None) -> float | None:
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


def backoff_delay(attempt: int, retry_after: float | None, base: float, cap: float) -> float:
    """Seconds before retry `attempt + 1`: the server's Retry-After, else `base * 2**attempt`
    with equal jitter (half fixed, half random); both capped at `cap`."""
    if retry_after is not None:
        return min(cap, retry_after)
    delay = min(cap, base * 2**attempt)
    return delay / 2 + random.uniform(0, delay / 2)


class PooledHttp:
    """Base of the HTTP clients: `await self.post_json(url, body)` -> the 2xx response, after
    the retry policy; failures raise `self.error` (an HttpError subclass) with the key scrubbed.

    `name` says who answers in messages ("judge": "cannot reach the judge", "judge returned
    HTTP 503: ..."). Subclasses may narrow `retry_statuses`, set their own `error` type and
    word their messages (the `*_text` templates).
    """

    error: ClassVar[type[HttpError]] = HttpError
    retry_statuses: ClassVar[Container[int]] = RETRY_STATUSES
    timeout_text: ClassVar[str] = "{name} timed out after {seconds} s"
    unreachable_text: ClassVar[str] = "cannot reach the {name}: {error}"
    status_text: ClassVar[str] = "{name} returned HTTP {status}: {body}"

    def __init__(self, config: HttpClientConfig, *, name: str, log: logging.Logger | None = None) -> None:
        self.config = config
        self._name = name
        self._log = log or logging.getLogger("gym_metrics.http")
        self._key = read_key(config.api_key_env, name)
        self.attempts = 0
        """HTTP attempts made so far (all calls)."""
        self._http: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # the key stays out
        return f"{type(self).__name__}(url={self.config.url!r})"

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _session(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """The pooled client and semaphore of the running loop (new ones after a loop change)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._semaphore is None or self._loop is not loop:
            n = self.config.max_concurrency
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(self.config.timeout_seconds),
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            )
            self._semaphore = asyncio.Semaphore(n)
            self._loop = loop
        return self._http, self._semaphore

    async def post_json(self, url: str, body: Any, *, headers: Mapping[str, str] | None = None) -> httpx.Response:
        """POST `body` as JSON (bytes are sent as they are, as already-encoded JSON) with the
        bearer key, under the concurrency bound, retrying as the module docstring says.
        Returns the 2xx response; raises `self.error`, or TypeError (nothing sent) when `body`
        is not JSON-serialisable."""
        # Yield once before touching httpx: callers that start coroutines eagerly (evaluate,
        # the gRPC servicer) run the first step in THEIR task and resume it in a new one, and
        # httpx's cancel scopes must be entered and left in the same task.
        await asyncio.sleep(0)
        payload = body if isinstance(body, bytes) else orjson.dumps(body)
        sent = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        if self._key:
            sent["Authorization"] = f"Bearer {self._key}"
        cfg, attempt = self.config, 0
        while True:
            try:
                return await self._attempt(url, payload, sent)
            except HttpError as exc:
                if not exc.retryable or attempt >= cfg.max_retries:
                    if exc.retryable and attempt:
                        raise self.error(f"{exc} (gave up after {attempt + 1} attempts)", status=exc.status) from None
                    raise
                delay = backoff_delay(attempt, exc.retry_after, cfg.backoff_seconds, cfg.max_backoff_seconds)
                self._log.warning(
                    "%s attempt %d/%d failed (%s); retrying in %.2f s",
                    self._name, attempt + 1, cfg.max_retries + 1, exc, delay,
                )
                await _sleep(delay)
                attempt += 1

    async def _attempt(self, url: str, payload: bytes, headers: dict[str, str]) -> httpx.Response:
        http, semaphore = self._session()
        async with semaphore:  # held for the request only, not during a backoff sleep
            self.attempts += 1
            try:
                response = await http.post(url, content=payload, headers=headers)
            except httpx.TimeoutException:
                message = self.timeout_text.format(name=self._name, seconds=self.config.timeout_seconds)
                raise self.error(message, retryable=True) from None
            except httpx.TransportError as exc:
                message = self.unreachable_text.format(name=self._name, error=f"{type(exc).__name__}: {exc}")
                raise self.error(self._scrub(message), retryable=True) from None
        status = response.status_code
        if not 200 <= status < 300:
            body = response.text[:SNIPPET]
            raise self.error(
                self._scrub(self.status_text.format(name=self._name, status=status, body=body)),
                status=status,
                retryable=status in self.retry_statuses,
                retry_after=retry_after_seconds(response.headers.get("retry-after")),
            )
        return response

    async def aclose(self) -> None:
        """Close the pooled connections (safe to call twice)."""
        http, self._http = self._http, None
        if http is not None:
            try:
                await http.aclose()
            except RuntimeError:  # created on a loop that is gone: nothing left to close
                pass
