"""`aggregate --ray`: a rollouts set read as Ray tasks over whole-line byte ranges, one partial
per range computed in parallel across the cluster, merged into the exact metrics file.

Every node must read the inputs at the same path (a shared filesystem, as Ray Data assumes).
Tasks send their partials back through the object store (about 10 bytes per rollout); line
numbers stay those of the files (a first pass counts each range's lines).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


from gym_metrics.aggregate import AgentAggregate, aggregate_partials, partial_bytes
from gym_metrics.rollouts import BadLine, OnBadLine, RolloutFile, byte_ranges, count_lines, read_rollouts
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.ray._replicas import _ray


def _count(path: str, span: tuple[int, int]) -> int:
    return count_lines(path, span)


def _partial(path: str, span: tuple[int, int], first_line: int, default_agent: str | None, keep_rows: bool) -> bytes:
    """One range's partial (bad lines skipped and recorded: the driver decides whether they fail)."""
    rollouts = read_rollouts(path, on_bad_line="skip", default_agent=default_agent, keep_rows=keep_rows, span=span, first_line=first_line)
    return partial_bytes(rollouts, [f"{path}@{span[0]}-{span[1]}"])


def ray_partials(
    paths: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str], *, address: str | None = None,
    on_bad_line: OnBadLine = "fail", default_agent: str | None = None, keep_rows: bool = False,
    ranges_per_cpu: int = 2,
) -> list[Path]:  # fmt: skip
    """Partials of `paths` computed by Ray tasks (about `ranges_per_cpu` ranges per cluster CPU),
    written into `out_dir` in file order; InvalidInputError naming the bad lines (file, line,
    field) when `on_bad_line="fail"` and some line is bad."""
    ray = _ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="warning")
    try:
        count, partial = ray.remote(_count), ray.remote(_partial)
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        pieces = [(str(p), span) for p in paths for span in byte_ranges(Path(p), cpus * ranges_per_cpu)]
        counts = ray.get([count.remote(p, span) for p, span in pieces])
        firsts = _first_lines(pieces, counts)
        blobs = ray.get([partial.remote(p, span, first, default_agent, keep_rows) for (p, span), first in zip(pieces, firsts)])
    finally:
        if started:
            ray.shutdown()
    out = []
    for i, blob in enumerate(blobs):
        path = Path(out_dir) / f"range{i:05d}.parquet"
        path.write_bytes(blob)
        out.append(path)
    if on_bad_line == "fail":
        _refuse_bad_lines(pieces, out)
    return out


def _first_lines(pieces: list[tuple[str, tuple[int, int]]], counts: list[int]) -> list[int]:
    """The number of each range's first line within its file."""
    firsts, seen = [], dict[str, int]()
    for (path, _), n in zip(pieces, counts):
        firsts.append(seen.get(path, 0) + 1)
        seen[path] = seen.get(path, 0) + n
    return firsts


def _refuse_bad_lines(pieces: list[tuple[str, tuple[int, int]]], partials: list[Path]) -> None:
    from gym_metrics.aggregate import read_partial

    by_path: dict[str, list[BadLine]] = {}
    for (path, _), partial in zip(pieces, partials):
        by_path.setdefault(path, []).extend(read_partial(partial).bad_lines)  # small: bad lines only matter here
    for path, bad in by_path.items():
        if bad:
            raise InvalidInputError(
                f"{path}: {len(bad)} bad line(s)", [FieldViolation(b.field, b.reason, b.line, row_name="line") for b in bad]
            )


def aggregate_on_ray(
    paths: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str], *, address: str | None = None,
    on_bad_line: OnBadLine = "fail", default_agent: str | None = None, **hooks: Any,
) -> tuple[Path, list[AgentAggregate], RolloutFile]:  # fmt: skip
    """`aggregate_file` for one or more files, read by Ray tasks; the metrics file is the one
    a single process writes, byte for byte. `hooks` as `aggregate_partials` takes them."""
    import tempfile

    keep = hooks.get("compute_metrics") is not None
    with tempfile.TemporaryDirectory(prefix="gym-metrics-ray-") as tmp:
        partials = ray_partials(paths, tmp, address=address, on_bad_line=on_bad_line, default_agent=default_agent, keep_rows=keep)
        return aggregate_partials(partials, Path(output), **hooks)


__all__ = ["aggregate_on_ray", "ray_partials"]
