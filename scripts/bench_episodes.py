"""Benchmark tools, sessions and the agent loop (issue 27) on loopback; prints Markdown tables.

Usage: python scripts/bench_episodes.py [--only tools rate concurrent nemo_concurrent] [--rounds 3]
       [--episodes 5000] [--concurrency 64] [--tool-calls 3000] [--tool-calls-each 500]
       [--concurrent-episodes 16000]
       [--nemo-concurrent-episodes 2000] [--latency-s 1.0] [--gc-threshold 0] [--wheel /tmp/nemo/wheel]
       [--nemo-python /tmp/ngvenv/bin/python]

Environments (the output says which one each figure used):
- `counter`: a gym-metrics environment written here (COUNTER_ENV, in the style of
  tests/environments/test_tools_sessions.py: @tool increment_counter / get_counter_value, the
  session seeded with the row's initial_count, verify in the session), served by
  `gym-metrics serve <tmp>/counter_env.py:Counter --port 0`;
- `ported`: NeMo Gym 0.7.0's own resources_servers/example_session_state_mgmt, ported by
  `gym_metrics.nemo_gym.port.port_folder` (as scripts/bench_nemo_env.py ports) and served by
  `gym-metrics serve <its config.yaml> --name example_session_state_mgmt_resources_server`;
- `nemo`: the same example_session_state_mgmt unported, NeMo Gym's own FastAPI app, with NeMo
  Gym's `simple_agent` in front of it, built by scripts/make_nemo_agent_reference.Episodes, each
  under uvicorn (httptools, NeMo Gym's keep-alive protocol, as run_webserver configures it) in
  its own process of the nemo-gym venv (one for the resources server, one for the agent, as
  `ng_run` runs them), driven by an aiohttp client in a third process POSTing each row to the
  agent's /run (one connection per request in flight, no cookie jar).

Policy: a zero-latency (or --latency-s) scripted Responses API policy, POLICY: a raw asyncio
HTTP/1.1 keep-alive server in its own process (ThreadingHTTPServer, gym_metrics.testing's
ScriptedPolicyServer, is far too slow for these rates), answering POST /v1/responses with
gym_metrics.testing's `step_of` / `prompt_of` / `responses_body` (so the answers are the ones
ScriptedPolicyServer gives). Every episode's prompt is "episode N: add A then add B then get the
count": step 0 calls increment_counter(A), step 1 increment_counter(B), step 2
get_counter_value, step 3 answers in text. Per episode: 1 SeedSession, 4 policy calls, 3
CallTool, 1 Verify in the session; the row's expected_count is initial_count + A + B, so every
reward is 1 (checked: a run with a reward other than 1 or a failed rollout fails).

Parts (--only):
1. `tools`: CallTool round trip, `serve --workers 1` of `counter`, from this process: one seeded
   session, --tool-calls sequential get_counter_value calls (latency p50/p99), then 64 callers
   (one session each, one channel) making --tool-calls-each calls each: calls/s and latency
   p50/p99.
2. `rate`: episodes/s of --episodes episodes, --concurrency in flight, zero-latency policy:
   `collect_async` end to end (connect, read the rows, the episodes, write, AggregateMetrics)
   in a collector process (COLLECT child) against
   - `counter`, `serve --workers 1`;
   - `counter`, `serve --workers 2`, the collector given the server once (what
     `gym-metrics collect --server ADDR` does: the agent loop runs every episode on the
     client's one connection, so on one worker process; see the report);
   - `counter`, `serve --workers 2`, the collector given the server's two connections
     (`ResourcesClient.open_connections()`, one per worker) as two replicas;
   - `ported`, `serve --workers 1` and `--workers 2` (two connections);
   - `nemo`, with --concurrency requests in flight.
3. `concurrent`: --concurrent-episodes episodes at once (`ModelTargetConfig(max_concurrency=N)`,
   `serve --workers 1 --max-sessions N+1000` of `counter`) against the policy answering after
   --latency-s: all must finish; per episode time (from the runner's start of the episode,
   SeedSession, to its Verify's answer: EpisodeRunner._episode wrapped in the collector child,
   nothing in gym_metrics changed) p50/p99/max vs --latency-s x 4 policy steps (goal: p99 within
   1.5x), the wall time, peak RSS (VmHWM of /proc/PID/status) of the serve process and of the
   collector process, their CPU and the collector's time in the cyclic GC (gc.callbacks).
   `--gc-threshold N` adds a run whose collector child sets gc.set_threshold(N, 20, 100).
4. `nemo_concurrent`: the same at --nemo-concurrent-episodes through `nemo` (episode time: the
   client's POST /run to its answer), with `counter` at the same scale beside it.

Beside each episodes/s figure, each process's CPU per episode (user + system from /proc/PID/stat,
children included, over the run). Runs alternate (the order of the sides rotates each round); servers start afresh for each run
(untimed); figures are medians of --rounds; each figure is printed with the load average (1, 5,
15 minutes) taken just before its run, and beside a median, after the runs. Every run is
bounded (subprocess timeouts, asyncio timeouts); child processes are stopped on exit (SIGTERM
and Ctrl-C included; the NeMo Gym agent process dies with its parent).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_generate import Child  # noqa: E402

RUN_TIMEOUT_S = 300
"""No single run may take longer than this."""
STEPS = 4
"""Policy calls per episode."""
ENV = "example_session_state_mgmt"
ENV_INSTANCE = "example_session_state_mgmt_resources_server"
PROMPT = re.compile(r"episode (\d+): add (\d+) then add (\d+) then get the count")
TOOLS = [
    {"type": "function", "name": "increment_counter", "description": "", "strict": True,
     "parameters": {"type": "object", "properties": {"count": {"type": "integer", "description": ""}},
                    "required": ["count"], "additionalProperties": False}},
    {"type": "function", "name": "get_counter_value", "description": "", "strict": True,
     "parameters": {"type": "object", "properties": {}, "required": [], "additionalProperties": False}},
]  # fmt: skip
"""example_session_state_mgmt's data/example.jsonl tools, word for word."""

