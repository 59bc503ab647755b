"""One HTTP client for the judge, remote-scorer and model-target clients: its config, one
pooled httpx client per event loop, bounded concurrency, one retry policy, and a bearer key
that never reaches a message.

The retry policy: a timeout per attempt; retries with exponential backoff and equal jitter
(half fixed, half random), or the server's `Retry-After`, both capped, on the failures worth
retrying (408, 429, 5xx or the client's narrower set, timeouts, connection errors); any other
non-2xx fails at once, since resending the same bad request cannot succeed. Retries are
logged as one line per interval per client (`RetryLog`), not one per attempt. The key is read
once by the name the config gives (`gym_metrics._util.keys`: the environment, or inside a job only
the job's resolved secrets, each bound to its hosts), sent only as `Authorization: Bearer`,
and masked (`scrub`, the one function every client masks it with, before any cut) in every
message, log line and parsed answer these clients produce.

Every attempt is bounded in time and bytes: `timeout_seconds` is a deadline for the whole
attempt (connect, send, the last byte of the answer), not only httpx's per-read timeout; the
answer is read streamed and refused past `max_answer_bytes` (one rule and one default for the
httpx path and collect's lean pool).
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib.util
import logging
import random
import sys
import time
from collections.abc import Awaitable, Container, Mapping
from typing import Any, ClassVar, Final, TypeVar
from urllib.parse import urlsplit

import httpx
import orjson
import pydantic
from pydantic import Field

from gym_metrics._util.keys import read_key
from gym_metrics._util.masking import MIN_SCRUBBED_KEY, may_hold, remember, scrub, scrub_tree, url_password, without_url_credentials
from gym_metrics.errors import GymMetricsError

RETRY_STATUSES: Final[frozenset[int]] = frozenset({408, 429, *range(500, 600)})
"""Statuses retried by default: request timeout, too many requests, every 5xx."""
SNIPPET: Final = 300
"""Characters of a failed answer's body quoted in the error (after the key is masked)."""
MAX_ANSWER_BYTES: Final = 64 << 20
"""Default `max_answer_bytes`: a model's or scorer's answer is a few KB to a few MB."""
ERROR_BODY_BYTES: Final = 64 << 10
"""Bytes of a non-2xx answer read for its error message; the rest is never read."""
_T = TypeVar("_T")
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
    """Seconds one HTTP attempt may take, from connecting to the last byte of the answer (a
    deadline for the whole attempt, not per read: a slow drip is cut too); an endpoint that
    takes longer is a timeout, retried like a 503."""
    max_answer_bytes: int = Field(default=MAX_ANSWER_BYTES, ge=1)
    """Largest answer body read, in bytes (64 MiB by default); a bigger one (announced or
    sent) fails the call at once, not retried, without reading the rest."""
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
        check_url(value)
        return value


def check_url(url: str) -> None:
    """Raise ValueError (never quoting the URL: it may hold a password) when `url` cannot be
    requested: a malformed host, a port outside 1-65535, no host at all. Such a URL passed the
    config and then failed every row with an opaque ExceptionGroup or InvalidURL."""
    try:
        parts = urlsplit(url)
        port = parts.port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:  # e.g. "Invalid IPv6 URL", "Port out of range 0-65535"
        raise ValueError(f"is not a valid URL: {exc}") from None
    host = parts.hostname
    if not host:
        raise ValueError("has no host")
    if any(ch.isspace() or not ch.isprintable() for ch in host):
        raise ValueError("has a space or a control character in its host")
    if port == 0:
        raise ValueError("has port 0 (a port is 1 to 65535)")


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


class Answer:
    """A 2xx answer, read whole: status, headers (case-insensitive lookup) and body."""

    __slots__ = ("content", "headers", "status_code")

    def __init__(self, status_code: int, headers: Mapping[str, str], content: bytes | bytearray) -> None:
        self.status_code, self.headers, self.content = status_code, headers, content


