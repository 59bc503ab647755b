"""Task rows written to a file, by one process or several: each worker generates a contiguous
slice of the entries and writes its own part, and the parts are joined in order, so the file is
byte for byte the one a single process writes (an entry depends on its index alone: reasoning-gym
seeds each from the dataset's seed plus its index).

Generation is the cost (from 30 us an entry to a second for the hardest puzzles), and it is
pure Python: only processes run it side by side."""

from __future__ import annotations

import multiprocessing
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gym_metrics._util.atomic import written_atomically
from gym_metrics.ecosystems.reasoning_gym._types import json_bytes
from gym_metrics.ecosystems.reasoning_gym._rows import DEFAULT_AGENT, DEFAULT_PROMPT, MixPart, dataset_rows, mix_rows


@dataclass(frozen=True)
class RowsRequest:
    """Which rows: one dataset (`name`, `config`) or a mix (`parts`), its size and seed, the
    system prompt and the agent."""

    size: int
    seed: int
    name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    parts: tuple[MixPart, ...] = ()
    prompt: str = DEFAULT_PROMPT
    agent: str = DEFAULT_AGENT

    def rows(self, indices: range | None = None) -> Iterator[dict[str, Any]]:
        """The rows of `indices` (default: all), in order."""
        common: dict[str, Any] = {"size": self.size, "seed": self.seed, "prompt": self.prompt, "agent": self.agent, "indices": indices}
        if self.name is not None:
            return dataset_rows(self.name, config=self.config, **common)
        return mix_rows(list(self.parts), **common)


def write_rows(request: RowsRequest, path: Path, workers: int = 1) -> Counter[str]:
    """The rows as JSON lines in `path` (written beside it, moved over it once whole); how many
    rows each dataset gave. A bad request raises before anything is written or started."""
    next(request.rows(range(0)), None)  # builds the dataset: InvalidInputError here, in this process
    workers = max(1, min(workers, request.size))
    path.parent.mkdir(parents=True, exist_ok=True)
    slices = [range(request.size * k // workers, request.size * (k + 1) // workers) for k in range(workers)]
    parts = [path.with_name(f"{path.name}.part{k}") for k in range(workers)]
    try:
        if workers == 1:
            counts = _write_slice(request, slices[0], parts[0])
        else:
            with _context().Pool(workers) as pool:
                counts = sum(pool.starmap(_write_slice, [(request, s, p) for s, p in zip(slices, parts)]), Counter())
        with written_atomically(path) as whole, whole.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    shutil.copyfileobj(f, out, 1 << 20)
    finally:
        for leftover in parts:
            leftover.unlink(missing_ok=True)
    return counts


def _context() -> Any:
    """fork where it is safe and cheap (reasoning-gym already imported, no grpc threads in this
    process: the `dataset` command); else spawn, each worker importing reasoning-gym afresh."""
    fork = "fork" in multiprocessing.get_all_start_methods() and "grpc" not in sys.modules
    return multiprocessing.get_context("fork" if fork else "spawn")


def _write_slice(request: RowsRequest, indices: range, path: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    with path.open("wb") as f:
        for row in request.rows(indices):
            f.write(json_bytes(row, newline=True))
            counts[row["reasoning_gym"]["dataset"]] += 1
    return counts


__all__ = ["RowsRequest", "write_rows"]
