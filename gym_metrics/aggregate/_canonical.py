"""Rows' text as orjson writes it, without parsing them: each task's `sample` is the row minus
its indices and its recording in orjson's form, and a million tasks' samples parsed and dumped
again were the render's largest cost.

`_minify.c` copies each row without whitespace and without those keys and refuses every
row whose text it cannot vouch for (see there); its float tokens are checked here against
orjson's own rendering of the values they read as. A refused row (None) takes the Python path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gym_metrics.rollouts import RECORDING_KEYS, ROLLOUT_KEY, TASK_KEY
from gym_metrics.aggregate.render._texts import Texts, fill, joined, numbers

_minify: Callable[..., tuple[bytes, bytes, bytes, bytes]] | None
try:
    from gym_metrics.aggregate.render._minify import minify as _minify
except ImportError:  # no C compiler at install time: every sample is parsed and dumped
    _minify = None

_DROP = tuple(k.encode() for k in (TASK_KEY, ROLLOUT_KEY, *RECORDING_KEYS))


def sample_texts_of(raws: Sequence[object]) -> list[bytes | None]:
    """Per row (JSON text of an object), orjson.dumps of it parsed minus the index keys and its
    recording (RECORDING_KEYS), or None where that must be made by parsing it (not bytes, or
    refused)."""
    if _minify is None or not raws or set(map(type, raws)) != {bytes}:
        return [None] * len(raws)
    rows = joined(raws)  # type: ignore[arg-type]
    text, bounds, floats, values = _minify(rows.buf, rows.starts, rows.ends, _DROP)
    at = np.frombuffer(bounds, dtype=np.int64).reshape(-1, 2)
    starts = at[:, 0].copy()  # -1: refused
    if values:
        tokens = np.frombuffer(floats, dtype=np.int64).reshape(-1, 3)
        starts[tokens[_differ(Texts(text, tokens[:, 1], tokens[:, 2]), numbers(np.frombuffer(values))), 0]] = -1
    return [text[a:b] if a >= 0 else None for a, b in zip(starts.tolist(), at[:, 1].tolist())]


def _differ(written: Texts, rendered: Texts) -> np.ndarray:
    """Positions where the two columns' texts differ (one comparison when none does)."""
    same = written.lengths() == rendered.lengths()
    if same.all() and fill([b"", b""], [written], len(written)) == fill([b"", b""], [rendered], len(rendered)):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero([a != b for a, b in zip(written.tolist(), rendered.tolist())])


__all__ = ["sample_texts_of"]
