"""How collect and demo end: the run's result kept through a Ctrl-C, and the summary printed."""

from __future__ import annotations

import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from gym_metrics.cli._base import format_key_metrics, print_value_notes
from gym_metrics.errors import ExitCode

T = TypeVar("T")


def run_keeping_result(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, with the result kept out of the main task: Python 3.11's runner formats
    its finished main task, result included, when it restores the SIGINT handler (an enum
    lookup that fails with a repr), and a collection's result holds every agent's metric
    arrays (0.3 s of repr at 200k rollouts)."""
    box: list[T] = []

    async def main_task() -> None:
        box.append(await main)

    from gym_metrics._util.aio import run_fast  # here, not at import: `gym-metrics aggregate` starts without asyncio

    run_fast(main_task())
    return box[0]


def report(result: Any, elapsed: float, note: str = "") -> int:
    """Print the key metrics (and `note` under them) and counts; the exit code: 3 when every
    rollout of an agent failed verification (the files are written all the same), else 0."""
    print(format_key_metrics({a.agent_name: a.key_metrics for a in result.aggregates}) + (f"\n{note}" if note else ""))
    print_value_notes(result.aggregates)
    parts = [f"{result.verified} verified", f"{result.passed_through} already scored"]
    failed = sum(int(a.agent_metrics.get("errors/total", 0)) for a in result.aggregates)
    if failed:  # "4 verified" read as four scored when all four failed
        parts.append(f"{failed} failed (rows with _gm_error, out of the score)")
    if result.generated or result.generation_failed > result.unanswered:
        parts.insert(0, f"{result.generated} generated ({result.generation_failed - result.unanswered} generations failed)")
    if result.unanswered:
        parts.append(f"{result.unanswered} rows without a response failed (no --policy-url to generate one)")
    if result.tool_calls:
        parts.insert(1, f"{result.tool_calls} tool calls ({result.failed_tool_calls} answered an error)")
    if result.episodes_at_max_steps:
        parts.append(f"{result.episodes_at_max_steps} episodes stopped at their max_steps (--max-steps, else their agent's in the config)")
    if result.token_gaps:
        parts.append(f"{result.token_gaps} token gaps (missing ids, unequal lengths, lineage breaks: ng_model_call_capture.gaps)")
    if result.episodes_retried:
        parts.append(f"{result.episodes_retried} episodes started again on another server")
    if result.dropped:
        classes = ", ".join(f"{kind}: {n}" for kind, n in sorted(result.dropped.items()))
        parts.append(f"{sum(result.dropped.values())} rollouts dropped from the score ({classes}; see {result.failures_path})")
    if result.not_kept:
        parts.append(f"{result.not_kept} rollouts not kept (their agent's harness failed: _ng_no_persist; --resume runs them again)")
    if result.no_reward:
        parts.append(f"{result.no_reward} rollouts verified without a reward (verify gave NaN or infinity: null in the row and, as in NeMo Gym, out of the reward stats)")
    if result.reverified:
        parts.append(f"--reverify: {result.rewards_changed} of {result.reverified} rewards differ from the stored ones")
    if result.skipped_done:
        parts.append(f"{result.skipped_done} already in the output (resumed)")
    if result.bad_lines:
        parts.append(f"{len(result.bad_lines)} bad lines skipped")
    print(f"{', '.join(parts)} in {elapsed:.2f}s")
    if result.passed_through and not result.verified and not result.generated:
        print("note: every row already carried a reward, so nothing was verified; --reverify verifies them again")
    if len(result.batches_by_server) > 1:
        print(("episodes" if result.tool_calls else "batches") + " per server: " + ", ".join(f"{s} {n}" for s, n in result.batches_by_server.items()))
    print(f"rollouts -> {result.rollouts_path}\nmetrics  -> {result.metrics_path}")
    from gym_metrics.collector import failures_path_for

    for f in result.failed_agents:
        kinds = ", ".join(f"{kind}: {n}" for kind, n in f.by_kind.items())
        where = f"none scored: see {failures_path_for(result.rollouts_path)}" if f.dropped else f"see _gm_error in {result.rollouts_path}"
        print(
            f"error: agent {f.agent}: {f.rollouts} of {f.rollouts} rollouts failed"
            f"{' verification' if 'generation' not in f.by_kind else ''} ({kinds}) — {where}",
            file=sys.stderr,
        )
    return ExitCode.ALL_FAILED if result.failed_agents else ExitCode.OK
