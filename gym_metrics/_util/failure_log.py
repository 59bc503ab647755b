"""A rate-limited account of why completions could not be scored, for the trainer adaptors
and the HTTP reward door (a failed completion is reported beside its reward, but a trainer's
own log should say why too, once, not once per call)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("gym_metrics.integrations")


class FailureLog:
    """Says why completions could not be scored, without flooding a trainer's log: the first
    failure's reason at once, then at most one line every `every_s` seconds with how many
    failed since (a training step makes thousands of calls)."""

    def __init__(self, who: str, every_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.who, self.every_s, self._clock = who, every_s, clock
        self._last: float | None = None
        self._since = 0

    def note(self, failed: int, total: int, reason: str) -> bool:
        """Count `failed` of `total` completions, `reason` the first one's; True when it logged."""
        if not failed:
            return False
        self._since += failed
        now = self._clock()
        if self._last is not None and now - self._last < self.every_s:
            return False
        log.warning("%s: %d of %d completions could not be scored (%d since the last such line); first: %s",
                    self.who, failed, total, self._since, reason)  # fmt: skip
        self._last, self._since = now, 0
        return True


__all__ = ["FailureLog"]
