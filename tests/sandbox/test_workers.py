"""code_tests under `serve --workers 2`: each worker process has its own pool, and the two never
hand out the same user to two runs at once (the uid leases are file locks shared by both)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gym_metrics import cli
from gym_metrics_servers.code_tests import SAMPLE_PATH

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow, pytest.mark.usefixtures("sandbox")]


def test_the_sample_scores_alike_over_two_workers(tmp_path: Path) -> None:
    err = tmp_path / "serve.err"
    with open(err, "wb") as stderr:
        server = subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", "serve", "code_tests", "--port", "0", "--workers", "2"],
                                  stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"listening on (\S+:\d+)", err.read_text())):
            assert server.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        rows = SAMPLE_PATH.read_text().splitlines() * 4  # 96 rollouts, spread over both workers' connections
        src = tmp_path / "in.jsonl"
        src.write_text("".join(json.dumps({**json.loads(r), "_ng_rollout_index": i}) + "\n" for i, r in enumerate(rows)))
        out = tmp_path / "out.jsonl"
        assert cli.main(["collect", "--server", found[1], "--input", str(src), "--output", str(out)]) == 0
    finally:
        server.terminate()
        server.wait(30)
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(scored) == len(rows) and not any("_gm_error" in r for r in scored)
    by_agent: dict[str, set[float]] = {}
    for r in scored:
        by_agent.setdefault(r["agent_ref"]["name"], set()).add(r["reward"])
    assert by_agent == {"careful_agent": {1.0}, "hasty_agent": {0.0}}
