"""A lean HTTP/1.1 keep-alive connection pool for policy calls at collect's rates.

httpx costs about 0.7 ms of CPU per request here (its client layers, then httpcore's pool,
which scans every connection and polls each idle socket on every request), which caps a
collect process near 1,000 generations/s whatever the model's speed. Generation requests are
one shape (a JSON POST, a JSON answer), so this pool writes the request in one go and parses
the answer (Content-Length, chunked, or until close) in its connection's protocol as the bytes
arrive: no stream buffers and no coroutine per read (a fifth to a third less CPU a request than
asyncio streams, 5,000 in flight). Retries, backoff, the key and the error messages stay the shared
PooledHttp's: `WirePool.post` only raises `WireTimeout` / `WireUnreachable` / `WireTooLarge`
for it to classify.

Bodies are read into one buffer, at most `max_bytes` of them, and a `ByteBudget` shared by
the requests (collect's) bounds how many big answers are held at once: a body that does not
fit waits with its connection's reading paused.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
import time
from typing import Any
from urllib.parse import urlsplit

from gym_metrics._util.http import MAX_ANSWER_BYTES
from gym_metrics.targets._budget import ByteBudget
from gym_metrics.targets._limits import Deadline, Deadlines, Slots
from gym_metrics.targets._sockets import open_connection


class WireTimeout(Exception):
    """No complete answer within the timeout."""


class WireUnreachable(Exception):
    """Connecting, writing or reading failed (refused, reset, closed early)."""


class WireTooLarge(Exception):
    """The answer is larger than the pool's `max_bytes` (announced or sent): not read further."""


_HEADS_KEPT = 64
"""Request heads a pool keeps made (one per URL and headers; a run has one or two)."""
_MAX_HEAD = 1 << 20
"""Bytes of an answer's head (or of a chunk's size line) at most."""


class _Room:
    """What an answer waits for before its body is read: room in the byte budget."""

    def __init__(self, size: int) -> None:
        self.size = size


