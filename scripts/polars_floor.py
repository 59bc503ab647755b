"""The polars floor: a minimal polars read + group + write pipeline over a rollouts file.

Usage: python scripts/polars_floor.py ROLLOUTS.jsonl OUT.json

What any aggregation of a rollouts file must at least do, written the shortest way in polars
(multi-threaded Rust): parse every line, group rollouts by agent and task, take each numeric
field's mean / std / min / max / count per task, average those per agent, and write one JSON
file. It makes no `rollout_infos`, no samples, no repeat-level statistics: `gym-metrics
aggregate` does all of those and still has to come in at or under this pipeline's wall time
(issue 12). `scripts/bench_aggregate.py --floor` runs the two side by side.
"""

from __future__ import annotations

import sys

import polars as pl


def main(src: str, dst: str) -> None:
    frame = pl.read_ndjson(src).with_columns(pl.col("agent_ref").struct.field("name").alias("agent"))
    numeric = [
        name
        for name, dtype in frame.schema.items()
        if (dtype.is_numeric() or dtype == pl.Boolean) and not name.startswith("_ng_")
    ]
    stats = [
        expr
        for name in numeric
        for expr in (
            pl.col(name).cast(pl.Float64).mean().alias(f"mean/{name}"),
            pl.col(name).cast(pl.Float64).std().alias(f"std/{name}"),
            pl.col(name).cast(pl.Float64).min().alias(f"min/{name}"),
            pl.col(name).cast(pl.Float64).max().alias(f"max/{name}"),
        )
    ]
    groups = frame.group_by("agent", "_ng_task_index").agg(pl.len().alias("rollouts"), *stats)
    agents = groups.group_by("agent").agg(pl.exclude("_ng_task_index").mean())
    with open(dst, "w") as out:
        out.write('{"agents": ')
        out.write(agents.write_json())
        out.write(', "groups": ')
        out.write(groups.write_json())
        out.write("}\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
