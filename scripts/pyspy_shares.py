"""Where a process's samples go, from `py-spy record --native -f raw` output: each sample by its
innermost frame, split into gym_metrics' own Python (bytecode, or the interpreter's object calls
under a gym_metrics frame), system calls and libc under gym_metrics' frames, C extensions under
them, and everything else (libraries, their waits). BENCHMARKS.md "Session 41" reads the 16,000
episode run this way:

    .venv/bin/python scripts/bench_collect_processes.py --episodes 16000 --concurrency 16000 --latency-s 1.0 \\
        --rounds 1 --processes 1 --wrap 'py-spy record --native -f raw -r 100 -o {out}.raw --' --keep /tmp/spy
    python3 scripts/pyspy_shares.py /tmp/spy/out_this_1_0.raw
"""

from __future__ import annotations

import re
import sys
from collections import Counter

PY_FRAME = re.compile(r"\.py:\d+\)$")
INTERPRETER = re.compile(r"libpython|\((object|dictobject|listobject|ceval|abstract|unicodeobject|typeobject|_asynciomodule|call|genobject|longobject|tupleobject|frameobject)[^)]*\)$")


def kind(frames: list[str]) -> str:
    """The share a sample (its frames, outermost first) counts in."""
    python = [f for f in frames if PY_FRAME.search(f)]
    ours = bool(python) and "gym_metrics/" in python[-1]
    leaf = frames[-1]
    if not ours:
        return "libraries (asyncio, uvloop, grpc, threads' waits)"
    if PY_FRAME.search(leaf) or INTERPRETER.search(leaf):
        return "gym_metrics' own Python, interpreted"
    if "libc.so" in leaf:
        return "system calls and libc under gym_metrics' frames"
    return "C extensions under gym_metrics' frames"


def main(path: str) -> None:
    shares: Counter[str] = Counter()
    for line in open(path):
        stack, count = line.rstrip().rsplit(" ", 1)
        frames = stack.split(";")
        if not any("epoll_wait" in f for f in frames[-3:]):  # the loop waiting for work: not CPU
            shares[kind(frames)] += int(count)
    total = sum(shares.values())
    for what, n in shares.most_common():
        print(f"{n / total:6.1%}  {what}")


if __name__ == "__main__":
    main(sys.argv[1])
