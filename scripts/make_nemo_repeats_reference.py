"""Record NeMo Gym 0.7.0's /aggregate_metrics of tests/nemo_gym/envs/repeats_env (an environment
overriding compute_repeat_metrics) on ROWS, for tests/nemo_gym/test_repeat_metrics.py.

A tool for producing test data, run in a throwaway nemo-gym venv:

    /tmp/ngvenv/bin/python scripts/make_nemo_repeats_reference.py            # write
    /tmp/ngvenv/bin/python scripts/make_nemo_repeats_reference.py --check    # compare (exit 1 on a difference)

ROWS: 4 tasks x 3 repeats of verify answers (reward = score >= 0.5), task 3 missing its repeat
2; each sent with its `_ng_task_index`, `_ng_rollout_index` and `agent_ref`, as the collection
sends them. The environment's `aggregate_metrics` (NeMo Gym's compute_aggregate_metrics with its
hooks) answers; agent_metrics, key_metrics and repeat_level_metrics are written to
tests/data/nemo_gym_repeats/aggregate.json with the rows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from reference_file import load_module, write_or_check  # scripts/

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "tests" / "nemo_gym" / "envs" / "repeats_env"
OUT = ROOT / "tests" / "data" / "nemo_gym_repeats" / "aggregate.json"

SCORES = {0: [0.9, 0.4, 0.7], 1: [0.2, 0.6, 0.1], 2: [0.55, 0.95, 0.3], 3: [0.8, 0.45]}


def rows() -> list[dict[str, Any]]:
    out = []
    for task, scores in SCORES.items():
        for repeat, score in enumerate(scores):
            out.append({"agent_ref": {"name": "repeats_env_simple_agent"}, "_ng_task_index": task, "_ng_rollout_index": repeat,
                        "score": score, "reward": float(score >= 0.5), "mask_sample": False, "failure_kind": None, "failure_reason": None})  # fmt: skip
    return out


def aggregate(given: list[dict[str, Any]]) -> dict[str, Any]:
    from nemo_gym.config_types import AggregateMetricsRequest
    from nemo_gym.server_utils import ServerClient

    module = load_module(ENV / "app.py", "repeats_env_app")
    config = module.RepeatsConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="repeats_env", domain="other")
    server = module.RepeatsServer(config=config, server_client=ServerClient.model_construct())
    result = asyncio.run(server.aggregate_metrics(AggregateMetricsRequest(verify_responses=given)))
    dumped = result.model_dump(mode="json")
    return {k: dumped[k] for k in ("agent_metrics", "key_metrics", "repeat_level_metrics")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    given = rows()
    text = json.dumps({"nemo_gym": "0.7.0", "rows": given, "aggregate": aggregate(given)}, indent=1) + "\n"
    return write_or_check(OUT, text, args.check)


if __name__ == "__main__":
    sys.exit(main())
