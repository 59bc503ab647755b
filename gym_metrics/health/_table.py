"""A run's digests as columns: what each part of a run (a byte range a worker checked) sends
back and what the summary reads, without one object per rollout: keys in lists, counts in one
numpy array, findings and error statuses only where there are some, the unobserved checks as a
code into the few sets that occur, a rollout id only where it is not `<task>-<rollout>`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gym_metrics.health._checks import Digest

NUMBERS = ("calls_seen", "policy_calls_observed", "model_calls", "successful_calls", "call_errors", "ended_on_error", "duplicated_calls",
           "usage_prompt", "usage_completion", "capture_prompt", "capture_completion")  # fmt: skip
"""A digest's counts, in the order of the table's `numbers` columns."""
_COLUMN = {name: i for i, name in enumerate(NUMBERS)}


def numbers_array(flat: list[int], rows: int) -> np.ndarray:
    """(rows, len(NUMBERS)) int64, or Python ints where a count does not fit (sums stay exact)."""
    try:
        return exact(np.array(flat, dtype=np.int64).reshape(rows, len(NUMBERS)))
    except OverflowError:
        return np.array(flat, dtype=object).reshape(rows, len(NUMBERS))


def exact(numbers: np.ndarray) -> np.ndarray:
    """`numbers`, as Python ints when a column's sum could overflow int64."""
    if numbers.dtype != object and len(numbers) and int(np.abs(numbers).max()) * len(numbers) >= 2**63:
        return numbers.astype(object)
    return numbers


@dataclass
class Table:
    """Digests as columns, in the run's order (a part of a run, or the whole run)."""

    task: list[Any] = field(default_factory=list)
    rollout: list[Any] = field(default_factory=list)
    stage: list[Any] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    """The rollout id where it is not f"{task}-{rollout}" (None where it is)."""
    agent: list[str | None] = field(default_factory=list)
    """agent_ref.name of each row (one string object per name), None where the row names none."""
    unobserved: list[int] = field(default_factory=list)
    """Per row, its unobserved checks as a position in `sets`."""
    sets: list[tuple[str, ...]] = field(default_factory=list)
    findings: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    statuses: dict[int, dict[str, int]] = field(default_factory=dict)
    flat: list[int] = field(default_factory=list)
    """NUMBERS of each row, one after another (until `freeze` makes `numbers` of them)."""
    numbers: np.ndarray = field(default_factory=lambda: np.zeros((0, len(NUMBERS)), np.int64))
    _codes: dict[tuple[str, ...], int] = field(default_factory=dict)
    _names: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.task)

    def add(self, d: Digest, agent: str | None = None) -> None:
        row = len(self.task)
        self.task.append(d.task)
        self.rollout.append(d.rollout)
        self.stage.append(d.stage)
        self.ids.append(None if d.rollout_id == f"{d.task}-{d.rollout}" else d.rollout_id)
        self.agent.append(None if agent is None else self._names.setdefault(agent, agent))
        key = tuple(d.unobserved)
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self.sets)
            self.sets.append(key)
        self.unobserved.append(code)
        if d.findings:
            self.findings[row] = d.findings
        if d.errors_by_status:
            self.statuses[row] = d.errors_by_status
        self.flat += (d.calls_seen, d.policy_calls_observed, d.model_calls, d.successful_calls, d.call_errors, d.ended_on_error,
                      d.duplicated_calls, d.usage_prompt, d.usage_completion, d.capture_prompt, d.capture_completion)  # fmt: skip

    def put(self, row: int, d: Digest) -> None:
        """Row `row` replaced by `d` (its agent kept)."""
        self.task[row], self.rollout[row], self.stage[row] = d.task, d.rollout, d.stage
        self.ids[row] = None if d.rollout_id == f"{d.task}-{d.rollout}" else d.rollout_id
        key = tuple(d.unobserved)
        if key not in self._codes:
            self._codes[key] = len(self.sets)
            self.sets.append(key)
        self.unobserved[row] = self._codes[key]
        self.findings.pop(row, None)
        if d.findings:
            self.findings[row] = d.findings
        self.numbers[row] = [getattr(d, n) for n in NUMBERS]

    def freeze(self) -> Table:
        """`flat` made the `numbers` array (what is sent between processes and summed)."""
        if self.flat or not len(self.numbers):
            self.numbers = numbers_array([int(v) for v in self.flat], len(self.task))
            self.flat = []
        return self

    def rollout_id(self, row: int) -> str:
        given = self.ids[row]
        return given if given is not None else f"{self.task[row]}-{self.rollout[row]}"

    def column(self, name: str) -> np.ndarray:
        return self.numbers[:, _COLUMN[name]]

    def digest(self, row: int) -> Digest:
        seen, observed, calls, successful, errors, ended, duplicated, prompt, completion, captured_prompt, captured_completion = (
            int(v) for v in self.numbers[row].tolist())
        return Digest(self.task[row], self.rollout[row], self.stage[row], self.rollout_id(row), list(self.findings.get(row, ())),
                      list(self.sets[self.unobserved[row]]), bool(seen), bool(observed), calls, successful, errors,
                      dict(self.statuses.get(row, {})), bool(ended), duplicated, prompt, completion, captured_prompt, captured_completion)  # fmt: skip

    @classmethod
    def of(cls, digests: Iterable[Digest]) -> Table:
        table = cls()
        for d in digests:
            table.add(d)
        return table.freeze()

    @classmethod
    def concat(cls, parts: Iterable[Table]) -> Table:
        """The parts one after another (each frozen), as one table; each part is let go once
        added (a run's parts are not all held twice)."""
        out = cls()
        arrays = []
        for part in parts:
            base = len(out.task)
            remap = [out._codes.setdefault(s, len(out._codes)) for s in part.sets]
            out.sets = list(out._codes)
            out.task += part.task
            out.rollout += part.rollout
            out.stage += part.stage
            out.ids += part.ids
            out.agent += [None if a is None else out._names.setdefault(a, a) for a in part.agent]
            out.unobserved += np.asarray(remap, dtype=np.int64)[np.asarray(part.unobserved, dtype=np.int64)].tolist() if part.unobserved else []
            out.findings.update((base + r, f) for r, f in part.findings.items())
            out.statuses.update((base + r, s) for r, s in part.statuses.items())
            if len(part.numbers):
                arrays.append(part.numbers)
        if arrays:
            out.numbers = exact(np.concatenate(arrays) if len({a.dtype for a in arrays}) == 1 else np.concatenate([a.astype(object) for a in arrays]))
        return out
