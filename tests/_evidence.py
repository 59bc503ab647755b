"""Comparing a rollout's recorded evidence with NeMo Gym's: clocks and generated ids set aside."""

from __future__ import annotations

import re
from typing import Any

CLOCKS = {"started_at", "completed_at", "timestamp", "duration_ms", "latency_total_ms", "latency_ttft_ms", "observed_at", "total_latency_ms"}
EVIDENCE = ("ng_agent_observations", "ng_model_call_capture", "ng_trajectory", "ng_perf")
"""The keys a recorded rollout's evidence is under, in the order NeMo Gym writes them."""


def stable(value: Any, ids: dict[str, str]) -> Any:
    """`value` with its clocks and generated ids (uuid hex) made comparable: each id named by the
    order it first appears in."""
    if isinstance(value, dict):
        return {k: ("<clock>" if k in CLOCKS and v is not None else stable(v, ids)) for k, v in value.items()}
    if isinstance(value, list):
        return [stable(v, ids) for v in value]
    if isinstance(value, str):
        return re.sub(r"\b[0-9a-f]{32}\b", lambda m: ids.setdefault(m.group(0), f"<id {len(ids)}>"), value)
    return value
