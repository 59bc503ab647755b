"""The `ng_perf` blocks of a rollouts file's rows (turns, tool calls, tokens, wall time: what
`collect --trajectory` writes, and NeMo Gym's collection with observability on), per agent.

The columnar reader leaves nested objects in the text (it only flags the rows holding one), so
they are read here from the file, when asked and only when a row holds one: a byte search
finds the lines with `"ng_perf"`, and only those are parsed.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gym_metrics._util.jsonio import loads
from gym_metrics.errors import InvalidInputError
from gym_metrics.rollouts._columns import RolloutColumns
from gym_metrics.rollouts._reader import BOM, PerfRows, RolloutFile, agent_name, agent_problem
from gym_metrics.rollouts._values import PERF_KEY, ROLLOUT_KEY_ALIASES, TASK_KEY_ALIASES, row_index_value

_NEEDLE = b'"ng_perf"'
_BLOCK_RE = re.compile(re.escape(_NEEDLE) + rb"(?:[ \t\r\n]*:[ \t\r\n]*(\{[^{}]*\}))?")
"""The key, and its value when that is an object holding no other (a flat block)."""
_CHUNK = 64 << 20

PerfBlocks = dict[str, list[dict[str, Any]]]
"""Per agent, the `ng_perf` objects of its rows."""


def holds_perf(agents: Mapping[str, RolloutColumns]) -> bool:
    """Whether a row holds an `ng_perf` object (the reader flags it, for free)."""
    return any(c.non_numeric is not None and PERF_KEY in c.non_numeric and bool(c.non_numeric[PERF_KEY].any()) for c in agents.values())


def perf_blocks(rollouts: RolloutFile) -> PerfBlocks:
    """The `ng_perf` blocks of `rollouts`' rows: those it carries (`rollouts.perf`, from
    partials), else read from its sources when a row holds one, and kept."""
    if rollouts.perf is None:
        found: PerfBlocks = {}
        if holds_perf(rollouts.agents):
            for s in rollouts.sources:
                add_perf_blocks(found, s.path, s.default_agent, s.span, s.first_line, s.bad_lines, s.perf_rows)
        rollouts.perf = found
    return rollouts.perf


def add_perf_blocks(
    found: PerfBlocks, path: str | Path, default_agent: str | None, span: tuple[int, int] | None = None,
    first_line: int = 1, bad_lines: Collection[int] = (), rows: PerfRows | None = None,
) -> None:  # fmt: skip
    """The blocks of the rollout lines of `path` (of its byte range `span`, whose first line is
    numbered `first_line`) into `found`. With `rows` (what the reader flagged) only those lines
    are read (_flagged); without, every line holding the key is parsed and one that is not a
    rollout with its agent and indices, or is in `bad_lines`, is left out, as aggregation
    leaves it."""
    with open(path, "rb") as f:
        if not f.seek(0, 2):
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as text:
            first, stop = span if span is not None else (0, len(text))
            if rows is not None:
                _flagged(found, text, first, stop, first_line, rows)
                return
            line, counted = first_line, first
            at = text.find(_NEEDLE, first, stop)
            while at >= 0:
                start = max(text.rfind(b"\n", first, at) + 1, first)
                end = text.find(b"\n", at, stop)
                end = stop if end < 0 else end
                if bad_lines:  # (line numbers only when they are used)
                    line += text[counted:start].count(b"\n")
                    counted = start
                agent, perf = (None, {}) if line in bad_lines else _perf_of(_line(text, start, end), default_agent)
                if agent is not None:
                    found.setdefault(agent, []).append(perf)
                at = text.find(_NEEDLE, end, stop)


def _flagged(found: PerfBlocks, text: mmap.mmap, first: int, stop: int, first_line: int, rows: PerfRows) -> None:
    """The blocks of the lines `rows` names (the reader's rollouts holding an `ng_perf`), in
    bulk: the lines are told apart by their newlines (numpy over the file), and of a line that
    names the key once only its object is parsed, all of them in one call when they are flat
    (else one at a time, or from the whole line)."""
    if not len(rows.lines):
        return
    newlines = np.concatenate([np.zeros(0, np.int64)] + [  # a chunk at a time: no temporary the file's size
        np.flatnonzero(np.frombuffer(text, np.uint8, min(lo + _CHUNK, stop) - lo, lo) == 10) + lo for lo in range(first, stop, _CHUNK)
    ])  # fmt: skip
    found_at = [(m.start(), m.start(1), m.end(1)) for m in _BLOCK_RE.finditer(text, first, stop)]
    at, brace, close = np.array(found_at, np.int64).reshape(-1, 3).T
    index = np.searchsorted(newlines, at)  # each occurrence's line, from 0
    once = np.ones(len(at), bool)  # the line names the key once
    once[1:] &= index[1:] != index[:-1]
    once[:-1] &= index[:-1] != index[1:]
    wanted = np.searchsorted(rows.lines, index + first_line)
    wanted[wanted == len(rows.lines)] = 0
    held = rows.lines[wanted] == index + first_line
    held[1:] &= index[1:] != index[:-1]  # a line once, at its first occurrence
    flat = held & once & (brace >= 0)
    texts = [text[a:b] for a, b in zip(brace[flat].tolist(), close[flat].tolist())]
    try:
        parsed = orjson.loads(b"[" + b",".join(texts) + b"]")
    except orjson.JSONDecodeError:  # a NaN in one of them: each alone
        parsed = [_parsed(t) for t in texts]
    blocks: list[Any] = [None] * len(at)
    for i, block in zip(np.flatnonzero(flat).tolist(), parsed):
        blocks[i] = block
    for i in np.flatnonzero(held).tolist():
        block = blocks[i]
        if not isinstance(block, dict):  # nested, or the key named twice: from the whole line
            line = int(index[i])
            start, end = (int(newlines[line - 1]) + 1 if line > 0 else first), (int(newlines[line]) if line < len(newlines) else stop)
            block = loads(_line(text, start, end)).get(PERF_KEY)
        if isinstance(block, dict):
            found.setdefault(rows.names[int(rows.agent[wanted[i]])], []).append(block)


def _line(text: mmap.mmap, start: int, end: int) -> bytes:
    """A line's bytes, the file's byte-order mark left out."""
    return text[start:end].removeprefix(BOM) if start == 0 else text[start:end]


def _parsed(block: bytes) -> Any:
    try:
        return orjson.loads(block)
    except orjson.JSONDecodeError:
        return None


def _perf_of(line: bytes, default_agent: str | None) -> tuple[str | None, dict[str, Any]]:
    """(agent, ng_perf) of a rollout line holding one; (None, {}) for any other line."""
    try:
        row = loads(line)
        if not isinstance(row, dict) or not isinstance(row.get(PERF_KEY), dict) or agent_problem(row, default_agent):
            return None, {}
        row_index_value(row, TASK_KEY_ALIASES), row_index_value(row, ROLLOUT_KEY_ALIASES)
    except (ValueError, InvalidInputError):
        return None, {}
    name = agent_name(row)
    return name if name is not None else default_agent, row[PERF_KEY]


__all__ = ["PERF_KEY", "PerfBlocks", "add_perf_blocks", "holds_perf", "perf_blocks"]
