"""Give freed heap memory back to the OS, so RSS follows what a run still holds.

glibc keeps freed chunks in its arenas (one per thread that allocated); after a large transient
(a cancelled aggregation, a file's parse scratch) `malloc_trim` returns the free pages. A no-op
where there is no glibc.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable


def _find_malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim  # already loaded in this process: no library search
    except (OSError, AttributeError):
        return None


_malloc_trim = _find_malloc_trim()


def trim_heap() -> None:
    """Return free heap pages to the OS (glibc only)."""
    if _malloc_trim is not None:
        _malloc_trim(0)
