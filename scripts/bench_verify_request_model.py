"""CPU a ported environment's verify body costs in the port's `BaseVerifyRequest`: validated
from JSON and dumped, in process, over an environment's reference rollouts
(tests/data/nemo_gym_envs/<env>/rollouts.jsonl, their request fields) repeated; median of 5
passes of process time. Run a tree before a change with PYTHONPATH=OLD beside this one:

    PYTHONPATH=OLD .venv/bin/python scripts/bench_verify_request_model.py --env xlam_fc
    .venv/bin/python scripts/bench_verify_request_model.py --env xlam_fc
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_envs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="xlam_fc")
    parser.add_argument("--copies", type=int, default=200, help="times the reference rows are repeated")
    args = parser.parse_args()
    from gym_metrics.nemo_gym.base_resources_server import BaseVerifyRequest

    rows = [json.loads(line) for line in (DATA / args.env / "rollouts.jsonl").read_text().splitlines()]
    bodies = [json.dumps({k: v for k, v in r.items() if k != "agent_ref" and not k.startswith("_ng_")}).encode() for r in rows] * args.copies
    passes = []
    for _ in range(5):
        started = time.process_time()
        for body in bodies:
            BaseVerifyRequest.model_validate_json(body).model_dump(mode="json")
        passes.append((time.process_time() - started) / len(bodies) * 1e6)
    print(f"{args.env}: {statistics.median(passes):.1f} us a body (validate and dump, {len(bodies):,} bodies)")


if __name__ == "__main__":
    main()