class _Connection(asyncio.Protocol):
    """One keep-alive connection, one request at a time, its answer parsed as the bytes arrive
    (no stream buffers, no task per read): the head, then a body framed by Content-Length,
    chunks, or the close. `answer` resolves with (status, fields, body), with a `_Room` when
    the budget must make room first (reading is paused until `go_on`), or fails with
    ConnectionError / ValueError / WireTooLarge."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_bytes: int, budget: ByteBudget | None) -> None:
        self.max_bytes, self.budget = max_bytes, budget
        self.loop = loop  # the loop whose create_connection made it, for life
        self.transport: asyncio.Transport | None = None
        self.open = False
        self.answer: asyncio.Future[Any] | None = None
        self.heard = False
        """Whether any byte of the current answer came."""
        self.heard_at = 0.0
        """When the first byte of the current answer came (time.perf_counter)."""
        self.taken = 0
        """Bytes counted in the budget for the current answer (the caller releases them)."""
        self._buffer = bytearray()
        self._state = "idle"
        self._after_room = "idle"
        self._head = b""
        self._status = 0
        self._fields: dict[str, str] = {}
        self._body = bytearray()
        self._left = 0  # body bytes (sized) or chunk bytes (chunked) still to come

    # ------------------------------------------------------------------ the caller's side

    def send(self, request: bytes) -> asyncio.Future[Any]:
        assert self.transport is not None
        self.answer = self.loop.create_future()
        self.heard, self.taken, self._state = False, 0, "head"
        self._body = bytearray()
        self.transport.write(request)
        return self.answer

    def go_on(self) -> asyncio.Future[Any]:
        """Read the body now that the budget took it (after a `_Room` answer)."""
        assert self.transport is not None
        self.answer = self.loop.create_future()
        self._state = self._after_room
        if self.open:
            self.transport.resume_reading()
        try:
            self._advance()
        except (ValueError, WireTooLarge) as exc:
            self._fail(exc)
        if not self.open:  # the server closed while the answer waited: what came is all there is
            self._ended(None)
        return self.answer

    def reusable(self) -> bool:
        return self.open and self._state == "idle" and not self._buffer

    def close(self) -> None:
        self.open = False
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------------ asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport, self.open = transport, True  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.heard:
            self.heard, self.heard_at = True, time.perf_counter()
        self._buffer += data
        try:
            self._advance()
        except (ValueError, WireTooLarge) as exc:
            self._fail(exc)

    def eof_received(self) -> bool:
        self.open = False
        self._ended(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self._ended(exc)

    def _ended(self, exc: Exception | None) -> None:
        """The server closed: a clean close ends a body read until close (a reset cut it: it
        failed, and is retried); any other answer still unread failed (one waiting for budget
        room is decided by `go_on`, from what came)."""
        if self._state == "until_close" and exc is None:
            self._finish(self._body)
        elif self._state != "room":
            self._fail(exc if exc is not None else ConnectionResetError("the server closed the connection"))

    # ------------------------------------------------------------------ parsing

    def _advance(self) -> None:
        buffer = self._buffer
        while True:
            state = self._state
            if state == "head":
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(buffer) > _MAX_HEAD:
                        raise ValueError(f"an answer head of more than {_MAX_HEAD:,} bytes")
                    return
                self._head = bytes(buffer[: end + 4])
                del buffer[: end + 4]
                self._status, self._fields = _head(self._head)
                if 100 <= self._status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
                    if self._status == 101:
                        raise ValueError("101 Switching Protocols to a request that asked for none")
                    continue
                if self._status in (204, 304):  # never a body (RFC 9112 6.3)
                    self._finish(bytearray())
                    return
                if not self._begin_body():
                    return
            elif state == "sized":
                take = min(self._left, len(buffer))
                if take:
                    self._body += buffer[:take]
                    del buffer[:take]
                    self._left -= take
                if self._left:
                    return
                self._finish(self._body)
                return
            elif state == "until_close":
                if len(self._body) + len(buffer) > self.max_bytes:
                    raise WireTooLarge("more than that was sent")
                self._count(len(buffer))
                self._body += buffer
                buffer.clear()
                return
            elif state == "chunk_size":
                end = buffer.find(b"\r\n")
                if end < 0:
                    if len(buffer) > _MAX_HEAD:
                        raise ValueError("a chunk size line too long")
                    return
                size = int(bytes(buffer[:end]).split(b";", 1)[0].strip(), 16)
                del buffer[: end + 2]
                if size < 0:
                    raise ValueError(f"chunk size {size}")
                if len(self._body) + size > self.max_bytes:
                    raise WireTooLarge("more than that was sent")
                self._left, self._state = size, ("chunk" if size else "trailers")
                self._count(size)
            elif state == "chunk":
                if len(buffer) < self._left + 2:
                    if self._left:  # keep the buffer small: move what came into the body
                        take = min(self._left, len(buffer))
                        self._body += buffer[:take]
                        del buffer[:take]
                        self._left -= take
                    return
                self._body += buffer[: self._left]
                if buffer[self._left : self._left + 2] != b"\r\n":
                    raise ValueError("a chunk not ended by CRLF")
                del buffer[: self._left + 2]
                self._left, self._state = 0, "chunk_size"
            elif state == "trailers":
                end = buffer.find(b"\r\n")
                if end < 0:
                    if len(buffer) > _MAX_HEAD:
                        raise ValueError("trailers too long")
                    return
                del buffer[: end + 2]
                if end == 0:
                    self._finish(self._body)
                    return
            else:  # idle or waiting for room: bytes nobody asked for stay buffered
                return

    def _begin_body(self) -> bool:
        """Set up the body's reading; False when the budget must make room first."""
        fields = self._fields
        if "chunked" in fields.get("transfer-encoding", "").lower():
            self._state = "chunk_size"
            return self._room(0)
        if "content-length" not in fields:
            self._state = "until_close"
            return self._room(0)
        size = int(fields["content-length"])
        if not 0 <= size <= self.max_bytes:
            raise WireTooLarge(f"it announces {size:,} bytes") if size > 0 else ValueError(f"Content-Length {size}")
        self._left, self._state = size, "sized"
        return self._room(size)

    def _room(self, size: int) -> bool:
        budget = self.budget
        if budget is None or budget.fits(size):
            self._count(size)
            return True
        self._after_room, self._state = self._state, "room"
        if self.transport is not None:
            self.transport.pause_reading()
        self._resolve(_Room(size))
        return False

    def _count(self, size: int) -> None:
        if self.budget is not None and size:
            self.budget.add(size)
            self.taken += size

    def _finish(self, body: bytearray) -> None:
        self._state = "idle"
        if not _keeps_alive(self._head, self._fields) or not self.open:
            self.close()
        self._resolve((self._status, self._fields, body))

    def _resolve(self, result: Any) -> None:
        answer = self.answer
        if answer is not None and not answer.done():
            answer.set_result(result)

    def _fail(self, exc: BaseException) -> None:
        self._state = "broken"
        answer = self.answer
        if answer is not None and not answer.done():
            answer.set_exception(exc)
        if self.transport is not None and not self.transport.is_closing():
            self.close()


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
        self._idle: list[_Connection] = []
        self._heads: dict[tuple[Any, ...], bytes] = {}
        self._slots = Slots(size)
        self._deadlines = Deadlines(timeout_s)
        self._ssl: ssl_module.SSLContext | None = None

    async def post(
        self, url: str, payload: bytes, headers: dict[str, str], heard: list[float] | None = None
    ) -> tuple[int, dict[str, str], bytes | bytearray]:
        """(status, lower-cased headers, body) of one POST (the body in one buffer, as read);
        `heard` gets when its answer's first byte came (time.perf_counter), for its time to
        first byte."""
        request = self._head_of(url, headers) + b"Content-Length: %d\r\n\r\n" % len(payload) + payload
        await self._slots.take()
        deadline = self._deadlines.start()
        try:
            return await self._exchange(request, deadline, heard)
        except asyncio.CancelledError:
            if self._deadlines.timed_out(deadline):
                raise WireTimeout() from None
            raise
        finally:
            self._deadlines.stop(deadline)
            self._slots.give()

    def _head_of(self, url: str, headers: dict[str, str]) -> bytes:
        """The request line and headers of a POST to `url` (all but Content-Length), made once
        per URL and headers: every generation of a run sends the same."""
        key: tuple[Any, ...] = (url, *headers.items())
        head = self._heads.get(key)
        if head is None:
            parts = urlsplit(url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            lines = [f"POST {target} HTTP/1.1", f"Host: {self.host_header}", *(f"{k}: {v}" for k, v in headers.items())]
            head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
            if len(self._heads) < _HEADS_KEPT:
                self._heads[key] = head
        return head

    async def _exchange(self, request: bytes, deadline: Deadline, heard: list[float] | None = None) -> tuple[int, dict[str, str], bytes | bytearray]:
        while True:
            idle = self._idle_connection()
            reused = idle is not None
            conn = idle if idle is not None else await self._connect()
            try:
                answer = await conn.send(request)
                if isinstance(answer, _Room):
                    await self._wait_for_room(answer.size, deadline)
                    conn.taken += answer.size
                    answer = await conn.go_on()
            except (OSError, ValueError) as exc:
                conn.close()
                if reused and not conn.heard:
                    continue  # the server closed an idle connection: the request never arrived
                raise WireUnreachable(f"{type(exc).__name__}: {exc}") from None
            except BaseException:
                conn.close()
                raise
            finally:
                if self.budget is not None and conn.taken:
                    self.budget.release(conn.taken)
                    conn.taken = 0
            if heard is not None:
                heard.append(conn.heard_at)
            if conn.reusable():
                self._idle.append(conn)
            else:  # bytes past its answer, or not kept alive: closed, not left open unowned
                conn.close()
            return answer

    def _idle_connection(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable():
                return conn
            conn.close()  # closed by its server, or sent bytes nobody asked for
        return None

    async def _wait_for_room(self, size: int, deadline: Deadline) -> None:
        """The budget's wait for room, which does not count against the deadline."""
        assert self.budget is not None
        left = self._deadlines.pause(deadline)  # our own wait: not the server's time
        await self.budget.take(size, self.timeout_s)
        self._deadlines.resume(deadline, left)

    async def _connect(self) -> _Connection:
        if self.tls and self._ssl is None:
            self._ssl = ssl_module.create_default_context()
        loop = self._deadlines.loop  # the running loop (known since post's deadline started)
        try:
            return await open_connection(  # its local ports spread: see _sockets
                loop, lambda: _Connection(loop, self.max_bytes, self.budget), self.host, self.port, self._ssl if self.tls else None
            )
        except OSError as exc:
            raise WireUnreachable(f"{type(exc).__name__}: {exc}") from None

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _keeps_alive(head: bytes, fields: dict[str, str]) -> bool:
    """Whether the connection may carry the next request: HTTP/1.1 without `Connection:
    close`, and a body whose end was known (not read until close)."""
    framed = "content-length" in fields or "transfer-encoding" in fields
    return head.startswith(b"HTTP/1.1") and fields.get("connection", "").lower() != "close" and framed


def _head(head: bytes) -> tuple[int, dict[str, str]]:
    """The status and lower-cased headers of an answer's head (through the blank line)."""
    status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code = rest.split(" ", 1)[0]
    if not version.startswith("HTTP/1.") or not (len(code) == 3 and code.isdigit()):
        raise ValueError(f"not an HTTP/1.x answer: {status_line[:80]!r}")
    fields: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return int(code), fields