COUNTER_ENV = '''"""bench_episodes.py's counter environment (gym-metrics @tool environment)."""
from typing import Any

import pydantic

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, Session, SimpleResourcesServer, tool


class Add(pydantic.BaseModel):
    count: int


class Seed(pydantic.BaseModel):
    initial_count: int = 0


class CounterRequest(BaseVerifyRequest):
    expected_count: int


class Counter(SimpleResourcesServer):
    async def seed_session(self, session: Session, body: Seed) -> None:  # type: ignore[override]
        session.state["count"] = body.initial_count

    @tool
    async def increment_counter(self, args: Add, session: Session) -> dict[str, Any]:
        """Add `count` to the counter."""
        session.state["count"] += args.count
        return {"success": True}

    @tool
    async def get_counter_value(self, session: Session) -> dict[str, Any]:
        """The counter's value."""
        return {"count": session.state["count"]}

    async def verify(self, body: CounterRequest, session: Session | None = None) -> BaseVerifyResponse:  # type: ignore[override]
        count = session.state["count"] if session is not None else None
        return BaseVerifyResponse(**body.model_dump(), reward=float(count == body.expected_count))
'''


def load() -> str:
    """The load average as `uptime` prints it (1, 5, 15 minutes)."""
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))] if ordered else float("nan")


def peak_rss_mb(pid: int) -> float:
    """VmHWM of `pid` plus that of its child processes (serve --workers N forks them), MiB."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, AttributeError):
            pass
    return total


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` and its child processes so far."""
    total, todo, tick = 0.0, [pid], os.sysconf("SC_CLK_TCK")
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            pass
    return total


def write_rows(path: Path, n: int) -> Path:
    """n episode rows (see the module docstring), every reward 1 when the episode runs right."""
    with path.open("w") as f:
        for i in range(n):
            a, b, initial = 1 + i % 7, 2 + i % 5, i % 11
            request = {"input": [{"role": "user", "content": f"episode {i}: add {a} then add {b} then get the count"}], "tools": TOOLS}
            row = {"responses_create_params": request, "expected_count": initial + a + b, "initial_count": initial,
                   "agent_ref": {"name": "bench_agent"}}  # fmt: skip
            f.write(json.dumps(row) + "\n")
    return path


# ---------------------------------------------------------------- the fast scripted policy (child)


