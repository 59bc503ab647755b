"""Run a command and write the CPU its threads used, by thread (user and system seconds from
/proc/PID/task/TID/stat, sampled every 0.2 s until it exits; Linux only). For
bench_collect_processes.py's `--wrap`, to split the collector's CPU between its event loop
thread and the rest (gRPC's and the executor's threads):

    .venv/bin/python scripts/bench_collect_processes.py --episodes 16000 --concurrency 16000 --latency-s 1.0 \
        --rounds 1 --processes 1 --wrap '.venv/bin/python scripts/thread_cpu.py {out}.threads' --keep /tmp/threads

    python scripts/thread_cpu.py OUT COMMAND [ARG ...]

OUT gets a line per thread name (`[main]` marks the process's first thread): threads, user s,
system s. A thread that ends between two samples loses its last 0.2 s at most.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, command = sys.argv[1], sys.argv[2:]
    proc = subprocess.Popen(command)
    last: dict[str, tuple[str, int, int]] = {}
    while proc.poll() is None:
        try:
            tids = os.listdir(f"/proc/{proc.pid}/task")
        except OSError:
            tids = []
        for tid in tids:
            try:
                with open(f"/proc/{proc.pid}/task/{tid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")] + ("[main]" if tid == str(proc.pid) else "")
            fields = stat[stat.rindex(")") + 2 :].split()
            last[tid] = (name, int(fields[11]), int(fields[12]))  # utime, stime (clock ticks)
        time.sleep(0.2)
    tick = os.sysconf("SC_CLK_TCK")
    by_name: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for name, user, system in last.values():
        by_name[name][0] += 1
        by_name[name][1] += user
        by_name[name][2] += system
    with open(out, "w") as f:
        for name, (count, user, system) in sorted(by_name.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
            f.write(f"{name}\tthreads={count}\tuser={user / tick:.2f}\tsys={system / tick:.2f}\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
