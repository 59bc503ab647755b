"""Phase 2 of a collection: the output's rows aggregated, each agent's by its environment's
AggregateMetrics (or, for a NeMo Gym agent of its own code with its own hooks, here), then the
metrics file written beside the output."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gym_metrics._transport.client import ResourcesClient
from gym_metrics.aggregate import AgentAggregate, AggregateOptions, Aggregator, local_parts, output_path_for, perf_sections, write_aggregate_metrics
from gym_metrics.collector._counted import unmatched_classes, with_counted_failures
from gym_metrics.collector._failed import FailedAgent, all_dropped, all_failed
from gym_metrics.collector._options import CollectOptions
from gym_metrics.collector._outfile import failures_path_for
from gym_metrics.collector._replicas import on_any
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.rollouts import PerfBlocks, RolloutColumns, add_perf_blocks, holds_perf, perf_blocks, read_rollouts


def write_metrics(output_path: Path, aggregates: list[AgentAggregate], blocks: PerfBlocks) -> Path:
    """The metrics file beside the output, with each agent's `perf_summary` when its rows hold
    `ng_perf` blocks (`blocks`: aggregate/_perf.py)."""
    perf = perf_sections(blocks, {a.agent_name: a.received_rollouts for a in aggregates})
    return write_aggregate_metrics(output_path_for(output_path), aggregates, perf or None)


Servers = Callable[[str], tuple[Sequence[ResourcesClient], bool]]
"""An agent's environment: (its servers' clients, whether its compute_metrics reads rows)."""


def one_environment(clients: Sequence[ResourcesClient], wants_rows: bool) -> Servers:
    return lambda agent: (clients, wants_rows)


async def aggregate_output(
    servers: Servers,
    output_path: Path,
    tasks: dict[str, set[int]],
    opts: CollectOptions,
    log: Callable[[str], None],
    in_memory: dict[str, RolloutColumns] | None = None,
) -> tuple[list[AgentAggregate], list[FailedAgent], PerfBlocks]:
    """Phase 2: each agent's rows of the output, column-wise, through AggregateMetrics of its
    environment (`servers`). When every output row was passed through from the input, its
    columns are already in memory. Runs on the first of the environment's clients that answers
    (one that failed is tried last for the next agents). Also returns the agents none of whose
    rollouts was verified, and the rows' `ng_perf` blocks (for the perf summaries)."""
    blocks: PerfBlocks = {}
    if in_memory is not None:
        by_agent = in_memory
        _reject_duplicate_keys(output_path, by_agent, where="input line")
        if holds_perf(by_agent):
            add_perf_blocks(blocks, output_path, opts.default_agent)
    else:
        size = output_path.stat().st_size
        rollouts = read_rollouts(output_path, on_bad_line="fail", default_agent=opts.default_agent) if size else None
        by_agent = rollouts.agents if rollouts else {}
        _reject_duplicate_keys(output_path, by_agent)
        blocks = perf_blocks(rollouts) if rollouts else {}
    if opts.count_failure_classes_as_zero:
        seen: set[str] = set()
        by_agent, counted = with_counted_failures(by_agent, output_path, failures_path_for(output_path), opts.count_failure_classes_as_zero,
                                                  opts.default_agent, seen)  # fmt: skip
        if counted:
            log(f"collect: {counted} failed rollouts counted as 0 in the metrics ({', '.join(opts.count_failure_classes_as_zero)}; the files unchanged)")
        for line in unmatched_classes(opts.count_failure_classes_as_zero, seen, "collect"):
            log(line)
    agents = sorted(set(tasks) | set(by_agent))
    results: list[AgentAggregate] = []
    orders: dict[int, list[ResourcesClient]] = {}  # per environment: one that fails goes last, for the next agents too
    for agent in agents:
        clients, wants_rows = servers(agent)
        order = orders.setdefault(id(clients), list(clients))
        cols = by_agent.get(agent)
        if cols is None:
            cols = RolloutColumns.empty()
        # A server whose compute_metrics reads rows gets them all; otherwise no row is sent:
        # samples and rollout_infos come from the rows held here (same engine code), made in
        # a thread while the server computes.
        options = AggregateOptions(
            include_rollout_infos=False, include_samples=wants_rows, count_errors_as_zero=opts.count_errors_as_zero,
            expected_rollouts_per_task=opts.num_repeats if isinstance(opts.num_repeats, int) else 0, expected_task_indices=sorted(tasks.get(agent, ())),
        )  # fmt: skip

        async def call(client: ResourcesClient, cols: RolloutColumns = cols, agent: str = agent, options: AggregateOptions = options) -> AgentAggregate:
            return await client.aggregate(
                agent, cols, batch_size=opts.aggregate_batch_size, include_rows=options.include_samples,
                include_rollout_infos=options.include_rollout_infos, include_samples=options.include_samples,
                expected_rollouts_per_task=options.expected_rollouts_per_task, expected_task_indices=options.expected_task_indices,
                count_errors_as_zero=options.count_errors_as_zero,
            )  # fmt: skip

        hooks = getattr(opts.agents[agent], "hooks", None) if opts.agents and agent in opts.agents else None
        if hooks is not None:  # a NeMo Gym agent of its own code that aggregates with its own hooks, here
            wants_rows = options.include_samples = False
        parts = asyncio.ensure_future(
            asyncio.to_thread(
                local_parts, [cols], opts.count_errors_as_zero, samples=not wants_rows, infos=opts.include_rollout_infos
            )
        )
        try:
            result = await on_any(order, call, opts.retry, log) if hooks is None else await asyncio.to_thread(_own_aggregate, agent, cols, hooks, options)
        except BaseException:
            parts.cancel()
            raise
        (await parts).attach(result)
        results.append(result)
    failed = [f for f in (all_failed(agent, by_agent[agent]) for agent in agents if agent in by_agent) if f]
    failed += all_dropped([agent for agent in agents if not len(by_agent.get(agent, ()))], failures_path_for(output_path), opts.default_agent)
    return results, failed, blocks


def _own_aggregate(agent: str, cols: RolloutColumns, hooks: tuple[Any, ...], options: AggregateOptions) -> AgentAggregate:
    """The agent's metrics as NeMo Gym's default `aggregate_metrics` computes them on the agent:
    the same statistics, the agent's hooks (compute_metrics, get_key_metrics,
    compute_repeat_metrics) in place of its resources server's."""
    aggregator = Aggregator(agent, options)
    aggregator.add(cols)
    compute, key, repeat = hooks
    return aggregator.finalize(compute, key, compute_repeat_metrics=repeat)


def _reject_duplicate_keys(output_path: Path, agents: dict[str, RolloutColumns], where: str = "line") -> None:
    """A (task, rollout) key twice for one agent (the input repeats it) fails here, naming the
    output lines, rather than as a bare INVALID_ARGUMENT from the server about stream rows."""
    violations = []
    for agent, cols in agents.items():
        order, dup = cols.key_order()
        if order is None:
            continue  # sorted, so no key repeats
        for i in dup[:10].tolist():
            first, second = sorted((cols.label(int(order[i])), cols.label(int(order[i + 1]))))
            t, r = cols.task_index[order[i]], cols.rollout_index[order[i]]
            violations.append(
                FieldViolation(
                    "(agent_ref.name, _ng_task_index, _ng_rollout_index)",
                    f"({agent!r}, {t}, {r}) again (first at {where} {first}): the input repeats this rollout",
                    second,
                    row_name=where,
                )
            )
    if violations:
        raise InvalidInputError(
            f"{output_path}: rollouts written twice (remove the repeats from the input and from this file, "
            "then re-run with --resume)",
            violations,
        )