def _policy(delay_s: str) -> None:
    """The POLICY child: a raw asyncio HTTP/1.1 keep-alive server of the scripted policy."""
    import orjson

    from gym_metrics.testing import PolicyAnswer, prompt_of, step_of
    from gym_metrics.testing._policy import responses_body  # (not re-exported)

    delay = float(delay_s)

    def answer(body: dict[str, Any]) -> tuple[int, bytes]:
        prompt, step = prompt_of(body), step_of(body)
        m = PROMPT.fullmatch(prompt)
        if m is None or step >= STEPS:
            return 400, f"no step {step} for prompt {prompt!r}".encode()
        script = [
            PolicyAnswer(tool_calls=[{"name": "increment_counter", "arguments": {"count": int(m.group(2))}}]),
            PolicyAnswer(tool_calls=[{"name": "increment_counter", "arguments": {"count": int(m.group(3))}}]),
            PolicyAnswer(tool_calls=[{"name": "get_counter_value", "arguments": {}}]),
            PolicyAnswer(text="The count is known."),
        ]
        return 200, orjson.dumps(responses_body(script[step], prompt, body, step))

    class Http(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport, self.buffer = transport, bytearray()

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            while True:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(self.buffer[:end]).decode("latin-1")
                length = int(m.group(1)) if (m := re.search(r"(?im)^content-length:\s*(\d+)", head)) else 0
                if len(self.buffer) < end + 4 + length:
                    return
                body = bytes(self.buffer[end + 4 : end + 4 + length])
                del self.buffer[: end + 4 + length]
                path = head.split(" ", 2)[1] if " " in head else ""
                if delay > 0:
                    asyncio.get_running_loop().call_later(delay, self.reply, path, body)
                else:
                    self.reply(path, body)

        def reply(self, path: str, body: bytes) -> None:
            if self.transport.is_closing():
                return
            try:
                status, out = answer(orjson.loads(body)) if path.endswith("/responses") else (404, b"no route")
            except Exception as exc:  # noqa: BLE001 (a bad request answers 400, the server goes on)
                status, out = 400, repr(exc).encode()
            kind = b"application/json" if status == 200 else b"text/plain"
            self.transport.write(
                b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n"
                % (status, b"OK" if status == 200 else b"Bad Request", kind, len(out)) + out
            )

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Http, "127.0.0.1", 0, backlog=20000)
        print(f"policy listening on 127.0.0.1:{server.sockets[0].getsockname()[1]}", file=sys.stderr, flush=True)
        await server.serve_forever()

    asyncio.run(main())


def policy(delay_s: float) -> Child:
    return Child([sys.executable, __file__, "--_policy", str(delay_s)], Child.LISTENING, timeout_s=30)


# ---------------------------------------------------------------- gym-metrics: serve and collect


def serve(target: list[str], workers: int, max_sessions: int = 10_000) -> Child:
    cmd = [sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "serve", *target, "--port", "0",
           "--max-sessions", str(max_sessions)] + ["--workers", str(workers)] * (workers > 1)  # fmt: skip
    return Child(cmd, Child.LISTENING, timeout_s=60)


