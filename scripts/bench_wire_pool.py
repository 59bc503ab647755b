"""The lean policy pool alone (gym_metrics/targets/_wire.py): CPU per request of 30,000 POSTs
to bench_episodes.py's scripted policy (its own process; 0.5 s per answer from 1,000 in flight,
else none), from the checkout TREE, on asyncio's or uvloop's event loop. Run two checkouts side
by side (say a `git worktree` of an older commit) for a before/after figure (BENCHMARKS.md,
"Several collector processes, and collector CPU per episode").

    .venv/bin/python scripts/bench_wire_pool.py . 5000 uvloop
    .venv/bin/python scripts/bench_wire_pool.py /tmp/old 5000 asyncio
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

tree, concurrency, loop = Path(sys.argv[1]).resolve(), int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, str(tree))
sys.path.insert(1, str(Path(__file__).resolve().parent))
import bench_episodes as episodes  # noqa: E402
import orjson  # noqa: E402

from gym_metrics.targets._wire import ByteBudget, WirePool  # noqa: E402

REQUESTS = 30_000


def main() -> None:
    request = {"input": [{"role": "user", "content": "episode 1: add 1 then add 2 then get the count"}], "tools": episodes.TOOLS}
    body = orjson.dumps({"model": "scripted", **request})
    with episodes.policy(0.5 if concurrency >= 1000 else 0.0) as policy:
        url = f"http://{policy.found}/v1"

        async def run() -> float:
            pool = WirePool(url, concurrency, 60, budget=ByteBudget(1 << 30, 2))

            async def caller() -> None:
                for _ in range(REQUESTS // concurrency):
                    status, _, answer = await pool.post(url + "/responses", body, {"Content-Type": "application/json"})
                    assert status == 200, answer

            start = time.thread_time()
            await asyncio.gather(*(caller() for _ in range(concurrency)))
            cpu = time.thread_time() - start
            await pool.aclose()
            return cpu

        cpu = __import__("uvloop").run(run()) if loop == "uvloop" else asyncio.run(run())
    print(f"{tree}: {concurrency} in flight, {loop}: {1e6 * cpu / REQUESTS:.1f} us of CPU a request ({episodes.load()})")


if __name__ == "__main__":
    main()
