"""The collector: verify an input JSONL through a resources server, then aggregate per agent.

Phase 1 streams the input: rows that carry a reward are written to the output as they are,
the rest go through VerifyStream and are appended as their batches are answered. Phase 2 reads
the output column-wise and streams each agent through AggregateMetrics. Every rollout written is
flushed, so a killed run resumes (`resume=True`) where it stopped and ends with the same bytes.
"""

from gym_metrics.collector._progress import Progress
from gym_metrics.collector._options import CollectOptions
from gym_metrics.collector._run import CollectResult, collect, collect_async, estimate_total
from gym_metrics.collector._verify import RetryPolicy
from gym_metrics.collector._outfile import failures_path_for
from gym_metrics.collector._input import indexed_rows

__all__ = ["CollectOptions", "CollectResult", "Progress", "RetryPolicy", "collect", "collect_async", "estimate_total", "failures_path_for", "indexed_rows"]