def _collect(spec_json: str) -> None:
    """The COLLECT child: collect_async of the rows; prints the figures as JSON on stdout."""
    from gym_metrics import ResourcesClient
    from gym_metrics.collector import CollectOptions, collect_async
    from gym_metrics.collector import _episodes
    from gym_metrics.targets import ModelTargetConfig

    spec = json.loads(spec_json)
    gc_cpu, gc_start = [0.0], [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:  # CPU seconds in the cyclic garbage collector
        if phase == "start":
            gc_start[0] = time.process_time()
        else:
            gc_cpu[0] += time.process_time() - gc_start[0]

    gc.callbacks.append(on_gc)
    if spec.get("gc_threshold"):
        gc.set_threshold(spec["gc_threshold"], 20, 100)
    durations: list[float] = []
    original = _episodes.EpisodeRunner._episode

    async def timed(self: Any, client: Any, rollout: Any) -> Any:  # the episode: SeedSession .. Verify's answer
        t0 = time.perf_counter()
        answer = await original(self, client, rollout)
        durations.append(time.perf_counter() - t0)
        return answer

    _episodes.EpisodeRunner._episode = timed  # type: ignore[method-assign]

    async def run() -> dict[str, Any]:
        client = ResourcesClient(spec["server"])
        clients = await client.open_connections(spec["connections"]) if spec["connections"] > 1 else [client]
        target = ModelTargetConfig(url=spec["policy"], model="scripted", api="responses", max_concurrency=spec["concurrency"],
                                   timeout_seconds=RUN_TIMEOUT_S)  # fmt: skip
        options = CollectOptions(target=target, connections=1)
        start, cpu0 = time.perf_counter(), time.process_time()
        try:
            result = await asyncio.wait_for(
                collect_async(clients if len(clients) > 1 else client, spec["rows"], spec["out"], options), RUN_TIMEOUT_S
            )
        finally:
            for c in clients:
                await c.close()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
        rewards = [json.loads(line).get("reward") for line in Path(spec["out"]).read_text().splitlines() if line.strip()]
        return {"wall": wall, "verified": result.verified, "generation_failed": result.generation_failed,
                "tool_calls": result.tool_calls, "failed_tool_calls": result.failed_tool_calls,
                "rewards_one": sum(r == 1.0 for r in rewards), "written": len(rewards), "durations": durations,
                "by_server": result.batches_by_server, "cpu_s": cpu, "gc_s": gc_cpu[0]}  # fmt: skip

    figures = asyncio.run(run())
    figures["rss_mb"] = peak_rss_mb(os.getpid())
    print(json.dumps(figures))


def collect_run(
    server: Child, pol: Child, rows: Path, n: int, concurrency: int, connections: int, work: Path, gc_threshold: int = 0
) -> dict[str, Any]:
    """One collector child's figures; checks every episode finished with reward 1."""
    out = work / "out.jsonl"
    for stale in work.glob("out*"):
        stale.unlink()
    spec = {"server": server.found, "policy": f"http://{pol.found}/v1", "rows": str(rows), "out": str(out),
            "concurrency": concurrency, "connections": connections, "gc_threshold": gc_threshold}  # fmt: skip
    before = cpu_s(server.proc.pid), cpu_s(pol.proc.pid)
    done = subprocess.run([sys.executable, __file__, "--_collect", json.dumps(spec)], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S + 60)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"collector failed ({done.returncode}):\n{done.stderr[-3000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["serve_rss_mb"] = peak_rss_mb(server.proc.pid)
    figures["serve_cpu_s"], figures["policy_cpu_s"] = cpu_s(server.proc.pid) - before[0], cpu_s(pol.proc.pid) - before[1]
    ok = figures["rewards_one"] == n and figures["written"] == n and figures["tool_calls"] == 3 * n and not figures["failed_tool_calls"]
    if not ok:
        raise SystemExit(f"not every episode ran right: {({k: v for k, v in figures.items() if k != 'durations'})}")
    return figures


# ---------------------------------------------------------------- NeMo Gym (children of its venv)


def _nemo_servers(wheel: str, policy_port: str) -> None:
    """NeMo Gym's example_session_state_mgmt resources server and simple_agent, each under uvicorn
    in its own process (this one: resources; a forked child: the agent, dying with its parent)."""
    import ctypes
    import socket
    import warnings
    from functools import partial

    import uvicorn

    import nemo_gym.server_utils as su

    sys.path.insert(1, wheel)
    warnings.simplefilter("ignore")
    from make_nemo_agent_reference import Episodes

    episodes = Episodes(Path(wheel), ENV, int(policy_port))
    apps = episodes.apps()
    keep = su.GlobalAIOHTTPAsyncClientConfig.model_validate({})
    alive = (keep.global_aiohttp_tcp_keepalive_idle_seconds, keep.global_aiohttp_tcp_keepalive_interval_seconds,
             keep.global_aiohttp_tcp_keepalive_probes)  # fmt: skip

    def run(key: str) -> None:
        sock: socket.socket = episodes.sockets[key]
        config = uvicorn.Config(apps[key], timeout_graceful_shutdown=0.5, timeout_keep_alive=30, access_log=False,
                                log_level="warning", lifespan="off", http=partial(su.KeepaliveHttpToolsProtocol, keepalive=alive),
                                backlog=20000)  # fmt: skip

        async def main() -> None:
            su.set_global_aiohttp_client(su.GlobalAIOHTTPAsyncClientConfig())
            await uvicorn.Server(config).serve(sockets=[sock])

        asyncio.run(main())

    if os.fork() == 0:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the parent
        run("agent")
        os._exit(0)
    port = episodes.sockets["agent"].getsockname()[1]
    print(f"nemo-gym agent listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    run("resources")


async def _nemo_drive(address: str, bodies: list[bytes], concurrency: int) -> dict[str, Any]:
    import aiohttp

    url, headers = f"http://{address}/run", {"content-type": "application/json"}
    rewards: list[float] = [float("nan")] * len(bodies)
    durations: list[float] = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=RUN_TIMEOUT_S)
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(), timeout=timeout) as s:
        todo = iter(range(len(bodies)))
        errors: list[str] = []

        async def worker() -> None:
            for i in todo:
                t0 = time.perf_counter()
                async with s.post(url, data=bodies[i], headers=headers) as answer:
                    if answer.status != 200:
                        errors.append(f"{answer.status} {(await answer.text())[:300]}")
                        continue
                    rewards[i] = float((await answer.json())["reward"])
                durations.append(time.perf_counter() - t0)

        start, cpu0 = time.perf_counter(), time.process_time()
        try:
            await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), RUN_TIMEOUT_S)
            timed_out = False
        except asyncio.TimeoutError:
            timed_out = True
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    return {"wall": wall, "cpu_s": cpu, "rewards_one": sum(r == 1.0 for r in rewards), "durations": durations, "errors": errors[:5],
            "n_errors": len(errors), "timed_out": timed_out}  # fmt: skip


