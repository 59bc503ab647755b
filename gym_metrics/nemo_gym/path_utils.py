"""The files a run writes beside its rollouts file, named as NeMo Gym names them
(`nemo_gym.path_utils`): `rollouts.jsonl` -> `rollouts_failures.jsonl`,
`rollouts_materialized_inputs.jsonl`, `rollouts_aggregate_metrics.json`."""

from __future__ import annotations

from pathlib import Path


def failures_path_for(output_fpath: Path) -> Path:
    return output_fpath.with_name(f"{output_fpath.stem}_failures.jsonl")


def materialized_path_for(output_fpath: Path) -> Path:
    return output_fpath.with_name(f"{output_fpath.stem}_materialized_inputs.jsonl")


def aggregate_metrics_path_for(output_fpath: Path) -> Path:
    return output_fpath.with_name(f"{output_fpath.stem}_aggregate_metrics.json")


__all__ = ["aggregate_metrics_path_for", "failures_path_for", "materialized_path_for"]
