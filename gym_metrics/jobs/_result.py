"""A finished job's result as `evaluate` returns it, rebuilt from the stored rows, so the
aggregate is computed by the same code (and is the same number) as an in-process run."""

from __future__ import annotations

from typing import Any

import numpy as np

from gym_metrics.evaluation import EvaluationScores, RowFailure
from gym_metrics.jobs._store import JobStore

PART_BYTES = 1 << 20


def job_result(store: JobStore, job_id: str) -> EvaluationScores:
    """Every stored row of `job_id` (in row order) as an EvaluationScores."""
    record = store.get(job_id)
    rows: list[dict[str, Any]] = []
    start: int | None = 0
    while start is not None:
        part, start = store.read_results(job_id, start=start, max_bytes=PART_BYTES)
        rows.extend(part)
    names = tuple(rows[0]["scores"]) if rows else _declared_names(record.spec.scorer, record.spec.scorer_config, list(record.spec.secrets or ()))
    n = max((r["index"] for r in rows), default=-1) + 1
    values = np.full((n, len(names)), np.nan)
    errors: dict[int, RowFailure] = {}
    generated: dict[int, Any] = {}
    for entry in rows:
        i = entry["index"]
        values[i] = [np.nan if entry["scores"].get(name) is None else entry["scores"][name] for name in names]
        if "error" in entry:
            errors[i] = RowFailure(entry["error"]["field"], entry["error"]["reason"])
        if "generated" in entry:
            generated[i] = entry["generated"]
    return EvaluationScores(record.spec.scorer, names, values, errors, generated)


def _declared_names(scorer: str, config: dict[str, Any] | None, secrets: list[str]) -> tuple[str, ...]:
    """The scores a job of no rows declares: its scorer made again (under stand-in keys for its
    secrets: nothing is sent, and the job's own keys are not at hand once it has ended)."""
    from gym_metrics._util.keys import BoundKey, keys_from
    from gym_metrics.scorers import get_scorer

    stand_ins = {name: BoundKey("unused") for name in [*secrets, *_key_names(config)]}
    try:
        with keys_from(stand_ins):
            return get_scorer(scorer, config).score_names
    except Exception:  # noqa: BLE001  # a scorer that no longer loads: an empty job has no scores anyway
        return ()


def _key_names(config: Any) -> list[str]:
    """Every `api_key_env` named anywhere in a scorer config."""
    if isinstance(config, dict):
        own = [config["api_key_env"]] if isinstance(config.get("api_key_env"), str) else []
        return own + [n for v in config.values() for n in _key_names(v)]
    if isinstance(config, list):
        return [n for v in config for n in _key_names(v)]
    return []


__all__ = ["job_result"]