def _nemo_client(address: str, rows_path: str, concurrency: str) -> None:
    bodies = [b for b in Path(rows_path).read_bytes().splitlines() if b.strip()]
    figures = asyncio.run(_nemo_drive(address, bodies, int(concurrency)))
    figures["rss_mb"] = peak_rss_mb(os.getpid())
    print(json.dumps(figures))


def nemo_run(ns: argparse.Namespace, pol: Child, rows: Path, n: int, concurrency: int) -> dict[str, Any]:
    me = [ns.nemo_python, __file__]
    port = pol.found.rsplit(":", 1)[1]
    with Child(me + ["--_nemo_servers", str(ns.wheel), port], r"agent listening on (\S+:\d+)", timeout_s=60) as servers:
        time.sleep(1.0)  # the agent process (forked after the line) binds before it
        before = cpu_s(servers.proc.pid), cpu_s(pol.proc.pid)
        try:
            done = subprocess.run(me + ["--_nemo_client", servers.found, str(rows), str(concurrency)], capture_output=True,
                                  text=True, timeout=RUN_TIMEOUT_S + 60)  # fmt: skip
        except subprocess.TimeoutExpired:
            return {"failed": f"the NeMo Gym client did not finish within {RUN_TIMEOUT_S + 60} s (killed)"}
        rss = peak_rss_mb(servers.proc.pid)
        serve_cpu, policy_cpu = cpu_s(servers.proc.pid) - before[0], cpu_s(pol.proc.pid) - before[1]
    if done.returncode != 0:
        return {"failed": f"client exit {done.returncode}: {done.stderr[-1500:]}"}
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["serve_rss_mb"], figures["serve_cpu_s"], figures["policy_cpu_s"] = rss, serve_cpu, policy_cpu
    if figures["rewards_one"] != n:
        figures["failed"] = (f"{n - figures['rewards_one']} of {n} episodes did not finish with reward 1 "
                             f"(timed out: {figures['timed_out']}, {figures['n_errors']} errors, e.g. {figures['errors'][:2]})")  # fmt: skip
    return figures


# ---------------------------------------------------------------- part 1: CallTool round trip


async def _tool_latency(address: str, n: int, callers: int, each: int) -> dict[str, float]:
    from gym_metrics import ResourcesClient

    async with ResourcesClient(address) as client:
        session = await client.seed_session({"initial_count": 1})
        for _ in range(200):  # warm up
            await client.call_tool(session, "get_counter_value", "{}")
        seq = []
        for _ in range(n):
            t0 = time.perf_counter()
            await client.call_tool(session, "get_counter_value", "{}")
            seq.append(time.perf_counter() - t0)
        sessions = [await client.seed_session({"initial_count": k}) for k in range(callers)]
        conc: list[float] = []

        async def caller(s: str) -> None:
            for _ in range(each):
                t0 = time.perf_counter()
                await client.call_tool(s, "get_counter_value", "{}")
                conc.append(time.perf_counter() - t0)

        start = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(caller(s) for s in sessions)), RUN_TIMEOUT_S)
        rate = len(conc) / (time.perf_counter() - start)
    return {"p50": pct(seq, 0.5) * 1e3, "p99": pct(seq, 0.99) * 1e3, "rate": rate,
            "c_p50": pct(conc, 0.5) * 1e3, "c_p99": pct(conc, 0.99) * 1e3, "seq_rate": n / sum(seq)}  # fmt: skip


