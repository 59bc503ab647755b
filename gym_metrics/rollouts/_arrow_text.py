"""What the fast reader's columns cannot tell, read off the rows' JSON text: whether a value
pyarrow typed as a float was written as an int (`4` beside `4.5`), whether a null reward was
written `"reward": null` or left out; and the shown columns (see _shown) the columns can tell."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from gym_metrics.rollouts._columns import BufferRows, NumericField, ShownField, ValueKind
from gym_metrics.rollouts._shown import FALSE, MAX_EXACT_INT, NULL, TRUE


class Text:
    """The JSON text of the rows of a table, for what the columns cannot tell."""

    def __init__(self, all_lines: BufferRows, lines: np.ndarray) -> None:
        self.buf = all_lines.buffer
        self.starts, self.ends = all_lines.starts[lines], all_lines.ends[lines]

    def has(self, keys: list[str], value: str, rows: np.ndarray | None = None) -> bool:
        """Whether some row (of `rows`, default all) holds one of `keys` with a value matching
        `value` (a regular expression), searched anywhere in the row: a nested key of the same
        name can only send the rows line by line, never hide a match. A few rows are searched
        one by one; the whole text in one pass of pyarrow's RE2 (GIL released)."""
        if not len(self.starts) or not keys:
            return False
        pattern = '"(?:' + "|".join(map(_literal, keys)) + ')"\\s*:\\s*' + value
        if rows is not None and len(rows) <= _FEW_ROWS:
            compiled = re.compile(pattern.encode())
            bounds = zip(self.starts[rows].tolist(), self.ends[rows].tolist())
            return any(compiled.search(self.buf, a, b) for a, b in bounds)
        import pyarrow as pa
        import pyarrow.compute as pc

        span = np.array([self.starts[0], self.ends[-1]], dtype=np.int64).tobytes()
        text = pa.Array.from_buffers(pa.large_binary(), 1, [None, pa.py_buffer(span), pa.py_buffer(self.buf)])
        return bool(pc.match_substring_regex(text, pattern)[0].as_py())


def _literal(key: str) -> str:
    """A _PLAIN_KEY as a pattern both Python's re and RE2 read literally."""
    return "".join(c if c.isalnum() or c == "_" else f"[{c}]" for c in key)


_FEW_ROWS = 2000
_INT_LITERAL = "-?[0-9]+[^0-9.eE]"
"""A JSON number written as an integer (a valid row always has a `,` or `}` after it)."""
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.:/@%+\- ]+")
"""Names a file writes as they are (no JSON escapes), so the text can be searched for them."""


def exactly_typed(text: Text, fields: dict[str, NumericField], usage: dict[str, NumericField]) -> bool:
    """Whether every value shows as the row typed it. pyarrow reads `4` beside `4.5` as 4.0 (the
    row's int would be shown as a float), and ints beyond 2**53 lose digits in float64: such
    rows go line by line. A float column is searched only where a value is integral, all such
    columns in one pass."""
    whole: list[str] = []
    for group in (fields, usage):
        for name, col in group.items():
            finite = col.present & np.isfinite(col.values)
            if col.kind is not ValueKind.FLOAT:
                if finite.any() and np.abs(col.values[finite]).max() >= MAX_EXACT_INT:
                    return False
                continue
            integral = np.flatnonzero(finite & (col.values == np.floor(col.values)))
            if not len(integral):
                continue
            if not _PLAIN_KEY.fullmatch(name):
                return False
            if len(integral) > _FEW_ROWS:
                whole.append(name)
            elif text.has([name], _INT_LITERAL, integral):
                return False
    return not text.has(sorted(set(whole)), _INT_LITERAL)


def reward_readable(text: Text, columns: dict[str, Any], usage: dict[str, NumericField]) -> bool:
    """Whether `reward` can be shown from the columns: a number or bool column (or none at all)
    where a null is an absent key, not `"reward": null` (a column cannot tell them apart), and
    no reward inside `response.usage` (which rollout_infos would show instead)."""
    import pyarrow as pa

    if "reward" in usage or _usage_has_key(columns.get("response"), "reward"):
        return False
    column = columns.get("reward")
    if column is None:
        return True
    numeric = pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_boolean(column.type)
    if not (numeric or pa.types.is_null(column.type)):
        return False  # text and objects are shown as written: line by line
    return not column.null_count or not text.has(["reward"], "null")


def _usage_has_key(response: Any, key: str) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    if response is None or not pa.types.is_struct(response.type) or response.type.get_field_index("usage") < 0:
        return False
    usage = pc.struct_field(response, "usage")
    return bool(pa.types.is_struct(usage.type) and usage.type.get_field_index(key) >= 0)


def shown_reward(reward: NumericField | None) -> dict[str, ShownField]:
    """A reward column of bools, or holding NaN or +/-inf: rollout_infos show `true` / `false`
    as written and NaN / inf as null (as JSON carries them to NeMo Gym), numbers as numbers."""
    if reward is None:
        return {}
    bad = reward.present & ~np.isfinite(reward.values)
    if not bad.any() and reward.kind is not ValueKind.BOOL:
        return {}
    shown = ShownField.plain(reward.values, reward.present, reward.kind is not ValueKind.FLOAT)
    shown.present = reward.present.copy()
    shown.text = np.full(len(bad), None, dtype=object)
    if reward.kind is ValueKind.BOOL:
        shown.text[shown.ints] = np.where(reward.values[shown.ints] != 0, TRUE, FALSE)
        shown.ints = np.zeros(len(bad), dtype=bool)
    shown.text[bad] = NULL
    return {"reward": shown}


def shown_clash(top: NumericField, usage: NumericField) -> ShownField:
    """A field both the row and its usage hold: the row's finite number, else usage's."""
    top_ok = top.present & np.isfinite(top.values)
    usage_ok = usage.present & np.isfinite(usage.values)
    values = np.where(top_ok, top.values, usage.values)
    ints = np.where(top_ok, top.kind is not ValueKind.FLOAT, usage.kind is not ValueKind.FLOAT)
    present = top_ok | usage_ok
    return ShownField(values, present, ints & present)


__all__ = ["Text", "exactly_typed", "reward_readable", "shown_clash", "shown_reward"]
