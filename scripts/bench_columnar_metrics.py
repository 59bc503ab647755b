"""Aggregator.finalize with math_exact's hooks (the `gym-metrics aggregate --env math_exact`
path: rows read from a JSONL file), 125k tasks x 8 and 1M x 1 rollouts, median of 3."""
import json, statistics, time
from pathlib import Path
import numpy as np
from gym_metrics.aggregate import Aggregator
from gym_metrics.rollouts import read_rollouts
from gym_metrics_servers.math_exact.app import MathExactServer

env = MathExactServer()
for tasks, repeats in ((125_000, 8), (1_000_000, 1)):
    path = Path(f"/tmp/i12/bench_{tasks}x{repeats}.jsonl")
    if not path.exists():
        rng = np.random.default_rng(0)
        with path.open("w") as f:
            for t in range(tasks):
                for r in range(repeats):
                    f.write(json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r,
                                        "reward": float(rng.random() < 0.4), "extracted_answer": "42", "is_correct": False}) + "\n")
    cols = read_rollouts(path).agents["a"]
    times = []
    for _ in range(3):
        agg = Aggregator("a")
        agg.add(cols)
        t = time.perf_counter(); env.finalize(agg); times.append(time.perf_counter() - t)
    print(f"{tasks} x {repeats}: median {statistics.median(times):.2f} s  ({', '.join(f'{x:.2f}' for x in times)})", flush=True)
