"""code_tests under `serve --workers 2`: each worker process has its own pool, and the two never
hand out the same user to two runs at once (the uid leases are file locks shared by both)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gym_metrics import cli
from gym_metrics_servers.code_tests import SAMPLE_PATH

sys.path.insert(0, str(Path(__file__).parents[1]))
from _transport_helpers import serve_process  # noqa: E402

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow, pytest.mark.usefixtures("sandbox")]


def test_the_sample_scores_alike_over_two_workers(tmp_path: Path) -> None:
    rows = SAMPLE_PATH.read_text().splitlines() * 4  # 96 rollouts, spread over both workers' connections
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({**json.loads(r), "_ng_rollout_index": i}) + "\n" for i, r in enumerate(rows)))
    out = tmp_path / "out.jsonl"
    with serve_process("code_tests", "--workers", "2") as address:
        assert cli.main(["collect", "--server", address, "--input", str(src), "--output", str(out)]) == 0
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(scored) == len(rows) and not any("_gm_error" in r for r in scored)
    by_agent: dict[str, set[float]] = {}
    for r in scored:
        by_agent.setdefault(r["agent_ref"]["name"], set()).add(r["reward"])
    assert by_agent == {"careful_agent": {1.0}, "hasty_agent": {0.0}}
