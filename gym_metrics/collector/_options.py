"""CollectOptions: the knobs of one collection (the CLI's flags), in a module of their own so
every part of the collector can name them without importing the orchestration."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gym_metrics.collector._environments import Environments
from gym_metrics.collector._outfile import DEFAULT_MAX_ROLLOUT_ATTEMPTS
from gym_metrics.collector._shard import Shard
from gym_metrics.rollouts import OnBadLine
from gym_metrics.targets import ModelTargetConfig


@dataclass
class RetryPolicy:
    """Exponential backoff with equal jitter (half the step fixed, half random: the retries
    span at least half their sum, 16 s by default, where full jitter's draws could all come out
    near 0 and give up on a server restarting in 3 s); attempts reset whenever the server
    makes progress."""

    max_retries: int = 8
    base_s: float = 0.2
    max_s: float = 10.0

    def delay(self, attempt: int) -> float:
        step = min(self.max_s, self.base_s * 2 ** (attempt - 1))
        return step / 2 + random.uniform(0, step / 2)

    async def back_off(self, attempt: int, exc: Exception, log: Callable[[str], None], who: str = "server") -> None:
        """Wait before retry number `attempt`, or give up (re-raise) past max_retries."""
        if attempt > self.max_retries:
            from gym_metrics._transport.client import ServerUnavailableError  # (loads grpc: only when a server is used)

            raise ServerUnavailableError(f"{exc} (gave up after {self.max_retries} retries)") from None
        wait = self.delay(attempt)
        log(f"collect: {who} unavailable ({exc}); retry {attempt}/{self.max_retries} in {wait:.1f}s")
        await asyncio.sleep(wait)


@dataclass
class CollectOptions:
    """Knobs of one collection (the CLI's flags)."""

    num_repeats: int | dict[str, int] | None = None
    """Rollouts of each line: K, or K by agent (collector._input.Repeats); None: lines with a
    reward are finished rollouts."""
    limit: int | None = None
    """Read the input's first `limit` lines only (NeMo Gym's `+limit`; blank lines count)."""
    fan_out: dict[str, list[str]] | None = None
    """A line whose agent_ref.name (else task_source) is a key runs once per agent listed there,
    each with its repeats, one task, rollout indices counted on (NeMo Gym's `fan_out`)."""
    interleave_repeats: bool = False
    """Start the rollouts round by round (every task's rollout 0, then every rollout 1, ...:
    NeMo Gym's `interleave_repeats`) instead of each task's back to back; the input is read
    once a round."""
    seed_each_rollout: bool = False
    """Each generated rollout's index as its sampling seed (NeMo Gym's `num_repeats_add_seed`:
    `responses_create_params.metadata.extra_body`'s `seed`)."""
    max_rollouts: int | None = None
    """Run the first `max_rollouts` rollouts only (`collect --benchmark --limit`: NeMo Gym's limit
    counts its collated file's lines, a rollout each)."""
    resume: bool = False
    max_rollout_attempts: int = DEFAULT_MAX_ROLLOUT_ATTEMPTS
    """With `resume`: a rollout's attempts over resumed runs (NeMo Gym's
    `NEMO_GYM_MAX_ROLLOUT_ATTEMPTS`; collector/_outfile.py Retries)."""
    on_bad_line: OnBadLine = "fail"
    count_errors_as_zero: bool = False
    count_failure_classes_as_zero: tuple[str, ...] = ()
    """Failures sidecar rows of these classes (`judge_failed`, ...) scored 0 in the metrics, as
    NeMo Gym's `count_failure_classes_as_zero` (collector/_counted.py); the files unchanged."""
    include_rollout_infos: bool = True
    keep_input_fields: bool = False
    """Write each verified rollout as its whole input row with the verify response's fields
    on top (every input column is then aggregated too); default: the row NeMo Gym's collection
    writes (the verify response and the collector's keys)."""
    batch_size: int = 256
    max_batch_bytes: int = 4 << 20
    max_in_flight: int = 8
    connections: int | None = None
    """TCP connections per server that verify batches are spread over; None: one per worker
    process the server reports (`serve --workers N`), each reaching a different worker (for a
    `dns:` target, one stream per address the name resolves to)."""
    aggregate_batch_size: int = 50_000
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    connect_timeout: float = 5.0
    """Seconds the first connection may take; past it the run fails (not retried)."""
    default_agent: str | None = None
    """The agent of input lines without an agent_ref (their output lines stay without one);
    None: such a line is a bad line."""
    target: ModelTargetConfig | None = None
    """The policy model that answers rows with neither a reward nor a response (their
    `responses_create_params` is the request), before they are verified; None: such rows
    are verified as they are (the `--policy-*` flags)."""
    agent_loop: bool | None = None
    """Run each such row as a multi-turn episode against the environment's tools (NeMo Gym's
    simple_agent loop, docs/pipelines.md#agent-loop); None: when the server has tools."""
    max_steps: int | None = None
    """Policy calls one episode may make (None: until the policy answers without calls)."""
    agents: Mapping[str, Any] | None = None
    """NeMo Gym agents whose own code runs their rows, by agent name (`--benchmark CONFIG`:
    gym_metrics.nemo_gym.load_agents of its agents collect does not run itself)."""
    prepare_row: Callable[[dict[str, Any]], tuple[dict[str, Any], bytes | None]] | None = None
    """A change each input row gets before it is indexed and run (`--prompt-config`: its
    `responses_create_params.input` built from NeMo Gym's prompt template; `--benchmark`: the
    row NeMo Gym collates), with the text that says which rows are one task (None: the line's
    own); ValueError or KeyError makes the line a bad line."""
    reverify: bool = False
    """Verify rows that already carry a reward again (their indices kept), writing the stored
    reward beside the new one as `_gm_stored_reward`; False: such rows pass through unverified."""
    reverify_failed: bool = False
    """NeMo Gym's `reverify --judge-failed-only`: verify again only the rows of the output's
    failures sidecar (`<stem>_failures.jsonl`); the recovered ones are appended to the output,
    those that fail again go back to the sidecar, and the metrics are made again."""
    parallel_tool_calls: bool = False
    """Run the tool calls of one turn concurrently; False (NeMo Gym's simple_agent): one after
    another in the policy's order, so a call sees what the calls before it did."""
    max_episode_attempts: int = 3
    """Tries of one episode when its server goes away mid-episode (each on a fresh session,
    another replica first, after `retry`'s backoff; `retry.max_retries + 1` tries when that is
    more); a failure of the policy or the environment is not retried here."""
    capture_model_calls: bool = False
    """Record every policy call of a generated rollout (each HTTP attempt: its status, timing,
    tokens, finish reason, error category) on its row as NeMo Gym's `ng_model_call_capture`
    (docs/pipelines.md#recording). Off by default, as NeMo Gym's `observability_enabled`: it
    costs about 70 µs of collector CPU per 3-call episode (BENCHMARKS.md, "Recording")."""
    capture_tokens: bool = False
    """Ask the policy for the token IDs and log-probs of every turn (vLLM's chat completions:
    `return_token_ids`, `logprobs`) and write them on the turn's last output item as NeMo
    Gym's vLLM model server does; each call is checked (equal lengths, each prompt beginning
    with the previous prompt and generation) and what fails is a gap in the row's
    `ng_model_call_capture.gaps`, counted in CollectResult.token_gaps. Turns model-call
    capture and the trajectory on."""
    trajectory: bool = False
    """Write each generated rollout's trajectory as NeMo Gym's `ng_trajectory` (TrajectoryRecord
    1.0: the turns, the model calls with their requests and answers, the tool calls with
    their timing and outputs, the gaps); turns model-call capture on."""
    capture_payloads: bool = False
    """Keep each call's request and answer in the record too (NeMo Gym leaves them out of the
    row unless asked: they repeat the conversation once per turn)."""
    shard: Shard | None = None
    """Collect only this shard's rollouts (task index modulo its count, or its environment's
    agents) and do not aggregate: one of `collect --processes N`'s processes
    (collector/_processes.py)."""
    environments: Environments | None = None
    """Each agent's servers (`--server AGENT=HOST:PORT`): `collect_processes_async` collects
    each environment in a process of its own and aggregates each agent by its own."""


__all__ = ["CollectOptions"]