async def within(seconds: float, step: Awaitable[_T]) -> _T:
    """`await step`, cancelled (asyncio.TimeoutError) after `seconds`: one deadline for a
    whole attempt."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await step
    return await asyncio.wait_for(step, seconds)


class RetryLog:
    """The retries of one client, logged as one line per `every_s` seconds, not one per
    attempt: an unreachable endpoint behind thousands of rows would otherwise print thousands
    of warnings. The first failure is logged at once; later ones are counted and summed up
    (how many, the latest reason) when the interval has passed, and at `flush()`."""

    every_s: ClassVar[float] = 10.0

    def __init__(self, log: logging.Logger, name: str) -> None:
        self._log, self._name = log, name
        self._last = -float("inf")
        self._count, self._latest, self._attempts = 0, "", 0

    def failed(self, attempt: int, attempts: int, error: object, delay: float) -> None:
        """Attempt `attempt` (1-based) of `attempts` failed with `error`; retried after `delay` s."""
        now = time.monotonic()
        if self._count == 0 and now - self._last >= self.every_s:
            self._last = now
            self._log.warning("%s attempt %d/%d failed (%s); retrying in %.2f s", self._name, attempt, attempts, error, delay)
            return
        self._count, self._latest, self._attempts = self._count + 1, str(error), attempts
        if now - self._last >= self.every_s:
            self.flush()

    def flush(self) -> None:
        """Log the failures counted since the last line, if any."""
        if self._count:
            self._log.warning(
                "%s: %d more attempts failed in the last %.0f s, retried (up to %d attempts per request); latest: %s",
                self._name, self._count, max(time.monotonic() - self._last, 0.0), self._attempts, self._latest,
            )  # fmt: skip
            self._count, self._last = 0, time.monotonic()


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
        self._retries = RetryLog(self._log, name)
        self._bound = read_key(config.api_key_env, name, config.url)
        self._key = None if self._bound is None else self._bound.value
        if self._key is not None:
            remember(self._key)
        self._password = url_password(config.url)
        if self._password is not None:  # a `user:password@` URL: masked in every form in logs too
            remember(self._password)
        if self._key is not None and len(self._key) < MIN_SCRUBBED_KEY:
            self._log.warning("the %s API key has %d characters: keys under %d are not masked in messages", name, len(self._key), MIN_SCRUBBED_KEY)
        self.attempts = 0
        """HTTP attempts made so far (all calls)."""
        self._http: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # the key and the URL's password stay out
        return f"{type(self).__name__}(url={without_url_credentials(self.config.url)!r})"

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

    async def post_json(self, url: str, body: Any, *, headers: Mapping[str, str] | None = None) -> Answer:
        """POST `body` as JSON (bytes are sent as they are, as already-encoded JSON) with the
        bearer key, under the concurrency bound, retrying as the module docstring says.
        Returns the 2xx response; raises `self.error`, or TypeError (nothing sent) when `body`
        is not JSON-serialisable."""
        payload = body if isinstance(body, bytes) else orjson.dumps(body)
        sent = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        if self._bound is not None:
            if not self._bound.allows(url):  # config.url was checked; a derived URL must agree
                raise self.error(f"the {self._name} API key is not bound to the host of {self.scrub(url)!r}")
            sent["Authorization"] = f"Bearer {self._bound.value}"
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
                self._retries.failed(attempt + 1, cfg.max_retries + 1, exc, delay)
                await _sleep(delay)
                attempt += 1

    async def _attempt(self, url: str, payload: bytes, headers: dict[str, str]) -> Answer:
        # Yield once before touching httpx: callers that start coroutines eagerly (evaluate,
        # the gRPC servicer) run the first step in THEIR task and resume it in a new one, and
        # httpx's cancel scopes must be entered and left in the same task.
        await asyncio.sleep(0)
        http, semaphore = self._session()
        async with semaphore:  # held for the request only, not during a backoff sleep
            self.attempts += 1
            exchange: tuple[Answer, bool]
            try:
                exchange = await within(self.config.timeout_seconds, self._exchange(http, url, payload, headers))
            except (httpx.TimeoutException, asyncio.TimeoutError):
                raise self.error(self.timeout_text.format(name=self._name, seconds=self.config.timeout_seconds), retryable=True) from None
            except httpx.TransportError as exc:  # a request we could not even write is not retried
                message = self.unreachable_text.format(name=self._name, error=f"{type(exc).__name__}: {exc}")
                raise self.error(self.scrub(message), retryable=not isinstance(exc, httpx.LocalProtocolError)) from None
        return self.checked(*exchange)

    async def _exchange(self, http: httpx.AsyncClient, url: str, payload: bytes, headers: dict[str, str]) -> tuple[Answer, bool]:
        """The answer, read streamed: a 2xx one whole up to `max_answer_bytes` (more is refused
        unread), any other only its first ERROR_BODY_BYTES (True: it was cut)."""
        async with http.stream("POST", url, content=payload, headers=headers) as response:
            status, fields = response.status_code, response.headers
            ok = 200 <= status < 300
            cap = self.config.max_answer_bytes if ok else ERROR_BODY_BYTES
            announced = fields.get("content-length", "")
            if ok and announced.isdigit() and int(announced) > cap:
                raise self.too_large(f"it announces {int(announced):,} bytes")
            chunks: list[bytes] = []
            total = 0
            async for chunk in response.aiter_bytes():
                total += len(chunk)
                if total > cap:
                    if ok:
                        raise self.too_large("more than that was sent")
                    chunks.append(chunk[: len(chunk) - (total - cap)])
                    return Answer(status, fields, b"".join(chunks)), True
                chunks.append(chunk)
        return Answer(status, fields, b"".join(chunks)), False

    def too_large(self, detail: str) -> HttpError:
        """The error of an answer past `max_answer_bytes` (not retried: it would be again)."""
        cap = self.config.max_answer_bytes
        return self.error(
            f"{self._name} answer is larger than max_answer_bytes ({cap:,} bytes): {detail}; "
            "the rest was not read (raise max_answer_bytes in the config if answers this big are expected)"
        )

    def checked(self, answer: Answer, truncated: bool = False) -> Answer:
        """`answer` when it is a 2xx; else its error (retryable per `retry_statuses`), quoting
        the start of its body with the key masked."""
        status = answer.status_code
        if 200 <= status < 300:
            return answer
        body = self.scrub(answer.content.decode("utf-8", "replace"), SNIPPET, truncated=truncated)
        raise self.error(
            self.status_text.format(name=self._name, status=status, body=body),
            status=status,
            retryable=status in self.retry_statuses,
            retry_after=retry_after_seconds(answer.headers.get("retry-after")),
        )

    def scrub(self, text: str, limit: int | None = None, *, truncated: bool = False) -> str:
        """`text` without this client's key or its URL's credentials, cut to `limit` characters
        (module `scrub`)."""
        if "@" in text:
            text = without_url_credentials(text)
        if self._password is not None:
            text = scrub(text, self._password)
        return scrub(text, self._key, limit, truncated=truncated)

    def scrub_answer(self, raw: bytes | bytearray, data: Any) -> Any:
        """The parsed answer `data` (of body `raw`) with the key masked in every string: an
        endpoint that echoes the key must not put it in results, rollouts or messages. Walks
        the answer only when the body may spell the key (`may_hold`)."""
        key = self._key
        if not key or len(key) < MIN_SCRUBBED_KEY or not may_hold(raw, key):
            return data
        return scrub_tree(data, key)

    async def aclose(self) -> None:
        """Close the pooled connections (safe to call twice); log the retries not logged yet."""
        self._retries.flush()
        http, self._http = self._http, None
        if http is not None:
            try:
                await http.aclose()
            except RuntimeError:  # created on a loop that is gone: nothing left to close
                pass
