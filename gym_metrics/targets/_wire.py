"""A lean HTTP/1.1 keep-alive connection pool for policy calls at collect's rates.

httpx costs about 0.7 ms of CPU per request here (its client layers, then httpcore's pool,
which scans every connection and polls each idle socket on every request), which caps a
collect process near 1,000 generations/s whatever the model's speed. Generation requests are
one shape (a JSON POST, a JSON answer), so this pool writes the request in one go and reads
the answer (Content-Length, chunked, or until close) straight from asyncio streams. Retries,
backoff, the key and the error messages stay the shared PooledHttp's: `WirePool.post` only
raises `WireTimeout` / `WireUnreachable` / `WireTooLarge` for it to classify.

Bodies are read in bounded pieces into one buffer (the answer's bytes are held once, not in
the stream's buffer and again as its copy), at most `max_bytes` of them, and a `ByteBudget`
shared by the requests (collect's) bounds how many big answers are held at once.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
import time
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from gym_metrics._util.http import MAX_ANSWER_BYTES


class WireTimeout(Exception):
    """No complete answer within the timeout."""


class WireUnreachable(Exception):
    """Connecting, writing or reading failed (refused, reset, closed early)."""


class WireTooLarge(Exception):
    """The answer is larger than the pool's `max_bytes` (announced or sent): not read further."""


class ByteBudget:
    """Bytes of answers held at once, shared by the requests of one process (collect's): a
    body is read only when it fits in what is left (its Content-Length; an answer of unknown
    length waits for any room, then is counted as it comes). Answers leave the budget when
    the objects holding them are freed (`hold`). Every size counts `factor` times: what an
    answer costs once parsed (collect holds a rollout's row and its encoded body, so 2).
    Waiting never deadlocks: a read goes on when nothing is held, and after `patience`
    seconds whatever is held (then past the budget)."""

    def __init__(self, capacity: int, factor: int = 1) -> None:
        self.capacity, self.factor = capacity, factor
        self.held = 0
        self.peak = 0
        """Most bytes held at once (for tests and the memory benchmark)."""
        self._waiters: list[asyncio.Future[None]] = []

    async def take(self, size: int, patience: float) -> float:
        """Count `size` bytes once they fit; the seconds spent waiting for room."""
        started, size = time.monotonic(), size * self.factor
        while self.held and self.held + size > self.capacity and time.monotonic() - started < patience:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(asyncio.shield(waiter), max(0.0, patience - (time.monotonic() - started)))
            except asyncio.TimeoutError:
                break
        self.held += size
        self.peak = max(self.peak, self.held)
        return time.monotonic() - started

    def add(self, size: int) -> None:
        """Count `size` more bytes (no wait: what is already read)."""
        self.held += size * self.factor
        self.peak = max(self.peak, self.held)

    def release(self, size: int) -> None:
        self.held -= size * self.factor
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def hold(self, owner: Any, size: int) -> None:
        """Count `size` bytes until `owner` is freed (a generated rollout: until it is written
        and dropped, wherever it is in between)."""
        self.add(size)
        weakref.finalize(owner, self.release, size)


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_timeout = getattr(asyncio, "timeout", None)
_PIECE = 1 << 20
"""Bytes read at a time from a stream (its buffer never holds much more)."""


