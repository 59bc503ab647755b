"""The collector: verify an input JSONL through a resources server, then aggregate per agent.

Phase 1 streams the input: rows that carry a reward are written to the output as they are,
the rest go through VerifyStream (or, with a policy, run as episodes of the agent loop,
`run_episode`) and are appended as their batches are answered. Phase 2 reads the output
column-wise and streams each agent through AggregateMetrics. Every rollout written is flushed,
so a killed run resumes (`resume=True`) where it stopped and ends with the same bytes.

The agent loop and the options load no grpc; the names that talk to a server load it on first
use, so in-process evaluation can run episodes without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gym_metrics.collector._counted import counted_in_shards
from gym_metrics.collector._counted import rows_read as counted_rows_read
from gym_metrics.collector._counted import unmatched_classes
from gym_metrics.collector._environments import Environments, split_server
from gym_metrics.collector._agent_loop import ONE_CALL_AGENTS, SEEDING_AGENTS, CallTool, EpisodeResult, add_usage, run_episode
from gym_metrics.collector._input import indexed_rows
from gym_metrics.collector._options import CollectOptions, RetryPolicy
from gym_metrics.collector._outfile import failures_path_for, max_rollout_attempts_from_env
from gym_metrics.collector._progress import Progress
from gym_metrics.collector._processes import ShardProgress, child_argv, close_shards, die_with_parent, open_shards
from gym_metrics.collector._shard import Shard, shard_dir, stats_path
from gym_metrics.collector._keys import task_lines_path

if TYPE_CHECKING:
    from gym_metrics.collector._run import CollectResult, collect, collect_async, estimate_total
    from gym_metrics.collector._run_processes import collect_processes_async

_ON_FIRST_USE = {
    "CollectResult": "_run",
    "collect": "_run",
    "collect_async": "_run",
    "collect_processes_async": "_run_processes",
    "estimate_total": "_run",
}


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CallTool",
    "CollectOptions",
    "CollectResult",
    "Environments",
    "EpisodeResult",
    "Progress",
    "RetryPolicy",
    "Shard",
    "ShardProgress",
    "add_usage",
    "child_argv",
    "close_shards",
    "collect",
    "collect_async",
    "collect_processes_async",
    "counted_in_shards",
    "counted_rows_read",
    "unmatched_classes",
    "die_with_parent",
    "estimate_total",
    "failures_path_for",
    "max_rollout_attempts_from_env",
    "indexed_rows",
    "open_shards",
    "run_episode",
    "ONE_CALL_AGENTS",
    "SEEDING_AGENTS",
    "shard_dir",
    "split_server",
    "stats_path",
    "task_lines_path",
]
