"""The viewer on a large rollouts file (BENCHMARKS.md "Rollout viewer"): how long until the whole
file is indexed, until the first page answers, the peak memory of the process, and the time of
a filtered page, a tasks page, a text search page and opening one rollout (medians), all through
the real HTTP API of a real server.

    python scripts/bench_view.py make /tmp/view_1m.jsonl --rows 1000000
    python scripts/bench_view.py measure /tmp/view_1m.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any


def make(path: Path, rows: int, repeats: int) -> None:
    """Rows shaped as collect writes a single-turn rollout (about 1 KB each)."""
    rng = random.Random(0)
    with path.open("w") as f:
        for i in range(rows):
            task, rollout = divmod(i, repeats)
            reward = float(rng.random() < 0.6)
            row: dict[str, Any] = {
                "agent_ref": {"name": f"policy-{task % 2}"}, "_ng_task_index": task, "_ng_rollout_index": rollout,
                "responses_create_params": {"input": [{"role": "system", "content": "You are a careful math assistant. Answer with a number."},
                                                      {"role": "user", "content": f"Problem {task}: what is {task} times {rollout + 3} minus 7? Think step by step."}]},
                "response": {"id": f"resp_{i}", "status": "completed", "output": [{"type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": f"Multiplying {task} by {rollout + 3} gives {task * (rollout + 3)}; minus 7 is {task * (rollout + 3) - 7}. The answer is {task * (rollout + 3) - 7 + (0 if reward else 1)}."}]}],
                    "usage": {"input_tokens": 40, "output_tokens": 38, "total_tokens": 78}},
                "reward": reward, "extracted_answer": str(task * (rollout + 3) - 7), "is_correct": bool(reward), "seconds": round(rng.random(), 3),
            }  # fmt: skip
            if i % 997 == 0:
                row.pop("reward")
                row["_gm_error"] = {"kind": "timeout", "message": "the policy did not answer in 60 s"}
            f.write(json.dumps(row) + "\n")


def _get(url: str) -> tuple[float, Any]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as res:
        body = json.loads(res.read())
    return time.perf_counter() - start, body


def measure(path: Path, repeat: int) -> dict[str, Any]:
    from gym_metrics.view import Viewer

    start = time.perf_counter()
    with Viewer([path]) as v:
        first_page = None
        while True:
            _, runs = _get(v.url + "api/runs")
            run = runs["runs"][0]
            if first_page is None and run["rows"]:
                _get(v.url + "api/runs/0/rows?limit=50")
                first_page = time.perf_counter() - start
            if run["bytes"] == run["file_size"] and run["rows"]:
                break
            time.sleep(0.05)
        indexed = time.perf_counter() - start
        lines = [r["line"] for r in _get(v.url + f"api/runs/0/rows?limit=500&offset={run['rows'] * 2 // 5}")[1]["rows"]]
        probes = {
            "filtered_page_s": f"api/runs/0/rows?agent=policy-1&reward_max=0&offset={run['rows'] // 10}&limit=50",
            "tasks_page_s": f"api/runs/0/tasks?agent=policy-0&offset={run['rows'] // 50}&limit=50",
            "search_page_s": "api/runs/0/rows?q=problem+77777%3A&limit=50",
            "rollout_s": None,
        }
        timed: dict[str, list[float]] = {k: [] for k in probes}
        for _ in range(repeat):
            for key, url in probes.items():
                took, _ = _get(v.url + (url or f"api/runs/0/rollouts/{random.choice(lines)}"))
                timed[key].append(took)
    return {
        "rows": run["rows"], "file_mb": round(run["file_size"] / 1e6, 1),
        "first_page_s": round(first_page or 0.0, 3), "indexed_s": round(indexed, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        **{k: round(statistics.median(v), 4) for k, v in timed.items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("path", type=Path)
    m.add_argument("--rows", type=int, default=1_000_000)
    m.add_argument("--repeats", type=int, default=10)
    r = sub.add_parser("measure")
    r.add_argument("path", type=Path)
    r.add_argument("--repeat", type=int, default=15)
    ns = p.parse_args()
    if ns.cmd == "make":
        make(ns.path, ns.rows, ns.repeats)
    else:
        print(json.dumps(measure(ns.path, ns.repeat)))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
