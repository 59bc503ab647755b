"""Server under load: health latency during a big aggregation, 1M tasks x 1 vs 125k x 8,
and whether a cancelled call stops and gives its memory back.

Starts `gym-metrics serve` in a subprocess on 127.0.0.1:0, drives it with raw stubs and
prints (and with --out writes) one JSON object of figures. Every loop is bounded.

    python scripts/bench_server_limits.py [--rollouts 1000000] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _health_probe import HealthProber  # noqa: E402

from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def start_server(extra: list[str], env: str = "math_exact", watch_loop: bool = False) -> tuple[subprocess.Popen[str], str]:
    launcher = [str(Path(__file__).with_name("watch_loop_serve.py"))] if watch_loop else ["-m", "gym_metrics.cli"]
    proc = subprocess.Popen(
        [sys.executable, *launcher, "serve", env, "--port", "0", *extra],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if m := re.search(r"listening on (\S+)", line):
            # Keep reading its access log, or a full pipe would stall the server.
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError("server did not start")


def requests(n_tasks: int, k: int, reward: bool, chunk: int = 100_000) -> list[pb.AggregateMetricsRequest]:
    out = [pb.AggregateMetricsRequest(header=pb.AggregateMetricsHeader(agent_ref=pb.AgentRef(name="a")))]
    t = np.repeat(np.arange(n_tasks), k)
    r = np.tile(np.arange(k), n_tasks)
    rng = np.random.default_rng(0)
    for lo in range(0, len(t), chunk):
        b = pb.RolloutBatch(batch_id=str(lo), task_index=t[lo : lo + chunk].tolist(), rollout_index=r[lo : lo + chunk].tolist())
        if reward:
            col = b.columns["reward"]
            col.values.extend(rng.integers(0, 2, len(b.task_index)).astype(float).tolist())
        out.append(pb.AggregateMetricsRequest(batch=b))
    return out


async def aggregate(stub: Any, reqs: list[Any], timeout: float | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    try:
        async for _ in stub.AggregateMetrics(iter(reqs), timeout=timeout):
            pass
        status = "OK"
    except grpc.aio.AioRpcError as exc:
        status = f"{exc.code().name}: {exc.details()[:120]}"
    return time.perf_counter() - start, status


async def probe_health(address: str, stop: asyncio.Event, every: float = 0.02) -> list[float]:
    """Health latencies (s) until `stop`, on a channel of its own."""
    lat: list[float] = []
    async with grpc.aio.insecure_channel(address) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        while not stop.is_set() and len(lat) < 100_000:
            t0 = time.perf_counter()
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=30)
            lat.append(time.perf_counter() - t0)
            await asyncio.sleep(every)
    return lat


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000 if values else float("nan")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    proc, address = start_server(args.serve_args, args.env, args.watch_loop)
    figures: dict[str, Any] = {"rollouts": args.rollouts, "env": args.env}
    try:
        async with grpc.aio.insecure_channel(
            address, options=[("grpc.max_send_message_length", 256 << 20), ("grpc.max_receive_message_length", 256 << 20)]
        ) as ch:
            stub = resources_pb2_grpc.ResourcesServiceStub(ch)
            await aggregate(stub, requests(10, 2, True))  # warm up
            base_rss = rss_mb(proc.pid)
            figures["rss_idle_mb"] = round(base_rss, 1)

            phases = () if args.cancel_only else (("125k_x_8", args.rollouts // 8, 8), ("1M_x_1", args.rollouts, 1))
            for label, tasks, k in phases:
                reqs = requests(tasks, k, True)
                stop = asyncio.Event()
                prober = asyncio.create_task(probe_health(address, stop))
                peak = 0.0

                async def watch() -> None:
                    nonlocal peak
                    while not stop.is_set():
                        peak = max(peak, rss_mb(proc.pid))
                        await asyncio.sleep(0.05)

                watcher = asyncio.create_task(watch())
                seconds, status = await aggregate(stub, reqs)
                stop.set()
                lat = await prober
                await watcher
                figures[label] = {
                    "seconds": round(seconds, 2), "status": status, "peak_rss_mb": round(peak, 1),
                    "health_p50_ms": round(pct(lat, 50), 1), "health_p99_ms": round(pct(lat, 99), 1),
                    "health_max_ms": round(pct(lat, 100), 1), "health_checks": len(lat),
                }  # fmt: skip
                print(label, figures[label], file=sys.stderr)

            # Calls the client gives up on: --cancel-factor x the rollouts as tasks, no columns. One
            # by its deadline (it lands while the rows still arrive), then one cancelled by the
            # client each --cancel-after seconds after its last message (inside the aggregation).
            reqs = requests(args.rollouts * args.cancel_factor, 1, False, chunk=250_000)  # under --max-rows-per-batch
            for label, after in (("cancelled", None), *((f"cancelled_{d:g}s_after_sent", d) for d in args.cancel_after)):
                before = rss_mb(proc.pid)
                prober = HealthProber(address)  # its own process (this one builds 1M-task messages): the call, its cancel, the clean-up
                if after is None:
                    seconds, status = await aggregate(stub, reqs, timeout=args.cancel_deadline)
                else:
                    status = await cancel_after_sent(stub, reqs, after)
                figures[label] = {
                    **await settle(proc.pid, prober), "rollouts": args.rollouts * args.cancel_factor, "status": status,
                    **({"deadline_s": args.cancel_deadline} if after is None else {"cancelled_s_after_sent": after}),
                    "rss_before_mb": round(before, 1), "rss_5s_after_mb": round(rss_mb(proc.pid), 1),
                }  # fmt: skip
                print(label, figures[label], file=sys.stderr)
    finally:
        stop_server(proc)
    return figures


async def cancel_after_sent(stub: Any, reqs: list[Any], after: float) -> str:
    """Send `reqs` as one call and cancel it `after` s past its last message."""
    sent = asyncio.Event()

    async def stream() -> Any:
        for r in reqs:
            yield r
        sent.set()

    call = stub.AggregateMetrics(stream())

    async def drain() -> str:
        try:
            async for _ in call:
                pass
            return "OK"
        except grpc.aio.AioRpcError as exc:
            return f"{exc.code().name}: {exc.details()[:120]}"
        except asyncio.CancelledError:
            return "CANCELLED by the client"

    answer = asyncio.create_task(drain())
    await sent.wait()
    await asyncio.sleep(after)
    call.cancel()
    return await answer


async def settle(pid: int, prober: HealthProber) -> dict[str, Any]:
    """After a call is gone: when the server's CPU went idle, and the health figures over the
    call and 5 s after it."""
    gone = time.perf_counter()
    ticks = cpu_ticks(pid)
    stopped_after = None
    while time.perf_counter() - gone < 30:
        await asyncio.sleep(0.25)
        now = cpu_ticks(pid)
        if now - ticks <= 5:  # < 20% of a core over the last 250 ms: idle
            stopped_after = time.perf_counter() - gone - 0.25
            break
        ticks = now
    await asyncio.sleep(max(0.0, 5 - (time.perf_counter() - gone)))
    prober.stop()
    lat = [ms / 1000 for ms in prober.ms]
    return {
        "health_p99_ms": round(pct(lat, 99), 1), "health_max_ms": round(pct(lat, 100), 1), "health_checks": len(lat),
        "work_stopped_after_s": None if stopped_after is None else round(max(stopped_after, 0.0), 2),
    }  # fmt: skip


def stop_server(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL past 15 s."""
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rollouts", type=int, default=1_000_000)
    parser.add_argument("--env", default="math_exact", help="environment served (tool_calling has no compute_metrics)")
    parser.add_argument("--cancel-factor", type=int, default=4, help="the cancelled call sends this many times --rollouts tasks (under --max-tasks-per-call)")
    parser.add_argument("--cancel-deadline", type=float, default=2.0)
    parser.add_argument("--cancel-after", type=float, nargs="*", default=[0.5, 2.0, 4.0], help="cancel a call this many s after its last message (one call each)")
    parser.add_argument("--watch-loop", action="store_true", help="serve under scripts/watch_loop_serve.py (stalls to /tmp/stalls.txt)")
    parser.add_argument("--cancel-only", action="store_true", help="skip the two timed aggregations")
    parser.add_argument("--serve-args", nargs=argparse.REMAINDER, default=[])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    figures = asyncio.run(run(args))
    figures["machine"] = f"{os.cpu_count()} cores, {sys.platform}, python {sys.version.split()[0]}"
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
