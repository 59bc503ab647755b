"""The policy calls' HTTP client against others (BENCHMARKS.md, "The collector's CPU per episode:
native HTTP clients and Python 3.13"): POSTs to bench_episodes.py's scripted policy (its own
process, `--latency-s` an answer), each answer parsed with orjson, on uvloop, the connections
warmed first; the CPU of the whole client process (its threads too) a request. Each client runs
in its own process, in turn, `--rounds` times. The other clients are not dependencies:
`pip install pyreqwest pyqwest aiohttp` for them (a client that is not installed is skipped).

    .venv/bin/python scripts/bench_http_clients.py --concurrency 2000 --requests 30000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
CLIENTS = ("wire", "pyreqwest", "pyqwest", "aiohttp")


def _one(url: str, kind: str, concurrency: int, requests: int) -> None:
    """The child: `requests` POSTs from `concurrency` callers; prints µs of CPU a request."""
    import orjson
    import uvloop

    body = orjson.dumps({"model": "scripted", "input": [{"role": "user", "content": "episode 1: add 1 then add 2 then get the count"}]})
    headers = {"Content-Type": "application/json"}

    async def main() -> None:
        if kind == "wire":
            from gym_metrics.targets._wire import ByteBudget, WirePool

            pool = WirePool(url, concurrency, 60, budget=ByteBudget(1 << 30, 2))

            async def one() -> None:
                status, _, answer = await pool.post(url + "/responses", body, headers)
                assert status == 200
                orjson.loads(answer)

            close = pool.aclose
        elif kind == "pyreqwest":
            from pyreqwest.client import ClientBuilder

            client = ClientBuilder().max_connections(concurrency).http1_only().build()

            async def one() -> None:
                answer = await client.post(url + "/responses").header("Content-Type", "application/json").body_bytes(body).build().send()
                assert answer.status == 200
                orjson.loads(bytes(await answer.bytes()))

            close = client.close
        elif kind == "pyqwest":
            import pyqwest

            qclient = pyqwest.Client()

            async def one() -> None:
                answer = await qclient.post(url + "/responses", headers=headers, content=body)
                assert answer.status == 200
                orjson.loads(answer.content)

            async def close() -> None:
                return None
        else:
            import aiohttp

            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))

            async def one() -> None:
                async with session.post(url + "/responses", data=body, headers=headers) as answer:
                    assert answer.status == 200
                    orjson.loads(await answer.read())

            close = session.close

        async def caller() -> None:
            for _ in range(requests // concurrency):
                await one()

        await asyncio.gather(*(one() for _ in range(concurrency)))  # the connections, made
        cpu = time.process_time()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        cpu = time.process_time() - cpu
        await close()
        print(f"{1e6 * cpu / (requests // concurrency * concurrency):.1f}")

    uvloop.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=30000)
    parser.add_argument("--latency-s", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--_one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._one:
        url, kind, concurrency, requests = args._one
        _one(url, kind, int(concurrency), int(requests))
        return
    import bench_episodes as episodes

    with episodes.policy(args.latency_s) as policy:
        url = f"http://{policy.found}/v1"
        found: dict[str, list[float]] = {kind: [] for kind in CLIENTS}
        for _ in range(args.rounds):
            for kind in CLIENTS:
                done = subprocess.run([sys.executable, __file__, "--_one", url, kind, str(args.concurrency), str(args.requests)],
                                      capture_output=True, text=True, timeout=600)  # fmt: skip
                if done.returncode == 0:
                    found[kind].append(float(done.stdout.split()[-1]))
                elif "ModuleNotFoundError" not in done.stderr:
                    raise SystemExit(f"{kind}: {done.stderr[-2000:]}")
    print(f"{args.requests} requests, {args.concurrency} in flight, {args.latency_s} s an answer ({episodes.load()})")
    for kind, values in found.items():
        print(f"{kind}: " + (", ".join(f"{v:.1f}" for v in values) + " µs of CPU a request" if values else "not installed"))


if __name__ == "__main__":
    main()
