"""What the nesting check before pyarrow's JSON reader costs (gym_metrics/_util/jsonscan.c):
`gym-metrics aggregate` of a generated rollouts file (ROWS rows of trajectories, about 1.5 KB
each) with the check and with it replaced by one that says no, in turn, ROUNDS rounds, wall
and CPU seconds of each process; then the check alone against pyarrow's parse of one 9 MB
chunk. BENCHMARKS.md, "The audits' fixes, and what they cost".

    .venv/bin/python scripts/bench_depth_check.py --rows 200000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN = """
import sys
if sys.argv[1] == "off":
    from gym_metrics.rollouts import _arrow
    _arrow.too_deep = lambda *a, **k: False
from gym_metrics.cli import main
sys.exit(main(["aggregate", sys.argv[2], "-o", sys.argv[3], "-q"]))
"""


def rows(n: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        messages = [{"role": "user", "content": "Solve: " + "x " * rng.randint(20, 200)}]
        output = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "word " * rng.randint(20, 300)}]},
                  {"type": "function_call", "name": "calc", "arguments": json.dumps({"x": i}), "call_id": "c1"},
                  {"type": "function_call_output", "call_id": "c1", "output": "42"}]  # fmt: skip
        out.append(json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": i // 4, "_ng_rollout_index": i % 4, "reward": float(rng.random() < 0.5),
                               "responses_create_params": {"input": messages}, "response": {"output": output}}))  # fmt: skip
    return ("\n".join(out) + "\n").encode()


def timed(mode: str, path: Path, out: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", RUN, mode, str(path), str(out)], check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rollouts.jsonl"
        path.write_bytes(rows(args.rows))
        print(f"{args.rows:,} rows, {path.stat().st_size / 1e6:.0f} MB")
        results: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        timed("on", path, Path(tmp) / "warm.json")
        for _ in range(args.rounds):
            for mode in ("on", "off"):
                results[mode].append(timed(mode, path, Path(tmp) / f"{mode}.json"))
        assert (Path(tmp) / "on.json").read_bytes() == (Path(tmp) / "off.json").read_bytes()
        for mode, runs in results.items():
            print(f"check {mode:3}: wall {statistics.median(w for w, _ in runs):.2f} s, cpu {statistics.median(c for _, c in runs):.2f} s (medians of {len(runs)})")
        ratios = [a[0] / b[0] for a, b in zip(results["on"], results["off"])]
        print(f"wall on/off, pair by pair: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")

    import pyarrow as pa
    import pyarrow.json as pj

    from gym_metrics._util.jsonscan import too_deep

    block = rows(6000, seed=2)
    for name, call in (("pyarrow read_json", lambda: pj.read_json(pa.BufferReader(pa.py_buffer(block)))),
                       ("the depth check", lambda: too_deep(block, 0, len(block), 1024))):  # fmt: skip
        times = []
        for _ in range(9):
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
        best = statistics.median(times)
        print(f"{name:18}: {best * 1000:.2f} ms for {len(block) / 1e6:.1f} MB ({len(block) / best / 1e9:.2f} GB/s), median of 9")


if __name__ == "__main__":
    main()
