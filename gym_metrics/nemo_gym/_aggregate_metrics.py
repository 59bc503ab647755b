"""NeMo Gym's `/aggregate_metrics` answer (`AggregateMetrics`) for a list of verify responses, as
an environment's own tests ask it of `compute_aggregate_metrics` or of the server's
`aggregate_metrics`: gym-metrics' aggregation (the numbers `collect` writes to the metrics file)
with the given hooks, without the uncertainty metrics NeMo Gym does not compute, its groups as
dicts (each `sample` the stand-in row NeMo Gym aggregates: only an agent_ref, the task row not
being given), and the rows' `ng_perf` summary (tests/nemo_gym/test_aggregate_answer.py
compares it with NeMo Gym's own)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from gym_metrics.aggregate import AgentAggregate, AggregateOptions, Aggregator, ComputeMetrics, GetKeyMetrics, iter_group_dicts, perf_summary
from gym_metrics.nemo_gym.config_types import AggregateMetrics
from gym_metrics.rollouts import RolloutColumns


NEMO_OPTIONS = AggregateOptions(include_samples=False, include_uncertainty=False)
"""How NeMo Gym's answer is aggregated."""
STAND_IN = {"agent_ref": {"name": "agent"}}


def answer_of(done: AgentAggregate, rows: Sequence[Mapping[str, Any]]) -> AggregateMetrics:
    """The answer for `rows` aggregated as `done`."""
    perf = [row["ng_perf"] for row in rows if isinstance(row.get("ng_perf"), Mapping)]
    groups = [{**entry, "sample": dict(STAND_IN)} for entry in iter_group_dicts(done.groups)]
    return AggregateMetrics(
        agent_metrics=done.agent_metrics, key_metrics=done.key_metrics,
        group_level_metrics=groups, repeat_level_metrics=done.repeat_level_metrics,
        perf_summary=perf_summary(perf, len(rows)),
    )  # fmt: skip


def aggregate_answer(
    verify_responses: Iterable[Mapping[str, Any]],
    compute_metrics: Optional[ComputeMetrics] = None,
    get_key_metrics: Optional[GetKeyMetrics] = None,
    compute_repeat_metrics: Optional[ComputeMetrics] = None,
) -> AggregateMetrics:
    """The answer for `verify_responses` with these hooks (none: NeMo Gym's defaults); no
    rows, an empty answer."""
    rows = list(verify_responses)
    if not rows:
        return AggregateMetrics()
    aggregator = Aggregator("agent", NEMO_OPTIONS)
    aggregator.add(RolloutColumns.from_rows(rows))
    return answer_of(aggregator.finalize(compute_metrics, get_key_metrics, compute_repeat_metrics=compute_repeat_metrics), rows)
