"""The kernel's cost of a connect() as connections to one address pile up: asyncio's
`create_connection(host, port)` against the policy pool's sockets, whose local ports are spread
over the whole range (gym_metrics/targets/_sockets.py). Each way opens --connections
connections to one listener (bench_episodes.py's policy child, in its own process) in steps of
--step, all kept open, in a child process of its own; per step the system and user CPU a
connection (getrusage of that child). The ways run in turn, --rounds times; before each, the
script waits (at most --settle-s) until the system's TIME_WAIT sockets, which the last way's
closes left, are below --quiet-tw, and prints how many there were.

    .venv/bin/python scripts/bench_connect_ports.py --connections 18000 --step 2000 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import bench_episodes as episodes  # noqa: E402  (its policy child is the listener)

WAYS = ("create_connection", "spread ports")


def time_wait() -> int:
    """TIME_WAIT sockets of the system now (/proc/net/sockstat)."""
    match = re.search(r"\btw (\d+)", Path("/proc/net/sockstat").read_text())
    return int(match.group(1)) if match else 0


def _opener(way: str, address: str, connections: int, step: int) -> None:
    """The child: open the connections step by step, printing each step's CPU a connection."""
    import uvloop

    from gym_metrics.targets._sockets import open_connection

    host, port = address.rsplit(":", 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, connections + 1000)), hard))

    async def one(loop: asyncio.AbstractEventLoop) -> Any:
        if way == "create_connection":
            return await loop.create_connection(asyncio.Protocol, host, int(port))
        return await open_connection(loop, asyncio.Protocol, host, int(port), None)

    async def main() -> None:
        loop, kept, steps = asyncio.get_running_loop(), [], []
        while len(kept) < connections:
            before = resource.getrusage(resource.RUSAGE_SELF)
            kept += await asyncio.gather(*(one(loop) for _ in range(min(step, connections - len(kept)))))
            after = resource.getrusage(resource.RUSAGE_SELF)
            n = len(kept) - (steps[-1][0] if steps else 0)
            steps.append((len(kept), 1e6 * (after.ru_stime - before.ru_stime) / n, 1e6 * (after.ru_utime - before.ru_utime) / n))
        print(json.dumps(steps))

    uvloop.run(main())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=18_000)
    parser.add_argument("--step", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle-s", type=float, default=70.0, help="wait at most this long for TIME_WAIT sockets to go")
    parser.add_argument("--quiet-tw", type=int, default=1_000)
    parser.add_argument("--_opener", nargs=4, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns._opener:
        way, address, connections, step = ns._opener
        _opener(way, address, int(connections), int(step))
        return
    runs: dict[str, list[list[tuple[int, float, float]]]] = {way: [] for way in WAYS}
    seen_tw: dict[str, list[int]] = {way: [] for way in WAYS}
    with episodes.policy(1.0) as listener:
        for _ in range(ns.rounds):
            for way in WAYS:
                deadline = time.monotonic() + ns.settle_s
                while time_wait() > ns.quiet_tw and time.monotonic() < deadline:
                    time.sleep(1.0)
                seen_tw[way].append(time_wait())
                cmd = [sys.executable, __file__, "--_opener", way, listener.found, str(ns.connections), str(ns.step)]
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                if done.returncode != 0:
                    raise SystemExit(f"{way} failed:\n{done.stderr[-2000:]}")
                runs[way].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{ns.connections} connections to one listener, in steps of {ns.step}; medians of {ns.rounds} rounds; "
          f"TIME_WAIT sockets before each run: {seen_tw}; {episodes.load()}")  # fmt: skip
    print("| connections open | " + " | ".join(f"{way}: system us | user us" for way in WAYS) + " |")
    print("|---:|" + "---:|---:|" * len(WAYS))
    for i, (count, _, _) in enumerate(runs[WAYS[0]][0]):
        cells = [f"{statistics.median(r[i][k] for r in runs[way]):.1f}" for way in WAYS for k in (1, 2)]
        print(f"| {count:,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
