"""`collect --processes N` and `--ray`: the input's tasks collected by shard processes (or Ray
tasks), their rows merged into the output in key order, then aggregated here once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gym_metrics._transport.client import ResourcesClient
from gym_metrics.collector._failed import with_generation_failures
from gym_metrics.collector._outfile import failures_path_for
from gym_metrics.collector._keys import find_fixed_keys
from gym_metrics.collector._options import CollectOptions
from gym_metrics.collector._processes import added, run_shards
from gym_metrics.collector._replicas import Connections, connect
from gym_metrics.collector._metrics import aggregate_output, write_metrics
from gym_metrics.collector._run import CollectResult, _logger, estimate_total
from gym_metrics.collector._shard import output_locked
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.rollouts import BadLine


async def collect_processes_async(
    client: ResourcesClient | Sequence[ResourcesClient],
    input_path: str | Path,
    output_path: str | Path,
    argv: Sequence[str],
    processes: int | None,
    options: CollectOptions | None = None,
    shards: Callable[..., list[dict[str, Any]]] = run_shards,
    environments: Sequence[Sequence[ResourcesClient]] | None = None,
    watch: Callable[[int], None] | None = None,
) -> CollectResult:
    """`collect --processes N` (collector/_processes.py): `argv`, this command's own arguments,
    run as N shard processes (or as `shards` runs them: Ray tasks, gym_metrics.ray; `processes`
    None: as many as it chooses); their rows merged into `output_path` in key order, then
    aggregated here, once. The input's keys are checked and the server reached before any shard
    starts. With `options.environments` (collector/_environments.py), `environments` holds each
    environment's clients (`client` unused): `processes` shards an environment, each agent
    aggregated by its own. `watch(rows)`: told the rows the shards wrote, as the progress line is."""
    with output_locked(Path(output_path)):
        return await _collect_processes(client, input_path, output_path, argv, processes, options, shards, environments, watch)


async def _collect_processes(
    client: ResourcesClient | Sequence[ResourcesClient],
    input_path: str | Path,
    output_path: str | Path,
    argv: Sequence[str],
    processes: int | None,
    options: CollectOptions | None,
    shards: Callable[..., list[dict[str, Any]]],
    environments: Sequence[Sequence[ResourcesClient]] | None,
    watch: Callable[[int], None] | None,
) -> CollectResult:
    opts = options or CollectOptions()
    input_path, output_path = Path(input_path), Path(output_path)
    if opts.reverify_failed:
        raise InvalidInputError("--reverify-failed runs in one process", [FieldViolation("--processes", "give it without --reverify-failed")])
    if not input_path.is_file():
        raise InvalidInputError("no such input file", [FieldViolation("--input", str(input_path))])
    await asyncio.to_thread(find_fixed_keys, input_path, opts.num_repeats, opts.default_agent, opts.limit)
    log = _logger(None)
    places = opts.environments
    if places is None:
        groups = [[client] if isinstance(client, ResourcesClient) else list(client)]
    elif environments is None or len(environments) != len(places.servers):
        raise ValueError("options.environments needs each environment's clients (`environments`)")
    else:  # `processes` (None: 1) for each environment
        groups, processes = [list(g) for g in environments], len(places.servers) * (processes or 1)
    connected: list[Connections] = []
    try:
        for group in groups:
            connected.append(await connect(group, opts.connections, opts.retry, opts.connect_timeout, log))
        total = estimate_total(input_path, opts.num_repeats, opts.limit, opts.max_rollouts)
        stop = threading.Event()  # a thread cannot be cancelled: told to stop when this coroutine is
        extra: dict[str, Any] = {} if places is None else {"environments": places}
        if watch is not None:
            extra["watch"] = watch
        try:
            stats = await asyncio.to_thread(
                shards, argv, output_path, processes, total, resume=opts.resume, default_agent=opts.default_agent, log=log, stop=stop, **extra
            )
        except BaseException:
            stop.set()
            raise
        summed = added(stats)

        def servers(agent: str) -> tuple[Sequence[ResourcesClient], bool]:
            one = connected[0 if places is None else places.require(agent, str(output_path))]
            return one.clients, one.info.wants_rows

        aggregates, failed, blocks = await aggregate_output(servers, output_path, summed["tasks"], opts, log)
    finally:
        for replicas in connected:
            await replicas.close_extra()
    generation_failures = summed["generation_failures"]
    failed = [with_generation_failures(f, generation_failures.get(f.agent, 0)) for f in failed]
    metrics_path = write_metrics(output_path, aggregates, blocks)
    counts = summed["counts"]
    return CollectResult(
        rollouts_path=output_path, metrics_path=metrics_path, aggregates=aggregates,
        bad_lines=[BadLine(*bad) for bad in summed["bad_lines"]], verified=counts["verified"],
        passed_through=counts["passed_through"], skipped_done=counts["skipped_done"], repaired_bytes=counts["repaired_bytes"],
        failed_agents=failed, generated=counts["generated"], generation_failed=counts["generation_failed"],
        unanswered=counts["unanswered"], tool_calls=counts["tool_calls"], failed_tool_calls=counts["failed_tool_calls"],
        episodes_retried=counts["episodes_retried"], episodes_at_max_steps=counts["episodes_at_max_steps"],
        token_gaps=counts["token_gaps"], reverified=counts["reverified"], rewards_changed=counts["rewards_changed"],
        dropped=summed["dropped"], batches_by_server=summed["by_server"], failures_path=failures_path_for(output_path) if summed["dropped"] else None,
        not_kept=counts["not_kept"], no_reward=counts.get("no_reward", 0),
        rollouts_done=counts.get("rollouts_done", 0), rollouts_failed=counts.get("rollouts_failed", 0),
    )  # fmt: skip
