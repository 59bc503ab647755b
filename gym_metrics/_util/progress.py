"""A run's progress line, shared by collect and evaluate: redrawn in place on a terminal (count,
rate, ETA), a log line every few seconds otherwise."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import IO


class ProgressLine:
    """Counts what is done and draws `summary()`; `tick()` after each change (cheap: it draws
    only when the interval has passed), `close()` at the end (the last line, always)."""

    def __init__(self, total: int | None, stream: IO[str] | None = None, log_every_s: float = 10.0, *, name: str = "collect") -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = 0.2 if self.live else log_every_s
        self.name = name
        """The prefix of a log line (`collect: ...`); a terminal's line has none."""
        self.started = time.monotonic()
        self._last = self.started

    @property
    def done(self) -> int:
        raise NotImplementedError

    def summary(self) -> str:
        raise NotImplementedError

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        line = self.summary()
        if self.live:
            self.stream.write("\r\x1b[2K" + line[:160])
        else:
            self.stream.write(f"{self.name}: {line}\n")
        self.stream.flush()

    def close(self) -> None:
        self.tick(force=True)
        if self.live:
            self.stream.write("\n")
            self.stream.flush()

    def elapsed(self) -> float:
        return max(time.monotonic() - self.started, 1e-9)

    def head(self, unit: str) -> str:
        """`[####      ] 40/100 rows, 12/s, ETA 5s` (no bar nor ETA without a total)."""
        done, elapsed = self.done, self.elapsed()
        rate = done / elapsed
        shown = f"{rate:,.1f}" if rate < 10 else f"{rate:,.0f}"
        if not self.total or done > self.total:  # an estimate fell short: no bar is better than a wrong one
            return f"{done:,} {unit}, {shown}/s"
        bar = "#" * int(min(done / self.total, 1.0) * 20)
        eta = f", ETA {format_seconds((self.total - done) / rate)}" if 0 < done < self.total else ""
        return f"[{bar:<20}] {done:,}/{self.total:,} {unit}, {shown}/s{eta}"


def format_seconds(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


EXACT_COUNT_BYTES = 64 << 20
"""Files up to this size have their lines counted (about 40 ms from the page cache); bigger
ones are sampled."""

SAMPLES, SAMPLE_BYTES = 16, 256 << 10


def estimate_lines(path: Path) -> int | None:
    """Lines of a file, for a progress bar: counted for files up to 64 MiB, else the file size
    over the mean line length of 16 windows spread over it (a first line of several MB, a task
    with an image, misled an estimate from the head alone by orders of magnitude). None for an
    empty file."""
    size = path.stat().st_size
    if not size:
        return None
    with path.open("rb") as f:
        if size <= EXACT_COUNT_BYTES:
            lines = last = 0
            while chunk := f.read(8 << 20):
                lines += chunk.count(b"\n")
                last = chunk[-1]
            return lines + (last != ord("\n"))
        newlines = 0
        for i in range(SAMPLES):
            f.seek((size - SAMPLE_BYTES) * i // (SAMPLES - 1))
            newlines += f.read(SAMPLE_BYTES).count(b"\n")
    return max(1, round(size * newlines / (SAMPLES * SAMPLE_BYTES)))
