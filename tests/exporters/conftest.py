"""Exporter tests run against the real libraries (a local MLflow store, W&B offline,
tensorboard's event files). Without an extra they skip, except under CI=true (.ci/run installs
the extras on the default venv), where a missing extra fails them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from _transport_helpers import serve_process

AGENTS = [
    {"agent_ref": {"name": "policy_a"}, "key_metrics": {"mean/reward": 0.75, "pass@4": 0.9, "pass^4": 0.5},
     "agent_metrics": {"mean/reward": 0.75, "std/reward": 0.25, "pass@1[avg-of-k]": 0.7, "nan_one": "NaN"},
     "rollout_infos": [{"reward": 1.0}]},
    {"agent_ref": {"name": "policy_b"}, "key_metrics": {"mean/reward": 0.5},
     "agent_metrics": {"mean/reward": 0.5, "max/reward": 1.0}},
]  # fmt: skip


@pytest.fixture
def metrics_file(tmp_path: Path) -> Path:
    """A two-agent metrics file as collect writes it (`<stem>_aggregate_metrics.json`)."""
    path = tmp_path / "out" / "run1_aggregate_metrics.json"
    path.parent.mkdir()
    path.write_text(json.dumps(AGENTS))
    return path


@pytest.fixture
def server() -> Iterator[str]:
    """`gym-metrics serve math_exact` in a subprocess on a free port; its address."""
    with serve_process() as address:
        yield address
