"""The `ng_perf` blocks of a rollouts file's rows (turns, tool calls, tokens, wall time: what
`collect --trajectory` writes, and NeMo Gym's collection with observability on), per agent.

The columnar reader leaves nested objects in the text (it only flags the rows holding one), so
they are read here from the file, when asked and only when a row holds one: a byte search
finds the lines with `"ng_perf"`, and only those are parsed.
"""

from __future__ import annotations

import mmap
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from gym_metrics._util.jsonio import loads
from gym_metrics.errors import InvalidInputError
from gym_metrics.rollouts._columns import RolloutColumns
from gym_metrics.rollouts._reader import RolloutFile, agent_name, agent_problem
from gym_metrics.rollouts._values import ROLLOUT_KEY_ALIASES, TASK_KEY_ALIASES, row_index_value

PERF_KEY = "ng_perf"
_NEEDLE = b'"ng_perf"'
_BOM = b"\xef\xbb\xbf"

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
            for source in rollouts.sources:
                add_perf_blocks(found, source.path, source.default_agent, source.span, source.first_line, source.bad_lines)
        rollouts.perf = found
    return rollouts.perf


def add_perf_blocks(
    found: PerfBlocks, path: str | Path, default_agent: str | None, span: tuple[int, int] | None = None,
    first_line: int = 1, bad_lines: Collection[int] = (),
) -> None:  # fmt: skip
    """The blocks of the rollout lines of `path` (of its byte range `span`, whose first line is
    numbered `first_line`) into `found`; a line that is not a rollout with its agent and
    indices, or is in `bad_lines`, is left out, as aggregation leaves it."""
    with open(path, "rb") as f:
        if not f.seek(0, 2):
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as text:
            first, stop = span if span is not None else (0, len(text))
            line, counted = first_line, first
            at = text.find(_NEEDLE, first, stop)
            while at >= 0:
                start = max(text.rfind(b"\n", first, at) + 1, first)
                end = text.find(b"\n", at, stop)
                end = stop if end < 0 else end
                if bad_lines:  # (line numbers only when some line was left out)
                    line += text[counted:start].count(b"\n")
                    counted = start
                raw = text[start:end].removeprefix(_BOM) if start == 0 else text[start:end]
                agent, perf = (None, {}) if line in bad_lines else _perf_of(raw, default_agent)
                if agent is not None:
                    found.setdefault(agent, []).append(perf)
                at = text.find(_NEEDLE, end, stop)


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
