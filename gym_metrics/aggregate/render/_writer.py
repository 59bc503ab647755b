"""A file writer whose writes happen in a thread of their own.

A write releases the GIL, so while the kernel copies the last blobs into the page cache the
next ones are rendered: the 200 MB of a million-rollout metrics file cost the renderer nothing.
"""

from __future__ import annotations

import errno

import io
import queue
import threading
from typing import IO, Any


class BackgroundWriter(io.RawIOBase):
    """Writes in a thread of its own (a write releases the GIL), so the next blobs are rendered
    while the kernel copies the last ones: at most `depth` blobs of about 1 MB wait in between."""

    def __init__(self, raw: IO[bytes], depth: int = 8, block: int = 1 << 20) -> None:
        super().__init__()
        self._raw, self._block = raw, block
        self._pending: list[bytes] = []
        self._size = 0
        self._queue: queue.Queue[bytes | None] = queue.Queue(depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="gym-metrics-write", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while (blob := self._queue.get()) is not None:
            if self._error is None:
                try:
                    _write_all(self._raw, blob)
                except BaseException as exc:  # raised in the writing thread at close
                    self._error = exc
            self._queue.task_done()
        self._queue.task_done()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._raw.fileno()

    @property
    def name(self) -> Any:
        return self._raw.name

    def flush(self) -> None:
        """Wait until every blob written so far is in the file."""
        if self._pending:
            self._queue.put(b"".join(self._pending))
            self._pending, self._size = [], 0
        self._queue.join()
        if self._error is not None:
            raise self._error

    def write(self, blob: Any) -> int:
        self._pending.append(blob)
        self._size += len(blob)
        if self._size >= self._block:
            self._queue.put(b"".join(self._pending))
            self._pending, self._size = [], 0
        return len(blob)

    def close(self) -> None:
        if self.closed:
            return
        if self._pending:
            self._queue.put(b"".join(self._pending))
            self._pending = []
        self._queue.put(None)
        self._thread.join()
        super().close()
        if self._error is not None:
            raise self._error


def _write_all(raw: Any, blob: bytes) -> None:
    """Every byte of `blob`: an unbuffered write may take fewer (a full disk takes what fits and
    says so only by its count; the next write raises ENOSPC), which went unnoticed and left a
    short file renamed into place."""
    view = memoryview(blob)
    while view:
        written = raw.write(view)
        if not written:
            raise OSError(errno.ENOSPC, f"could not write {len(view):,} more bytes to {getattr(raw, 'name', 'the file')}")
        view = view[written:]
