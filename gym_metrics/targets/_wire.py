"""A lean HTTP/1.1 keep-alive connection pool for policy calls at collect's rates.

httpx costs about 0.7 ms of CPU per request here (its client layers, then httpcore's pool,
which scans every connection and polls each idle socket on every request), which caps a
collect process near 1,000 generations/s whatever the model's speed. Generation requests are
one shape (a JSON POST, a JSON answer), so this pool writes the request in one go and reads
the answer (Content-Length, chunked, or until close) straight from asyncio streams. Retries,
backoff, the key and the error messages stay the shared PooledHttp's: `WirePool.post` only
raises `WireTimeout` / `WireUnreachable` for it to classify.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
from urllib.parse import urlsplit


class WireTimeout(Exception):
    """No complete answer within the timeout."""


class WireUnreachable(Exception):
    """Connecting, writing or reading failed (refused, reset, closed early)."""


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
MAX_ANSWER_BYTES = 64 << 20
"""A model's answer is a few KB to a few MB: a server announcing or sending more is refused
(a bounded read, whatever the server does)."""
_timeout = getattr(asyncio, "timeout", None)


class WirePool:
    """Keep-alive connections to one `scheme://host:port`, at most `size` requests at once.
    A connection goes back to the pool only after a complete answer that allows it."""

    def __init__(self, base_url: str, size: int, timeout_s: float) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        self.timeout_s = timeout_s
        self._size = size
        self._idle: list[Connection] = []
        self._semaphore: asyncio.Semaphore | None = None
        self._ssl: ssl_module.SSLContext | None = None

    async def post(self, url: str, payload: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """(status, lower-cased headers, body) of one POST."""
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
                    async with _timeout(self.timeout_s):
                        return await self._exchange(request)
                return await asyncio.wait_for(self._exchange(request), self.timeout_s)
            except asyncio.TimeoutError:
                raise WireTimeout() from None

    async def _exchange(self, request: bytes) -> tuple[int, dict[str, str], bytes]:
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
                status, fields, body = await _answer(reader, head)
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


async def _answer(reader: asyncio.StreamReader, head: bytes) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of an answer whose head (through the blank line) is read."""
    status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
    version, code, *_ = status_line.split(" ", 2)
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x answer: {status_line[:80]!r}")
    fields: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    if "chunked" in fields.get("transfer-encoding", "").lower():
        return int(code), fields, await _chunked(reader)
    if "content-length" in fields:
        return int(code), fields, await reader.readexactly(_bounded(int(fields["content-length"])))
    body = await reader.read(MAX_ANSWER_BYTES + 1)  # until the server closes
    while len(body) <= MAX_ANSWER_BYTES and (more := await reader.read(MAX_ANSWER_BYTES + 1 - len(body))):
        body += more
    return int(code), fields, body[: _bounded(len(body))]


def _bounded(size: int) -> int:
    if not 0 <= size <= MAX_ANSWER_BYTES:
        raise ValueError(f"an answer of {size} bytes (at most {MAX_ANSWER_BYTES} are read)")
    return size


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
        total = _bounded(total + size)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the blank line
                pass
            return b"".join(parts)
        parts.append((await reader.readexactly(size + 2))[:-2])
