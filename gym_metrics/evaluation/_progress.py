"""Progress of an evaluation (`evaluate`): rows done, failed, rows/s and ETA, redrawn on a
terminal, a line every few seconds otherwise (gym_metrics._util.progress's line, as collect's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from gym_metrics._util.progress import ProgressLine
from gym_metrics.evaluation._result import RowFailure


class RowProgress(ProgressLine):
    """Counts scored rows and failed ones. Not on a terminal, a run shorter than one interval
    prints nothing (the command's summary says it all)."""

    def __init__(self, total: int | None, stream: IO[str] | None = None, log_every_s: float = 5.0) -> None:
        super().__init__(total, stream, log_every_s, name="evaluate")
        self.rows = self.failed = 0
        self._drawn = False

    @property
    def done(self) -> int:
        return self.rows

    def add(self, failed: bool) -> None:
        self.rows += 1
        self.failed += failed
        self.tick()

    def tick(self, force: bool = False) -> None:
        before = self._last
        super().tick(force)
        self._drawn = self._drawn or self._last != before

    def summary(self) -> str:
        return f"{self.head('rows')}, {self.failed:,} failed"

    def close(self) -> None:
        if self.live or self._drawn:
            super().close()


class Tallied:
    """A RowSink that tells `progress` of every row it passes on to `sink`."""

    def __init__(self, sink: Any, progress: RowProgress) -> None:
        self.sink, self.progress = sink, progress

    @property
    def held(self) -> int:
        return int(self.sink.held)

    def add(self, index: int, scores: Mapping[str, Any] | None, failure: RowFailure | None, generated: Mapping[str, Any] | None = None) -> None:
        self.sink.add(index, scores, failure, generated)
        self.progress.add(failure is not None or index in getattr(self.sink, "errors", ()))

    def release(self) -> None:
        self.sink.release()
