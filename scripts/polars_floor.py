"""The polars floor: the same information as `<stem>_aggregate_metrics.json`, made the shortest
way with polars (multi-threaded Rust).

Usage: python scripts/polars_floor.py ROLLOUTS.jsonl OUT.json   (needs `pip install polars`)

Read every line; group rollouts by agent and task; per task each numeric field's mean / max /
min / median / std, the first rollout's row as the sample, the rollout count and every
rollout's indices and numeric fields (rollout_infos); per agent the mean of the task stats;
write it all as one JSON file. No repeat-level statistics, no key metrics, no accounting:
`gym-metrics aggregate` does all of those too and must still take at most this pipeline's
wall time (issue 12). `scripts/bench_aggregate.py --floor` runs the two side by side.
"""

from __future__ import annotations

import sys

import polars as pl

STATS = ("mean", "max", "min", "median", "std")


def main(src: str, dst: str) -> None:
    frame = pl.read_ndjson(src).with_columns(pl.col("agent_ref").struct.field("name").alias("agent"))
    numeric = [
        name
        for name, dtype in frame.schema.items()
        if (dtype.is_numeric() or dtype == pl.Boolean) and not name.startswith("_ng_")
    ]
    stats = [
        getattr(pl.col(name).cast(pl.Float64), stat)().alias(f"{stat}/{name}") for name in numeric for stat in STATS
    ]
    sample = [name for name in frame.columns if not name.startswith("_ng_") and name != "agent"]
    infos = ["_ng_task_index", "_ng_rollout_index", *numeric]
    groups = frame.group_by("agent", "_ng_task_index", maintain_order=True).agg(
        *stats,
        pl.struct(sample).first().alias("sample"),
        pl.len().alias("num_rollouts"),
        pl.struct(infos).alias("rollout_infos"),
    )
    stat_names = [f"{stat}/{name}" for name in numeric for stat in STATS]
    agents = groups.group_by("agent").agg(pl.col(stat_names).mean())
    with open(dst, "w") as out:
        out.write('{"agents": ')
        out.write(agents.write_json())
        out.write(', "groups": ')
        out.write(groups.write_json())
        out.write("}\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
