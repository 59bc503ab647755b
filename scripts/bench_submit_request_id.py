"""What SubmitJob's request_id costs (BENCHMARKS.md "Session 36"): a 100,000-row inline job stored
by JobStore on a real SQLite file with and without a request_id (the digest of the spec and its
rows), and sent again (answered as stored); medians of --rounds.

    .venv/bin/python scripts/bench_submit_request_id.py --rows 100000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from gym_metrics.jobs import JobStore, parse_spec
from gym_metrics.jobs._spec import RowTexts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    ns = parser.parse_args()
    texts = [orjson.dumps({"expected": {"name": "f", "arguments": {"x": i}}, "output": "x" * 200}).decode() for i in range(ns.rows)]
    spec = parse_spec({"scorer": "tool_call_accuracy", "dataset": {"rows": RowTexts(texts)}})
    with tempfile.TemporaryDirectory() as folder:
        store = JobStore(Path(folder) / "jobs.sqlite")
        for label, request_id in (("without a request_id", ""), ("with a request_id", "r")):
            times = []
            for n in range(ns.rounds):
                start = time.perf_counter()
                store.create_once(spec, f"{request_id}{n}" if request_id else "")
                times.append(time.perf_counter() - start)
            print(f"{label}: {statistics.median(times) * 1000:.0f} ms a {ns.rows:,}-row submission")
        start = time.perf_counter()
        _, new = store.create_once(spec, "r0")
        assert not new
        print(f"sent again, answered as stored: {(time.perf_counter() - start) * 1000:.0f} ms")
        store.close()


if __name__ == "__main__":
    main()
