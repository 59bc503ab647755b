"""A ported environment's compute_repeat_metrics is honoured as NeMo Gym honours it: called
per repeat with that repeat's rows by task, its names replacing the generic repeat-level ones
(a value not finite on one repeat drops the name everywhere), their across-repeats summaries
made again, the key metrics taken before. tests/nemo_gym/envs/repeats_env against NeMo Gym
0.7.0's own aggregate (tests/data/nemo_gym_repeats, scripts/make_nemo_repeats_reference.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gym_metrics.nemo_gym import load_config_server
from gym_metrics.nemo_gym.port import port_folder

HERE = Path(__file__).parent
RECORDED = json.loads((HERE.parent / "data" / "nemo_gym_repeats" / "aggregate.json").read_text())


def _close(ours: dict[str, Any], theirs: dict[str, Any], where: str) -> None:
    missing = sorted(k for k in theirs if k not in ours)
    assert not missing, f"{where}: missing {missing}"
    for key, value in theirs.items():
        if isinstance(value, float):
            assert math.isclose(ours[key], value, rel_tol=1e-9, abs_tol=1e-12), (where, key, ours[key], value)
        else:
            assert ours[key] == value, (where, key)


async def test_compute_repeat_metrics_folds_in_as_under_nemo_gym(tmp_path: Path) -> None:
    folder = tmp_path / "repeats_env"
    port_folder(HERE / "envs" / "repeats_env", folder)
    server = load_config_server(folder / "configs" / "repeats_env.yaml")
    assert server.wants_rows  # the hook reads rows
    ours = await server.aggregate_metrics(RECORDED["rows"], agent_name="repeats_env_simple_agent")
    theirs = RECORDED["aggregate"]
    _close(ours.agent_metrics, theirs["agent_metrics"], "agent_metrics")
    assert not any("spread" in k for k in ours.agent_metrics)  # NaN on repeat 1: dropped, as NeMo Gym drops it
    _close(ours.key_metrics, theirs["key_metrics"], "key_metrics")
    assert len(ours.repeat_level_metrics) == len(theirs["repeat_level_metrics"])
    for mine, recorded in zip(ours.repeat_level_metrics, theirs["repeat_level_metrics"]):
        _close(mine, {k: v for k, v in recorded.items() if k != "agent_ref"}, f"repeat {recorded['_ng_rollout_index']}")
        assert "spread" not in mine
