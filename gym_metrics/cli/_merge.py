"""`gym-metrics merge`: partial states (`aggregate --partial-out`) into one metrics file,
byte-identical to aggregating every row in one process."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from gym_metrics.cli._aggregate import add_aggregation_options, aggregation_hooks, report
from gym_metrics.cli._export import add_export_flags, export_after
from gym_metrics.cli._report import add_report_flag, report_after


ORDER = 40  # its place in `gym-metrics --help` (cli/_discovery.py)
NOT_KEPT = "a row that was not kept was read"
"""What RowSource says when a partial lacks a row text its own columns make a sample: damage."""


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("merge", help="merge partials (aggregate --partial-out) into one metrics file")
    p.add_argument("partials", type=Path, nargs="+", help="partial files, from `gym-metrics aggregate ... --partial-out`")
    p.add_argument("-o", "--output", type=Path, required=True, help="the metrics file to write (<stem>_aggregate_metrics.json)")
    add_aggregation_options(p)
    p.set_defaults(func=run)
    add_export_flags(p)
    add_report_flag(p)


def run(ns: argparse.Namespace) -> int:
    from gym_metrics._util.memory import fewer_gc_passes
    from gym_metrics.aggregate import aggregate_partials, partial_rows
    from gym_metrics.errors import FieldViolation, InvalidInputError

    hooks, econ = aggregation_hooks(ns)
    if hooks.get("compute_metrics") is not None:
        short = [(p, a) for p in ns.partials for a, rows in partial_rows(p).items() if rows != "all"]
        if short:
            path, agent = short[0]
            raise InvalidInputError(
                f"{ns.env}'s compute_metrics needs every row, and {path} holds only sample rows (agent {agent}); "
                "write the partials with `gym-metrics aggregate ... --partial-out P --with-rows` (or with --env)",
                [FieldViolation("partial", str(path))],
            )
    started = time.perf_counter()
    with fewer_gc_passes():
        try:
            out, results, rollouts = aggregate_partials(ns.partials, ns.output, **hooks)
        except LookupError as exc:
            if not str(exc).startswith(NOT_KEPT):  # another lookup failed: ours, not the file's (an internal error)
                raise
            raise InvalidInputError(f"a partial file is damaged (it holds no text for a row the merge needs as a sample: {exc}): "
                                    "write it again with aggregate --partial-out",
                                    [FieldViolation("partial", ", ".join(map(str, ns.partials)))]) from None  # fmt: skip
    _warn_bad_lines(ns.partials)
    code = report(ns, out, results, rollouts.rows_read, len(rollouts.bad_lines), econ, time.perf_counter() - started)
    report_after(ns, out)
    return export_after(ns, out, code)


def _warn_bad_lines(partials: list[Path]) -> None:
    """What `--on-bad-line skip` left out of the partials' inputs, as `aggregate` warns of it:
    each input file's lines, in the order given."""
    from gym_metrics.aggregate import partial_bad_lines
    from gym_metrics.cli._base import warn_bad_lines

    by_file: dict[str, list[Any]] = {}
    for source, bad in partial_bad_lines(partials):
        by_file.setdefault(source, []).append(bad)
    for source, lines in by_file.items():
        warn_bad_lines(Path(source), lines)
