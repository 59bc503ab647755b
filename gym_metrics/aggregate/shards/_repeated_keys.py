"""Repeated (task, rollout) keys across several inputs (rollout files, partials), named by file
and line: the engine's own check sees only the joined columns, whose rows no longer say where
they came from."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from gym_metrics.errors import FieldViolation, InvalidInputError

Held = tuple[int, np.ndarray, np.ndarray, np.ndarray]
"""One input's rows of one agent: (the input's index in `sources`, task, rollout, the rows' labels)."""


def refuse_repeated_keys(sources: Sequence[str], agents: dict[str, list[Held]], label: str = "line", what: str = "input files") -> None:
    """Raise naming up to 10 keys found in more than one input (within one input the engine's
    check names them by line)."""
    violations: list[FieldViolation] = []
    count = 0
    for name, held in agents.items():
        if len(held) < 2:
            continue
        task = np.concatenate([h[1] for h in held])
        rollout = np.concatenate([h[2] for h in held])
        source = np.concatenate([np.full(len(h[1]), h[0]) for h in held])
        line = np.concatenate([h[3] for h in held])
        order = np.lexsort((line, source, rollout, task))
        t, r, f = task[order], rollout[order], source[order]
        shared = np.flatnonzero((t[1:] == t[:-1]) & (r[1:] == r[:-1]) & (f[1:] != f[:-1]))
        count += len(shared)
        for k in shared[: 10 - len(violations)].tolist():
            a, b = order[k], order[k + 1]
            violations.append(FieldViolation(
                "(_ng_task_index, _ng_rollout_index)",
                f"duplicate key (task {t[k]}, rollout {r[k]}) of agent {name!r}, also at {sources[source[a]]} {label} {line[a]}",
                row=int(line[b]), row_name=f"{sources[source[b]]} {label}",
            ))  # fmt: skip
    if count:
        raise InvalidInputError(f"{count} duplicate (task, rollout) keys across the {what}", violations)


def refuse_files_given_twice(paths: Sequence[str | os.PathLike[str]], what: str = "input") -> None:
    """A file named twice (or by two names: a link, another relative path) would count each of
    its rows twice: refused before anything is read. Files that cannot be stat'ed are left to
    the reader's own error."""
    seen: dict[tuple[int, int], int] = {}
    for i, path in enumerate(paths):
        try:
            st = os.stat(path)
        except OSError:
            continue
        first = seen.setdefault((st.st_dev, st.st_ino), i)
        if first != i:
            raise InvalidInputError(
                "a file is given twice: each of its rollouts would count twice",
                [FieldViolation(f"{what}[{i}]", f"{path} is the same file as {what}[{first}] ({paths[first]})")],
            )
