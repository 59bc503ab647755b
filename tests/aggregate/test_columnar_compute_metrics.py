"""Issue 12 (2): the columnar `compute_metrics_columns(MetricColumns)` hook."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gym_metrics import MetricColumns, SimpleResourcesServer
from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics._transport.client import ResourcesClient
from gym_metrics.aggregate import Aggregator, aggregate_file
from gym_metrics.rollouts import RolloutColumns
from gym_metrics.collector import Progress, collect_async
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse

SEEN: list[MetricColumns] = []
ROWS_SEEN: list[bool] = []


class _RecordingAggregator(Aggregator):
    def add(self, batch: RolloutColumns) -> None:
        ROWS_SEEN.append(batch.rows is not None)
        super().add(batch)


class ColumnarEnv(SimpleResourcesServer):
    """Reward = the request's `reward`; metrics only from the columnar hook."""

    name = "columnar_env"

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        extra = body.model_extra or {}
        return BaseVerifyResponse(reward=float(extra.get("r", 0.0)), score=float(extra.get("s", 0.5)))

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        raise AssertionError("the columnar hook wins: no row dicts")

    def compute_metrics_columns(self, columns: MetricColumns) -> dict[str, Any]:
        SEEN.append(columns)
        solved = np.nan_to_num(np.nanmax(np.where(np.isnan(columns.rewards), -np.inf, columns.rewards), axis=1)) >= 1.0
        per_task = [{"_ng_task_index": t, "solved": float(s)} for t, s in zip(columns.task_index.tolist(), solved)]
        return {"solved_rate": float(solved.mean()), "per_task_metrics": per_task}

    def new_aggregator(self, agent_name: str, options: Any = None) -> Aggregator:
        return _RecordingAggregator(agent_name, options)


ROWS = [
    # task 3: rollouts 0, 2 (1 missing), reward missing on rollout 2
    {"_ng_task_index": 3, "_ng_rollout_index": 0, "reward": 1.0, "score": 0.25},
    {"_ng_task_index": 3, "_ng_rollout_index": 2, "score": 0.5},
    # task 7: three rollouts, a bool reward
    {"_ng_task_index": 7, "_ng_rollout_index": 1, "reward": 0.0, "score": 1.0},
    {"_ng_task_index": 7, "_ng_rollout_index": 0, "reward": True},
    {"_ng_task_index": 7, "_ng_rollout_index": 2, "reward": 0.5, "score": 2.0},
    # task 9: masked entirely -> not in the columns
    {"_ng_task_index": 9, "_ng_rollout_index": 0, "reward": 1.0, "mask_sample": True},
]


def test_the_hook_gets_the_matrix_and_its_results_land_in_agent_metrics_and_groups() -> None:
    SEEN.clear()
    env = ColumnarEnv()
    assert not env.wants_rows and env.server_info()["wants_rows"] is False
    agg = env.new_aggregator("a")
    agg.add(RolloutColumns.from_rows(ROWS))
    result = env.finalize(agg)

    (cols,) = SEEN
    assert cols.task_index.tolist() == [3, 7]
    assert cols.counts.tolist() == [2, 3] and cols.offsets.tolist() == [0, 2, 5] and len(cols) == 5
    assert cols.rollout_task_index.tolist() == [3, 3, 7, 7, 7]
    assert cols.rollout_index.tolist() == [0, 2, 0, 1, 2]
    np.testing.assert_array_equal(cols.rewards, [[1.0, np.nan, np.nan], [1.0, 0.0, 0.5]])
    np.testing.assert_array_equal(cols.values["score"], [0.25, 0.5, np.nan, 1.0, 2.0])
    assert set(cols.values) == {"reward", "score"}

    assert result.agent_metrics["solved_rate"] == 1.0
    groups = {g["_ng_task_index"]: g for g in _groups(result)}
    assert groups[3]["solved"] == 1.0 and groups[7]["solved"] == 1.0
    assert "solved" not in groups.get(9, {})


def _groups(result: Any) -> list[dict[str, Any]]:
    from gym_metrics.aggregate import iter_group_dicts

    return list(iter_group_dicts(result.groups))


def test_from_task_rows_matches_the_engine_view() -> None:
    rows = [[{"_ng_task_index": 4, "_ng_rollout_index": 0, "reward": 1}, {"_ng_task_index": 4, "_ng_rollout_index": 1}],
            [{"_ng_task_index": 6, "_ng_rollout_index": 0, "reward": "x"}]]
    cols = MetricColumns.from_task_rows(rows)
    assert cols.task_index.tolist() == [4, 6] and cols.counts.tolist() == [2, 1]
    np.testing.assert_array_equal(cols.rewards, [[1.0, np.nan], [np.nan, np.nan]])
    assert math.isnan(cols.reward[2])


async def test_server_and_in_process_agree_and_the_collector_sends_no_rows(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    lines = []
    for t in range(6):
        for r in range(1 + t % 3):
            lines.append({"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r,
                          "r": float((t + r) % 2), "s": t / 10})
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    server = await start_server(ColumnarEnv(), ServerConfig(port=0, log_requests=False))
    client = ResourcesClient(server.address)
    try:
        ROWS_SEEN.clear()
        out = tmp_path / "run" / "rollouts.jsonl"
        result = await collect_async(client, src, out, progress=Progress(None, stream=io.StringIO()))
        assert ROWS_SEEN and not any(ROWS_SEEN)  # the collector sent columns only
    finally:
        await client.close()
        await server.stop(0)
    env = ColumnarEnv()
    offline, _, _ = aggregate_file(
        out, tmp_path / "offline.json", compute_metrics_columns=env.columnar_metrics_hook(),
        get_key_metrics=env.get_key_metrics, column_metrics=env.column_metrics_hook(),
    )
    assert result.metrics_path is not None
    assert offline.read_bytes() == result.metrics_path.read_bytes()
    data = json.loads(offline.read_bytes())
    assert data[0]["agent_metrics"]["solved_rate"] == pytest.approx(5 / 6)