def part_tools(ns: argparse.Namespace, counter: list[str]) -> str:
    runs: list[dict[str, float]] = []
    for k in range(ns.rounds):
        loads = load()
        with serve(counter, 1) as server:
            r = asyncio.run(_tool_latency(server.found, ns.tool_calls, 64, ns.tool_calls_each))
        runs.append(r)
        print(f"|   tools round {k + 1}: sequential p50 {r['p50']:.3f} ms p99 {r['p99']:.3f} ms ({r['seq_rate']:,.0f} calls/s); "
              f"64 callers {r['rate']:,.0f} calls/s, p50 {r['c_p50']:.2f} ms p99 {r['c_p99']:.2f} ms | {loads} |", flush=True)  # fmt: skip
    med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    return "\n".join([
        f"CallTool over loopback, `counter` env, serve --workers 1, client in one process (medians of {ns.rounds}, {load()}):", "",
        "| CallTool (get_counter_value) | p50 | p99 | calls/s |", "|---|---:|---:|---:|",
        f"| sequential, {ns.tool_calls:,} calls | {med['p50']:.3f} ms | {med['p99']:.3f} ms | {med['seq_rate']:,.0f} |",
        f"| 64 concurrent callers, {64 * ns.tool_calls_each:,} calls | {med['c_p50']:.2f} ms | {med['c_p99']:.2f} ms | {med['rate']:,.0f} |",
    ])  # fmt: skip


# ---------------------------------------------------------------- part 2: episodes/s


RATE_SIDES = {
    "c1": ("counter", 1, 1, "gym-metrics, `counter`, serve --workers 1"),
    "c2one": ("counter", 2, 1, "gym-metrics, `counter`, serve --workers 2, collector given the server once"),
    "c2": ("counter", 2, 2, "gym-metrics, `counter`, serve --workers 2, its 2 connections as replicas"),
    "p1": ("ported", 1, 1, "gym-metrics, `ported` example_session_state_mgmt, serve --workers 1"),
    "p2": ("ported", 2, 2, "gym-metrics, `ported` example_session_state_mgmt, serve --workers 2, 2 connections"),
    "nemo": ("nemo", 0, 0, "NeMo Gym simple_agent + example_session_state_mgmt (uvicorn, 1 process each)"),
}


