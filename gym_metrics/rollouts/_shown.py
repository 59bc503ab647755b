"""How rollout_infos show a field where that is not what its stats column holds (NeMo Gym's
`RewardProfiler.rollout_info_from_result`, on rows as they reach its `/aggregate_metrics` route:
as JSON, so NaN and +/-inf arrive as null).

- `reward` is shown as the row holds it, whatever its JSON type (`true`, `"1.0"`, `null`, an
  object); NaN and +/-inf as `null`; a number in `response.usage.reward` instead, when there is
  one.
- Any other field is shown only when it is a finite number or a bool (bool as 0 / 1), ints as
  ints: the row's own top-level value first, else the one in `response.usage`. (The stats use
  usage's value when both have the key: NeMo Gym's `row | usage`.)

A column of shown values exists only for the fields where a row needs it (rarely any); every
other field is shown from its stats column: finite values only, as integers when the column's
values were all ints or bools.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

ABSENT: Any = object()
"""A field the row's rollout_info leaves out."""

MAX_EXACT_INT = 2**53
"""Integers beyond this lose digits in a float64 column: they are shown from their text."""

NULL, TRUE, FALSE = b"null", b"true", b"false"


@dataclass
class ShownField:
    """One field as rollout_infos show it, row by row."""

    values: np.ndarray
    """float64: the number shown (where `present` and no `text`)."""
    present: np.ndarray
    """bool: the row's rollout_info has the key."""
    ints: np.ndarray
    """bool: shown as an integer (the row held an int or a bool)."""
    text: np.ndarray | None = None
    """object: JSON text shown as is (a raw reward, a huge int), None where a number is shown."""

    def take(self, idx: np.ndarray) -> ShownField:
        text = self.text[idx] if self.text is not None else None
        return ShownField(self.values[idx], self.present[idx], self.ints[idx], text)

    @classmethod
    def plain(cls, values: np.ndarray, present: np.ndarray, ints: bool | np.ndarray) -> ShownField:
        """What a stats column shows: its finite values, as integers where `ints`."""
        ok = present & np.isfinite(values)
        return cls(values, ok, ok & ints)


def concat_shown(parts: Sequence[ShownField]) -> ShownField:
    texts = None
    if any(p.text is not None for p in parts):
        texts = np.concatenate([p.text if p.text is not None else np.full(len(p.values), None, object) for p in parts])
    return ShownField(
        np.concatenate([p.values for p in parts]),
        np.concatenate([p.present for p in parts]),
        np.concatenate([p.ints for p in parts]),
        texts,
    )


def take_shown(shown: dict[str, ShownField] | None, idx: np.ndarray) -> dict[str, ShownField] | None:
    if not shown:
        return None
    return {k: v.take(idx) for k, v in shown.items()}


def finite_number(value: Any) -> bool:
    """A JSON number or bool NeMo Gym would show (NaN and +/-inf travel as null)."""
    if isinstance(value, bool) or isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _plain_reward(value: Any) -> bool:
    """A reward the stats column shows as the row holds it: a finite number, not a bool."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def shown_overrides(row: Mapping[str, Any], skip: Callable[[str], bool]) -> list[tuple[str, Any]]:
    """(field, shown value or ABSENT) where this row's rollout_info may differ from its stats
    values: a `reward` that is not a plain finite number (or one `response.usage` also holds),
    and a top-level number under a name `response.usage` also has. `skip(name)`: names that are
    never fields (indices, the mask flag, `_` keys)."""
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    if not isinstance(usage, Mapping):
        usage = {}
    out: list[tuple[str, Any]] = []
    if "reward" in usage or ("reward" in row and not _plain_reward(row["reward"])):
        in_usage = usage.get("reward", ABSENT)
        if in_usage is not ABSENT and finite_number(in_usage):
            out.append(("reward", int(in_usage) if isinstance(in_usage, bool) else in_usage))
        else:
            out.append(("reward", row.get("reward", ABSENT) if "reward" in row else ABSENT))
    for key in usage:
        if key == "reward" or skip(key) or key not in row:
            continue
        value = row[key]
        if finite_number(value):
            out.append((key, int(value) if isinstance(value, bool) else value))
    return out


def json_text(value: Any) -> bytes:
    """A raw value as JSON text; NaN and +/-inf (anywhere in it) as null, as they travel to
    NeMo Gym."""
    if value is True or value is False:
        return TRUE if value else FALSE
    try:
        return orjson.dumps(value)  # writes non-finite floats as null
    except (TypeError, orjson.JSONEncodeError):  # an int beyond 64 bits: the stdlib writes it exactly
        return json.dumps(value, default=str).encode()


def apply_overrides(base: ShownField, rows: Mapping[int, Any]) -> ShownField:
    """`base` (what the stats column shows) with the given rows' shown values put in."""
    values, present, ints = base.values.copy(), base.present.copy(), base.ints.copy()
    text = base.text.copy() if base.text is not None else None
    for i, value in rows.items():
        if value is ABSENT:
            present[i] = False
            continue
        present[i] = True
        if _plain_reward(value) and not (isinstance(value, int) and abs(value) >= MAX_EXACT_INT):
            values[i], ints[i] = float(value), isinstance(value, int)
            if text is not None:
                text[i] = None
            continue
        if text is None:
            text = np.full(len(values), None, dtype=object)
        text[i] = json_text(value)
        values[i], ints[i] = math.nan, False
    return ShownField(values, present, ints, text)


__all__ = [
    "ABSENT",
    "MAX_EXACT_INT",
    "ShownField",
    "apply_overrides",
    "concat_shown",
    "finite_number",
    "json_text",
    "shown_overrides",
    "take_shown",
]
