"""NeMo Gym's rollout_verdicts.jsonl beside a rollouts file, read by a real viewer: a line that
is not a verdict (not JSON, an unknown verdict, a task index past what the index keys hold) is
skipped alone; the others still mark their rows (one task index past 64 bits hid them all)."""

from __future__ import annotations

import json
from pathlib import Path

from gym_metrics.view import Viewer

from _viewer_data import write_run
from test_view_api import get, loaded


def test_a_line_that_is_no_verdict_hides_only_itself(tmp_path: Path) -> None:
    write_run(tmp_path / "run.jsonl", "p", tasks=3, repeats=1, reward=lambda t, r: 1.0)
    lines = [json.dumps({"_ng_task_index": 2**63, "_ng_rollout_index": 0, "verdict": "unhealthy"}), "not json",
             json.dumps({"_ng_task_index": 0, "_ng_rollout_index": 0, "verdict": "sick"}),
             json.dumps({"_ng_task_index": 1, "_ng_rollout_index": 0, "verdict": "unhealthy"}),
             json.dumps({"_ng_task_index": 2, "_ng_rollout_index": 0, "verdict": "unobserved"})]  # fmt: skip
    (tmp_path / "rollout_verdicts.jsonl").write_text("\n".join(lines) + "\n")
    with Viewer([tmp_path / "run.jsonl"]) as v:
        [run] = loaded(v)
        assert run["agents"][0]["verdicts"] == {"unhealthy": 1, "unobserved": 1}
        rows = get(v.url + "api/runs/0/rows?limit=5")["rows"]
        assert [(r["task"], r["verdict"]) for r in rows] == [(0, ""), (1, "unhealthy"), (2, "unobserved")]