def part_rate(ns: argparse.Namespace, targets: dict[str, list[str]], work: Path) -> tuple[str, dict[str, float]]:
    rows = write_rows(work / "rows_rate.jsonl", ns.episodes)
    sides = [s for s in RATE_SIDES if s != "nemo" or not ns.no_nemo]
    rates: dict[str, list[float]] = {s: [] for s in sides}
    cpu: dict[str, list[float]] = {s: [] for s in sides}
    with policy(0.0) as pol:
        for k in range(ns.rounds):
            for side in sides[k % len(sides):] + sides[: k % len(sides)]:
                env, workers, connections, label = RATE_SIDES[side]
                loads = load()
                if side == "nemo":
                    f = nemo_run(ns, pol, rows, ns.episodes, ns.concurrency)
                    if "failed" in f:
                        print(f"|   rate round {k + 1}, {label}: FAILED {f['failed']} | {loads} |", flush=True)
                        continue
                else:
                    with serve(targets[env], workers) as server:
                        f = collect_run(server, pol, rows, ns.episodes, ns.concurrency, connections, work)
                rate = ns.episodes / f["wall"]
                rates[side].append(rate)
                cpu[side].append([1e3 * f[key] / ns.episodes for key in ("cpu_s", "serve_cpu_s", "policy_cpu_s")])
                print(f"|   rate round {k + 1}, {label}: {rate:,.0f} episodes/s ({f['wall']:.2f} s; episode p50 "
                      f"{pct(f['durations'], 0.5) * 1e3:.1f} ms; CPU ms per episode: client {cpu[side][-1][0]:.2f}, "
                      f"servers {cpu[side][-1][1]:.2f}, policy {cpu[side][-1][2]:.2f}) | {loads} |", flush=True)  # fmt: skip
    med = {s: statistics.median(v) for s, v in rates.items() if v}
    lines = [f"Episodes/s: {ns.episodes:,} episodes (4 policy calls, 3 CallTool, 1 SeedSession, 1 Verify each), "
             f"{ns.concurrency} in flight, zero-latency policy (medians of {ns.rounds}, {load()}):", "",
             "| side | episodes/s | vs NeMo Gym | CPU ms per episode: collector (client) | servers | policy |",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for side, rate in med.items():
        ratio = f"{rate / med['nemo']:.1f}x" if "nemo" in med else "-"
        c, srv, p = (statistics.median(x) for x in zip(*cpu[side]))
        lines.append(f"| {RATE_SIDES[side][3]} | {rate:,.0f} | {ratio} | {c:.2f} | {srv:.2f} | {p:.2f} |")
    return "\n".join(lines), med


# ---------------------------------------------------------------- parts 3 and 4: concurrency


def concurrent_gm(ns: argparse.Namespace, counter: list[str], n: int, work: Path, gc_threshold: int = 0) -> dict[str, Any]:
    rows = write_rows(work / f"rows_{n}.jsonl", n)
    with policy(ns.latency_s) as pol, serve(counter, 1, max_sessions=n + 1000) as server:
        return collect_run(server, pol, rows, n, n, 1, work, gc_threshold)


def concurrent_nemo(ns: argparse.Namespace, n: int, work: Path) -> dict[str, Any]:
    rows = write_rows(work / f"rows_{n}.jsonl", n)
    with policy(ns.latency_s) as pol:
        return nemo_run(ns, pol, rows, n, n)


def summarise(label: str, runs: list[dict[str, Any]], ideal: float) -> str:
    ok = [r for r in runs if "failed" not in r]
    if not ok:
        return f"| {label} | FAILED: {runs[0]['failed'][:300]} | | | | | | | | |"
    p50, p99, top, wall = (statistics.median(x) for x in zip(*(
        (pct(r["durations"], 0.5), pct(r["durations"], 0.99), max(r["durations"]), r["wall"]) for r in ok)))  # fmt: skip
    srv, cli = statistics.median(r["serve_rss_mb"] for r in ok), statistics.median(r["rss_mb"] for r in ok)
    cpu, scpu = (statistics.median(r[k] for r in ok) for k in ("cpu_s", "serve_cpu_s"))
    gcs = f"{statistics.median(r['gc_s'] for r in ok):.1f} s" if "gc_s" in ok[0] else "-"
    return (f"| {label} | {p50:.2f} s | {p99:.2f} s ({p99 / ideal:.2f}x) | {top:.2f} s | {wall:.1f} s | "
            f"{srv:,.0f} MiB | {cli:,.0f} MiB | {cpu:.1f} s ({gcs}) | {scpu:.1f} s | {len(ok)}/{len(runs)} |")


def part_concurrent(ns: argparse.Namespace, counter: list[str], work: Path, nemo: bool) -> str:
    ideal = ns.latency_s * STEPS
    sides: list[tuple[str, Any]] = []
    if not nemo:
        n = ns.concurrent_episodes
        sides.append((f"gym-metrics, `counter`, serve --workers 1, {n:,} at once", lambda: concurrent_gm(ns, counter, n, work)))
        if ns.gc_threshold:
            label = f"the same, collector child with gc.set_threshold({ns.gc_threshold}, 20, 100)"
            sides.append((label, lambda: concurrent_gm(ns, counter, n, work, ns.gc_threshold)))
    else:
        n = ns.nemo_concurrent_episodes
        sides.append((f"gym-metrics, `counter`, serve --workers 1, {n:,} at once", lambda: concurrent_gm(ns, counter, n, work)))
        sides.append((f"NeMo Gym simple_agent + example_session_state_mgmt, {n:,} at once", lambda: concurrent_nemo(ns, n, work)))
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in sides}
    for k in range(ns.rounds):
        for label, run in sides[k % len(sides):] + sides[: k % len(sides)]:
            loads = load()
            f = run()
            runs[label].append(f)
            if "failed" in f:
                print(f"|   round {k + 1}, {label}: FAILED {f['failed'][:500]} | {loads} |", flush=True)
                continue
            d = f["durations"]
            gc_note = f" (GC {f['gc_s']:.1f})" if "gc_s" in f else ""
            print(f"|   round {k + 1}, {label}: {len(d):,} episodes, p50 {pct(d, 0.5):.2f} s p99 {pct(d, 0.99):.2f} s "
                  f"max {max(d):.2f} s, wall {f['wall']:.1f} s, serve RSS {f['serve_rss_mb']:,.0f} MiB, "
                  f"client RSS {f['rss_mb']:,.0f} MiB; CPU s: client {f['cpu_s']:.1f}{gc_note}, servers {f['serve_cpu_s']:.1f}, "
                  f"policy {f['policy_cpu_s']:.1f} | {loads} |", flush=True)  # fmt: skip
    return "\n".join([
        f"Concurrent episodes, policy answering after {ns.latency_s:g} s (ideal episode {ideal:g} s = {STEPS} policy steps; "
        f"medians of {ns.rounds}, {load()}):", "",
        "| side | episode p50 | episode p99 (vs ideal) | max | wall | server peak RSS | collector / client peak RSS "
        "| collector / client CPU (of it GC) | server CPU | runs ok |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(summarise(label, r, ideal) for label, r in runs.items()),
    ])  # fmt: skip


