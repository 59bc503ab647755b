"""`gym-metrics ARGS` (e.g. `serve math_exact --port 0`) with a watchdog that records where the
event loop was whenever it misses a 10 ms heartbeat by more than 120 ms: the stack of every
thread, appended to /tmp/stalls.txt. A stall inside a C call that holds the GIL shows only once
it ends (the watchdog needs the GIL too). Used for BENCHMARKS.md's "Every door bounded": swap
it in for `-m gym_metrics.cli` in scripts/bench_server_limits.py's start_server.

    python scripts/watch_loop_serve.py serve math_exact --port 0
"""
import sys, threading, time, traceback, asyncio, os
main_ident = threading.main_thread().ident
beat = [time.monotonic()]
def install_beat():
    async def beater():
        while True:
            beat[0] = time.monotonic()
            await asyncio.sleep(0.01)
    return beater
orig_run = asyncio.run
def run(coro, **kw):
    async def both():
        t = asyncio.ensure_future(install_beat()())
        try:
            return await coro
        finally:
            t.cancel()
    return orig_run(both(), **kw)
asyncio.run = run
def watchdog():
    last_dump = 0
    while True:
        time.sleep(0.02)
        lag = time.monotonic() - beat[0]
        if lag > 0.12 and time.monotonic() - last_dump > 0.1:
            last_dump = time.monotonic()
            frames = sys._current_frames()
            with open("/tmp/stalls.txt", "a") as f:
                f.write(f"--- lag {lag*1000:.0f} ms\n")
                for tid, fr in frames.items():
                    name = [t.name for t in threading.enumerate() if t.ident == tid]
                    stack = traceback.format_stack(fr)[-6:]
                    f.write(f"thread {name}:\n" + "".join(stack))
threading.Thread(target=watchdog, daemon=True).start()
sys.argv = ["gym-metrics", *sys.argv[1:]]
from gym_metrics.cli import main
sys.exit(main())
