"""Orchestration of one collection: phase 1 (verify / pass through), phase 2 (aggregate)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gym_metrics._util.aio import run_fast
from gym_metrics._util.limits import ensure_open_files
from gym_metrics._util.progress import estimate_lines
from gym_metrics._transport.client import ResourcesClient, ServerInfo
from gym_metrics.rollouts import BadLine, concat
from gym_metrics.aggregate import AgentAggregate
from gym_metrics.collector._agent_code import refuse_unrunnable
from gym_metrics.collector._capture import Capture
from gym_metrics.collector._failed import FailedAgent, with_generation_failures
from gym_metrics.collector._keys import find_fixed_keys
from gym_metrics.collector._outfile import OutputFile, failures_path_for, first_attempts
from gym_metrics.collector._processes import write_stats
from gym_metrics.collector._shard import output_locked, refuse_other_shard_count, stats_path
from gym_metrics.collector._progress import Progress
from gym_metrics.collector._generate import GeneratedBatches, make_target, needs_generation
from gym_metrics.collector._input import Rollout
from gym_metrics.collector._replicas import by_server, connect, still_up
from gym_metrics.collector._metrics import aggregate_output, one_environment, write_metrics
from gym_metrics.collector._router import Router
from gym_metrics.collector._options import CollectOptions
from gym_metrics.collector._episodes import EpisodeRunner
from gym_metrics.collector._verify import Batches, LaneReport, make_batches, verify_all
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym import SESSION_TYPE

@dataclass
class CollectResult:
    """What a collection produced."""

    rollouts_path: Path
    metrics_path: Path
    aggregates: list[AgentAggregate]
    bad_lines: list[BadLine]
    verified: int
    passed_through: int
    skipped_done: int
    repaired_bytes: int
    failed_agents: list[FailedAgent] = field(default_factory=list)
    """Agents every rollout of which failed verification (see `_gm_error` in the output)."""
    generated: int = 0
    """Rollouts the policy answered (then verified)."""
    generation_failed: int = 0
    """Rollouts whose generation failed after its retries, or that had no response and no
    policy to generate one (`_gm_error` kind `generation`)."""
    unanswered: int = 0
    """Of those, the rows with no response collected without a policy."""
    batches_by_server: dict[str, int] = field(default_factory=dict)
    """Verify batches each server answered (by its address, as given); episodes, in the
    agent loop."""
    tool_calls: int = 0
    """Tool calls the agent loop made (0 without it)."""
    failed_tool_calls: int = 0
    """Of those, the ones whose output is an error (the tool raised or timed out, an unknown
    tool, arguments that are not JSON or do not fit)."""
    episodes_retried: int = 0
    """Episodes started again on another replica after theirs went away."""
    episodes_at_max_steps: int = 0
    """Episodes the agent loop stopped at `max_steps` with calls still to answer (verified as
    they stand; their row's `_gm_stop_reason` is `max_steps`)."""
    token_gaps: int = 0
    """With `capture_tokens`: model calls whose token IDs are missing, of unequal lengths, or
    break the lineage (each a gap in its row's `ng_model_call_capture.gaps`)."""
    reverified: int = 0
    """With `reverify`: rows that carried a reward and were verified again."""
    rewards_changed: int = 0
    """Of those, the ones whose new reward differs from the stored one (`_gm_stored_reward`)."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Rollouts whose verify answer named a failure class (`_ng_failure_class`, e.g.
    `judge_failed`), by class: written to `failures_path`, out of the rollouts and metrics."""
    failures_path: Path | None = None
    """The failures sidecar (`<stem>_failures.jsonl`; written only when a rollout failed)."""
    not_kept: int = 0
    """Rollouts whose answer said not to keep them (`_ng_no_persist`: the agent's harness failed,
    not the rollout): in neither file, so `--resume` runs them again."""
    no_reward: int = 0
    """Rollouts verified with a NaN or infinite reward: null in the row, out of the reward stats."""
    rollouts_done: int = 0
    """Rollouts this run wrote (verified, failed or passed through), as its progress counted
    them (every shard's, with several processes)."""
    rollouts_failed: int = 0
    """Of those, the ones whose verify or generation failed."""


def collect(
    client: ResourcesClient | Sequence[ResourcesClient],
    input_path: str | Path,
    output_path: str | Path,
    options: CollectOptions | None = None,
    progress: Progress | None = None,
) -> CollectResult:
    """Synchronous wrapper of `collect_async`."""
    return run_fast(collect_async(client, input_path, output_path, options, progress))


def _batches(router: Router, opts: CollectOptions, progress: Progress, needs_response: bool, capture: Capture | None, info: ServerInfo) -> Batches:
    """Verify batches of the rollouts to verify, generated first when a policy is given (one
    call each: a row of a NeMo Gym agent that runs its own code stops the run). Without one, a
    row with no response fails here, naming --policy-url, when the environment needs a response."""
    if opts.target is None:
        rollouts = router.answered(router.to_verify()) if needs_response else router.to_verify()
        return make_batches(rollouts, opts.batch_size, opts.max_batch_bytes)
    return GeneratedBatches(
        _one_call_agents(router.to_verify(), info), make_target(opts.target, token_ids=opts.capture_tokens), router.record_failed, progress,
        max_items=opts.batch_size, max_bytes=opts.max_batch_bytes, capture=capture,
    )  # fmt: skip


def _one_call_agents(rollouts: Iterator[Rollout], info: ServerInfo) -> Iterator[Rollout]:
    runnable: set[str] = set()  # (each agent checked once)
    for rollout in rollouts:
        if rollout.agent not in runnable and needs_generation(rollout.row):
            refuse_unrunnable(rollout, info.type_of(rollout.agent))
            runnable.add(rollout.agent)
        yield rollout


def _episode_runner(
    clients: list[ResourcesClient], info: ServerInfo, router: Router, opts: CollectOptions, progress: Progress,
    log: Callable[[str], None], capture: Capture | None,
) -> EpisodeRunner | None:
    """The agent loop's runner when this collection runs episodes: a policy is given and the
    environment has tools or answers any tool name (a NeMo Gym app: its rows' own tools are
    called), or `agent_loop` says so; None: generate once and verify."""
    tools = info.tools
    wanted = opts.agent_loop if opts.agent_loop is not None else (bool(tools) or info.any_tool_name or info.steps) and opts.target is not None
    if not wanted:
        return None
    if opts.target is None:
        raise InvalidInputError("the agent loop needs a policy", [FieldViolation("--agent-loop", "give --policy-url and --policy-model")])
    return EpisodeRunner(
        clients, tools, make_target(opts.target, token_ids=opts.capture_tokens), router.record, router.record_failed, progress,
        max_steps=opts.max_steps, agent_max_steps=info.max_steps_of, agent_type=info.type_of, parallel_tool_calls=opts.parallel_tool_calls,
        any_tool_name=info.any_tool_name, steps=info.steps,
        attempts=opts.max_episode_attempts, log=log, capture=capture, retry=opts.retry, agents=opts.agents,
        session_protocol=frozenset(agent for agent, (_, kind) in info.environment_servers.items() if kind == SESSION_TYPE),
        model_servers=info.agent_model_servers, resources_server=info.name,
    )  # fmt: skip


def _capture(opts: CollectOptions) -> Capture | None:
    on = opts.capture_model_calls or opts.capture_payloads or opts.capture_tokens or opts.trajectory
    trajectory = opts.trajectory or opts.capture_tokens
    return Capture(payloads=opts.capture_payloads, tokens=opts.capture_tokens, trajectory=trajectory) if on else None


def _recovering(input_path: Path, output_path: Path, default_agent: str | None) -> Path | None:
    """The file `reverify_failed` takes the rows to verify again from, when the input is the
    output's failures sidecar: the sidecar moved aside (`.reverifying`, removed once the run is
    done) so the rows failing again start it afresh, each rollout's first attempt only (NeMo
    Gym's reverify takes the first of a rollout that resumed runs attempted several times); left
    from a run that was cut off, that file is taken up again. None: another input, read as it is
    (and kept)."""
    sidecar = failures_path_for(output_path)
    aside = sidecar.with_name(sidecar.name + ".reverifying")
    if input_path.resolve() not in (sidecar.resolve(), aside.resolve()):
        return None
    if not aside.exists():
        if not sidecar.is_file():
            raise InvalidInputError("nothing to verify again", [FieldViolation("--reverify-failed", f"no failures sidecar {sidecar}")])
        first_attempts(sidecar, aside, default_agent)
    return aside


async def collect_async(
    client: ResourcesClient | Sequence[ResourcesClient],
    input_path: str | Path,
    output_path: str | Path,
    options: CollectOptions | None = None,
    progress: Progress | None = None,
) -> CollectResult:
    """Collect through `client`: one server, or several replicas of it (verify batches are
    spread over all; one that dies has its unanswered batches resent to the others)."""
    with output_locked(Path(output_path), take=options is None or options.shard is None):
        return await _collect(client, input_path, output_path, options, progress)


async def _collect(
    client: ResourcesClient | Sequence[ResourcesClient],
    input_path: str | Path,
    output_path: str | Path,
    options: CollectOptions | None,
    progress: Progress | None,
) -> CollectResult:
    opts = options or CollectOptions()
    input_path, output_path = Path(input_path), Path(output_path)
    if opts.shard is None:
        refuse_other_shard_count(output_path, None)
    recovering = _recovering(input_path, output_path, opts.default_agent) if opts.reverify_failed else None
    if recovering is not None:
        input_path = recovering
    if opts.target is not None:  # a connection per request in flight, and files besides
        ensure_open_files(opts.target.max_concurrency + 512, "--policy-concurrency")
    if not input_path.is_file():
        raise InvalidInputError("no such input file", [FieldViolation("--input", str(input_path))])
    # every key unambiguous before anything is written or skipped (a fresh run and a resume alike)
    fixed = await asyncio.to_thread(find_fixed_keys, input_path, opts.num_repeats, opts.default_agent, opts.limit)
    log = _logger(progress)
    given = [client] if isinstance(client, ResourcesClient) else list(client)
    replicas = await connect(given, opts.connections, opts.retry, opts.connect_timeout, log)
    lanes = replicas.lanes
    try:
        out = OutputFile(output_path, opts.resume or opts.reverify_failed, opts.default_agent, opts.reverify_failed, opts.max_rollout_attempts)
        if out.repaired_bytes:
            log(f"collect: cut a partial last line ({out.repaired_bytes} bytes) from {output_path}")
        retries = out.retries
        if retries.attempts:  # NeMo Gym's resume says the same counts
            maxed = len(retries.given_up) - retries.terminal
            log(f"collect: the failures sidecar holds {retries.attempts} failed attempts of {len(retries.again) + len(retries.given_up)} rollouts "
                f"not in the output: {len(retries.again)} run again, {retries.terminal} terminal and {maxed} at "
                f"--max-rollout-attempts {opts.max_rollout_attempts} not")  # fmt: skip
        progress = progress or Progress(estimate_total(input_path, opts.num_repeats, opts.limit, opts.max_rollouts))
        router = Router(input_path, opts, out, progress, fixed)
        router.log = log
        if replicas.info.steps:
            router.agent_type = "gymnasium_agent"
        router.environment_servers = replicas.info.environment_servers
        # Episodes spread over every connection: one per server worker (a session stays on its
        # connection's worker), so `serve --workers N` is used whole.
        capture = _capture(opts)
        runner = _episode_runner(lanes, replicas.info, router, opts, progress, log, capture)
        # a row with no response is a task: without a policy, it fails here (naming --policy-url)
        # where the environment needs a response: its request model requires one, or it has
        # tools (its rollouts are episodes the agent loop runs)
        needs_response = "response" in replicas.info.verify_request_schema.get("required", ()) or bool(replicas.info.tools or replicas.info.any_tool_name or replicas.info.steps)
        batches = None if runner is not None else _batches(router, opts, progress, needs_response, capture, replicas.info)
        try:
            if runner is not None:
                await runner.run(router.to_verify())
                report = LaneReport([runner.answered[i] for i in range(len(lanes))], frozenset())
            else:
                assert batches is not None
                names = [lane.target for lane in lanes] if len(given) > 1 else None
                report = await verify_all(
                    lanes, batches, router.record, max_in_flight=opts.max_in_flight, retry=opts.retry, log=log, names=names,
                    max_rollouts=opts.max_in_flight * opts.batch_size,
                )
            router.flush()
        finally:
            if isinstance(batches, GeneratedBatches):
                await batches.aclose()
            if runner is not None:
                await runner.target.aclose()
            out.close()
            router.failures.close()
            progress.close()
    finally:
        await replicas.close_extra()

    if opts.shard is not None:  # one process of `--processes N`: its parent merges and aggregates
        return _shard_done(router, out, progress, runner, capture, by_server(lanes, report), output_path)
    in_memory = (
        {name: concat(parts) for name, parts in router.columns.items()}
        if router.complete and not out.done
        else None
    )
    servers = one_environment(still_up(replicas.clients, lanes, report), replicas.info.wants_rows)
    aggregates, failed, blocks = await aggregate_output(servers, output_path, router.tasks, opts, log, in_memory)
    failed = [with_generation_failures(f, router.generation_failures.get(f.agent, 0)) for f in failed]
    if recovering is not None:
        recovering.unlink()  # every row of it is in the output or back in the sidecar
    metrics_path = write_metrics(output_path, aggregates, blocks)
    return CollectResult(
        rollouts_path=output_path,
        metrics_path=metrics_path,
        aggregates=aggregates,
        bad_lines=router.bad_lines,
        verified=router.verified,
        passed_through=router.passed_through,
        skipped_done=router.skipped_done,
        repaired_bytes=out.repaired_bytes,
        failed_agents=failed,
        generated=progress.generated_ok,
        generation_failed=router.generation_failed,
        unanswered=router.unanswered,
        batches_by_server=by_server(lanes, report),
        tool_calls=runner.tool_calls if runner else 0,
        failed_tool_calls=runner.failed_tool_calls if runner else 0,
        episodes_retried=runner.retried if runner else 0,
        episodes_at_max_steps=runner.at_max_steps if runner else 0,
        token_gaps=capture.token_gaps if capture else 0,
        reverified=router.reverified,
        rewards_changed=router.rewards_changed,
        dropped=dict(router.dropped),
        failures_path=router.failures.path,
        not_kept=router.not_kept,
        no_reward=router.no_reward,
        rollouts_done=progress.done,
        rollouts_failed=progress.errors,
    )


def _shard_done(
    router: Router, out: OutputFile, progress: Progress, runner: EpisodeRunner | None, capture: Capture | None,
    served: dict[str, int], output_path: Path,
) -> CollectResult:
    """A shard's counts, written beside its file for its parent (collector/_processes.py)."""
    counts = {
        "verified": router.verified, "passed_through": router.passed_through, "skipped_done": router.skipped_done,
        "repaired_bytes": out.repaired_bytes, "generated": progress.generated_ok, "generation_failed": router.generation_failed,
        "unanswered": router.unanswered, "tool_calls": runner.tool_calls if runner else 0,
        "failed_tool_calls": runner.failed_tool_calls if runner else 0, "episodes_retried": runner.retried if runner else 0,
        "episodes_at_max_steps": runner.at_max_steps if runner else 0, "token_gaps": capture.token_gaps if capture else 0,
        "reverified": router.reverified, "rewards_changed": router.rewards_changed, "not_kept": router.not_kept, "no_reward": router.no_reward,
        "rollouts_done": progress.done, "rollouts_failed": progress.errors,
    }  # fmt: skip
    stats = {
        "counts": counts, "tasks": {agent: sorted(tasks) for agent, tasks in router.tasks.items()},
        "bad_lines": [[bad.line, bad.field, bad.reason] for bad in router.bad_lines], "dropped": dict(router.dropped),
        "generation_failures": dict(router.generation_failures), "by_server": served,
    }  # fmt: skip
    write_stats(stats_path(output_path), stats)
    return CollectResult(output_path, stats_path(output_path), [], router.bad_lines, router.verified, router.passed_through,
                         router.skipped_done, out.repaired_bytes)  # fmt: skip


def estimate_total(path: Path, num_repeats: int | Mapping[str, int] | None, limit: int | None = None, max_rollouts: int | None = None) -> int | None:
    """Rollouts to expect, for the progress bar: the input's estimated lines (its first `limit`)
    x repeats (the most of a dict's), `max_rollouts` at most."""
    lines = estimate_lines(path)
    if limit is not None:
        lines = limit if lines is None else min(lines, limit)
    if lines is None:
        return max_rollouts
    total = lines * ((max(num_repeats.values()) if num_repeats else 1) if isinstance(num_repeats, Mapping) else (num_repeats or 1))
    return total if max_rollouts is None else min(total, max_rollouts)


def _logger(progress: Progress | None) -> Callable[[str], None]:
    def log(message: str) -> None:
        stream = progress.stream if progress else sys.stderr
        if progress and progress.live:
            stream.write("\r\x1b[2K")
        stream.write(message + "\n")
        stream.flush()

    return log