# ---------------------------------------------------------------- main


def port_env(wheel: Path, root: Path) -> list[str]:
    from gym_metrics.nemo_gym.port import port_folder

    port_folder(wheel / "resources_servers" / ENV, root / "resources_servers" / ENV)
    return [str(root / "resources_servers" / ENV / "configs" / f"{ENV}.yaml"), "--name", ENV_INSTANCE]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=["tools", "rate", "concurrent", "nemo_concurrent"],
                        choices=["tools", "rate", "concurrent", "nemo_concurrent"])  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64, help="episodes in flight for `rate`")
    parser.add_argument("--tool-calls", type=int, default=3000, help="sequential CallTool calls")
    parser.add_argument("--tool-calls-each", type=int, default=500, help="CallTool calls of each of the 64 concurrent callers")
    parser.add_argument("--concurrent-episodes", type=int, default=16_000)
    parser.add_argument("--nemo-concurrent-episodes", type=int, default=2000)
    parser.add_argument("--latency-s", type=float, default=1.0)
    parser.add_argument("--gc-threshold", type=int, default=0,
                        help="`concurrent` also runs the collector child with gc.set_threshold(N, 20, 100) (0: not)")  # fmt: skip
    parser.add_argument("--no-nemo", action="store_true", help="leave NeMo Gym out of `rate`")
    parser.add_argument("--wheel", type=Path, default=Path("/tmp/nemo/wheel"), help="the unzipped nemo-gym 0.7.0 wheel")
    parser.add_argument("--nemo-python", default="/tmp/ngvenv/bin/python", help="python of a nemo-gym 0.7.0 venv")
    ns = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind, so every child is stopped
    nemo_version = subprocess.run([ns.nemo_python, "-c", "import platform; print(platform.python_version())"],
                                  capture_output=True, text=True, timeout=60).stdout.strip()  # fmt: skip
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()} "
          f"(gym-metrics), Python {nemo_version} {ns.nemo_python} (NeMo Gym); {load()}\n", flush=True)  # fmt: skip
    tables = []
    with tempfile.TemporaryDirectory(prefix="bench_episodes_") as tmp:
        work = Path(tmp)
        (work / "counter_env.py").write_text(COUNTER_ENV)
        targets = {"counter": [f"{work / 'counter_env.py'}:Counter"], "ported": port_env(ns.wheel, work)}
        if "tools" in ns.only:
            tables.append(part_tools(ns, targets["counter"]))
        if "rate" in ns.only:
            tables.append(part_rate(ns, targets, work)[0])
        if "concurrent" in ns.only:
            tables.append(part_concurrent(ns, targets["counter"], work, nemo=False))
        if "nemo_concurrent" in ns.only:
            tables.append(part_concurrent(ns, targets["counter"], work, nemo=True))
    print("\n" + "\n\n".join(tables))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--_policy":
        _policy(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--_collect":
        _collect(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "--_nemo_servers":
        _nemo_servers(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "--_nemo_client":
        _nemo_client(*sys.argv[2:])
    else:
        sys.exit(main())
