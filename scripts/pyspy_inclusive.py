"""Each function's share of a `py-spy record -f raw` profile's samples, counted once per sample
it is on (inclusive), and each innermost frame's (self): where a run's time goes by caller, as
BENCHMARKS.md "Session 45" reads the 16,000-episode collect:

    .venv/bin/python scripts/bench_collect_processes.py --episodes 16000 --concurrency 16000 --latency-s 1.0 \\
        --rounds 1 --processes 1 --wrap '.venv/bin/py-spy record -f raw -r 200 -o {out}.raw --' --keep /tmp/spy
    python3 scripts/pyspy_inclusive.py /tmp/spy/out_this_1_0.raw [--top 60]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

FRAME = re.compile(r"(.*) \((.*?):(\d+)\)$")


def name(frame: str) -> str:
    """`function file` without the line, the file shortened past site-packages/ or gym_metrics/."""
    found = FRAME.match(frame)
    if not found:
        return frame
    path = found.group(2).split("site-packages/")[-1].split("gym_metrics/")[-1]
    return f"{found.group(1)} {path}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("raw")
    parser.add_argument("--top", type=int, default=60)
    ns = parser.parse_args()
    inclusive: Counter[str] = Counter()
    innermost: Counter[str] = Counter()
    total = 0
    with open(ns.raw) as f:
        for line in f:
            stack, count = line.rstrip().rsplit(" ", 1)
            n, frames = int(count), stack.split(";")
            total += n
            for key in {name(frame) for frame in frames}:
                inclusive[key] += n
            innermost[name(frames[-1])] += n
    print(f"{total} samples")
    for title, counts in (("inclusive", inclusive), ("self", innermost)):
        print(f"== {title}")
        for key, n in counts.most_common(ns.top):
            print(f"{100 * n / total:5.1f}% {key}")


if __name__ == "__main__":
    main()
