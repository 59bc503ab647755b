"""Rollout health checks: NeMo Gym 0.7.0's 14 checks over rollout files, each rollout healthy,
unhealthy or unobserved, written to its `quality_summary.json` and `rollout_verdicts.jsonl`."""

from gym_metrics.health._checks import CHECKS, Digest, Verdict, check_rollout
from gym_metrics.health._run import INPUTS_FILE, SUMMARY_FILE, VERDICTS_FILE, Health, check_health, summarize, verdicts_cover

__all__ = ["CHECKS", "Digest", "Health", "INPUTS_FILE", "SUMMARY_FILE", "VERDICTS_FILE", "Verdict", "check_health", "check_rollout", "summarize", "verdicts_cover"]
