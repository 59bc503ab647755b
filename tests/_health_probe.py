"""A gRPC health prober on a fixed cadence, for the adversarial suites: it shows how long a
server under hostile requests kept other clients waiting.

It runs in a process of its own: a prober thread in the test's process would also wait on the
test's own work (building a 1M-item message holds the test's GIL), not only on the server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

EVERY_S = 0.02
TIMEOUT_S = 5.0


class HealthProber:
    """Sends a health check every 20 ms, whether or not the earlier ones were answered: a server
    stalled for 3 s shows as 150 slow checks, not one (a check not answered within 5 s counts as
    5 s). The latencies are read at stop()."""

    def __init__(self, address: str) -> None:
        self.ms: list[float] = []
        self._proc = subprocess.Popen([sys.executable, __file__, address], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None and self._proc.stdout.readline() == "probing\n"  # the first check was answered
        self._started = time.monotonic()

    def stop(self) -> None:
        if self._proc.poll() is None:
            out, _ = self._proc.communicate(timeout=30)  # closing stdin stops the probe
            self.ms = json.loads(out)

    def assert_p99_under(self, limit_ms: float, min_checks: int = 100) -> None:
        """At least `min_checks` checks were sent, and 99% of them answered within `limit_ms`
        (below 100 checks, that is all but the slowest). Probing lasts at least the time
        `min_checks` checks take (a machine that runs the cases faster still sends them all)."""
        time.sleep(max(0.0, self._started + (min_checks + 1) * EVERY_S - time.monotonic()))
        self.stop()
        times = sorted(self.ms)
        assert len(times) >= min_checks, f"{len(times)} checks (slowest {times[-5:]})"
        p99 = times[int(len(times) * 0.99)]
        print(f"health p99 {p99:.1f} ms, p50 {times[len(times) // 2]:.1f} ms, max {times[-1]:.1f} ms over {len(times)} checks")
        assert p99 < limit_ms, f"health p99 {p99:.1f} ms over {len(times)} checks (max {times[-1]:.1f} ms)"


async def _probe(address: str, stop: threading.Event) -> list[float]:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    ms: list[float] = []

    async def check(stub: health_pb2_grpc.HealthStub) -> None:
        started = time.perf_counter()
        try:
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_S)
            ms.append((time.perf_counter() - started) * 1000)
        except grpc.aio.AioRpcError:
            ms.append(TIMEOUT_S * 1000)

    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        await stub.Check(health_pb2.HealthCheckRequest(), timeout=30)
        print("probing", flush=True)
        sent: set[asyncio.Task[None]] = set()
        tick = time.perf_counter()
        while not stop.is_set():
            task = asyncio.ensure_future(check(stub))
            sent.add(task)
            task.add_done_callback(sent.discard)
            tick += EVERY_S
            await asyncio.sleep(max(0.0, tick - time.perf_counter()))
        await asyncio.gather(*sent)
    return ms


if __name__ == "__main__":  # the prober's process: probe until stdin closes, then print the latencies
    ended = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), ended.set()), daemon=True).start()
    print(json.dumps(asyncio.run(_probe(sys.argv[1], ended))))