class WirePool:
    """Keep-alive connections to one `scheme://host:port`, at most `size` requests at once.
    A connection goes back to the pool only after a complete answer that allows it."""

    def __init__(
        self, base_url: str, size: int, timeout_s: float, max_bytes: int = MAX_ANSWER_BYTES, budget: ByteBudget | None = None
    ) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        """Largest answer body read (the config's `max_answer_bytes`)."""
        self.budget = budget
        self._size = size
        self._idle: list[Connection] = []
        self._semaphore: asyncio.Semaphore | None = None
        self._ssl: ssl_module.SSLContext | None = None

    async def post(self, url: str, payload: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes | bytearray]:
        """(status, lower-cased headers, body) of one POST (the body in one buffer, as read)."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self._size)
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [f"POST {target} HTTP/1.1", f"Host: {self.host_header}", f"Content-Length: {len(payload)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload
        async with self._semaphore:
            try:
                if _timeout is not None:  # Python 3.11+: no extra task per request
                    async with _timeout(self.timeout_s) as deadline:
                        return await self._exchange(request, deadline)
                return await asyncio.wait_for(self._exchange(request, None), self.timeout_s)
            except asyncio.TimeoutError:
                raise WireTimeout() from None

    async def _exchange(self, request: bytes, deadline: Any) -> tuple[int, dict[str, str], bytes | bytearray]:
        while True:
            reused = bool(self._idle)
            reader, writer = self._idle.pop() if reused else await self._connect()
            try:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                writer.close()
                if reused:
                    continue  # the server closed an idle connection: the request never arrived
                raise WireUnreachable(f"{type(exc).__name__}: {exc}") from None
            except BaseException:
                writer.close()
                raise
            try:
                status, fields = _head(head)
                body = await self._body(reader, fields, deadline)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
                writer.close()
                raise WireUnreachable(f"{type(exc).__name__}: {exc}") from None
            except BaseException:
                writer.close()
                raise
            if _keeps_alive(head, fields):
                self._idle.append((reader, writer))
            else:
                writer.close()
            return status, fields, body

    async def _body(self, reader: asyncio.StreamReader, fields: dict[str, str], deadline: Any) -> bytearray:
        """The body, at most `max_bytes` (WireTooLarge past it, the rest unread), read once the
        budget has room for it; the wait for room does not count against the deadline."""
        chunked = "chunked" in fields.get("transfer-encoding", "").lower()
        size = None if chunked or "content-length" not in fields else int(fields["content-length"])
        if size is not None and not 0 <= size <= self.max_bytes:
            raise WireTooLarge(f"it announces {size:,} bytes") if size > 0 else ValueError(f"Content-Length {size}")
        budget, taken = self.budget, size or 0
        if budget is not None:
            left = None if deadline is None else deadline.when() - asyncio.get_running_loop().time()
            if left is not None:
                deadline.reschedule(None)  # our own wait: not the server's time
            await budget.take(taken, self.timeout_s)
            if left is not None:
                deadline.reschedule(asyncio.get_running_loop().time() + left)

        def count(n: int) -> None:
            nonlocal taken
            taken += n
            if budget is not None:
                budget.add(n)

        try:
            if size is not None:
                return await _exactly(reader, size)
            return await (_chunked(reader, self.max_bytes, count) if chunked else _until_close(reader, self.max_bytes, count))
        finally:
            if budget is not None:
                budget.release(taken)

    async def _connect(self) -> Connection:
        if self.tls and self._ssl is None:
            self._ssl = ssl_module.create_default_context()
        try:
            return await asyncio.open_connection(self.host, self.port, ssl=self._ssl if self.tls else None, limit=1 << 20)
        except OSError as exc:
            raise WireUnreachable(f"{type(exc).__name__}: {exc}") from None

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()


def _keeps_alive(head: bytes, fields: dict[str, str]) -> bool:
    """Whether the connection may carry the next request: HTTP/1.1 without `Connection:
    close`, and a body whose end was known (not read until close)."""
    framed = "content-length" in fields or "transfer-encoding" in fields
    return head.startswith(b"HTTP/1.1") and fields.get("connection", "").lower() != "close" and framed


def _head(head: bytes) -> tuple[int, dict[str, str]]:
    """The status and lower-cased headers of an answer's head (through the blank line)."""
    status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
    version, code, *_ = status_line.split(" ", 2)
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x answer: {status_line[:80]!r}")
    fields: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return int(code), fields


async def _exactly(reader: asyncio.StreamReader, size: int, into: bytearray | None = None) -> bytearray:
    """`size` bytes, read in pieces into one buffer (`into`, appended, or a new one)."""
    body = bytearray() if into is None else into
    end = len(body) + size
    while len(body) < end:
        piece = await reader.read(min(_PIECE, end - len(body)))
        if not piece:
            raise asyncio.IncompleteReadError(b"", end - len(body))
        body += piece
    return body


async def _until_close(reader: asyncio.StreamReader, max_bytes: int, count: Callable[[int], None]) -> bytearray:
    body = bytearray()
    while piece := await reader.read(_PIECE):
        if len(body) + len(piece) > max_bytes:
            raise WireTooLarge("more than that was sent")
        body += piece
        count(len(piece))
    return body


async def _chunked(reader: asyncio.StreamReader, max_bytes: int, count: Callable[[int], None]) -> bytearray:
    body = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
        if size < 0:
            raise ValueError(f"chunk size {size}")
        if len(body) + size > max_bytes:
            raise WireTooLarge("more than that was sent")
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the blank line
                pass
            return body
        await _exactly(reader, size, body)
        count(size)
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("a chunk not ended by CRLF")
