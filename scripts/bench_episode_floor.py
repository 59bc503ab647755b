"""The least CPU an episode's policy exchanges can cost one Python asyncio process, beside what
`gym-metrics collect` costs an episode (issue 42's goal: 0.35 ms at 16,000 in flight).

The floor is a bare client in a child process of its own: uvloop, for each of --episodes
episodes (--concurrency at once) the same four Responses API POSTs collect makes to
bench_episodes.py's scripted policy (its rows, tools and answers; --latency-s), each body
encoded and each answer parsed with orjson, nothing written; first with the function calls
answered with a fixed output and no environment, then with the session's calls as collect makes
them (SeedSession, each CallTool, Verify, over the client's multiplexed session stream, to the
`serve --workers 2` of bench_episodes.py's counter environment that collect runs against), then
with those and its policy calls made by collect's own policy client (`ModelTarget`, lean pool),
then the whole episode run by collect's agent loop (`run_episode` with `tool_caller`, the row's
request as collect sends it) without collect's runner, input or output. Its connections are
opened as collect's pool opens them (`gym_metrics.targets._sockets.open_connection`) and kept
alive; the cyclic GC is off. Its CPU (getrusage: user and system) is counted over the episodes
only, collect's over its whole process (start-up, the rows, the episodes, the aggregation),
as bench_collect_processes.py counts it. Runs alternate, --rounds of each; medians.

    .venv/bin/python scripts/bench_episode_floor.py --episodes 16000 --concurrency 16000 --latency-s 1.0 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import bench_collect_processes as processes  # noqa: E402  (collect run as a user runs it)
import bench_episodes as episodes  # noqa: E402  (the rows, the policy and the counter environment)

ROOT = Path(__file__).resolve().parent.parent


def _floor(address: str, rows_path: str, concurrency: int, server: str, policy_client: str) -> None:
    """The child: the bare client (see the module docstring), with the session's calls to
    `server` when one is given, and its policy calls made by collect's policy client
    (`ModelTarget`) when `policy_client` is "target", by its agent loop when "loop"; prints its
    CPU as JSON."""
    import orjson
    import uvloop

    from gym_metrics import ResourcesClient
    from gym_metrics._transport.client import tool_caller
    from gym_metrics.collector._agent_loop import run_episode
    from gym_metrics.targets import ModelTarget, ModelTargetConfig
    from gym_metrics.targets._sockets import open_connection

    host, port = address.rsplit(":", 1)
    rows = [json.loads(line) for line in Path(rows_path).read_text().splitlines()]

    class Exchange(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport, self.buffer = transport, bytearray()

        def send(self, request: bytes) -> asyncio.Future[bytes]:
            self.answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
            self.buffer.clear()
            self.transport.write(request)
            return self.answer

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            length = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
            if len(self.buffer) >= end + 4 + length:
                self.answer.set_result(bytes(self.buffer[end + 4 : end + 4 + length]))

    async def main() -> dict[str, float]:
        loop, idle, slots = asyncio.get_running_loop(), [], asyncio.Semaphore(concurrency)
        head = f"POST /v1/responses HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n".encode()

        async def post(body: dict[str, Any]) -> dict[str, Any]:
            if idle:
                conn = idle.pop()
            else:
                conn = await open_connection(loop, Exchange, host, int(port), None)
            payload = orjson.dumps(body)
            answer = orjson.loads(await conn.send(head + b"Content-Length: %d\r\n\r\n" % len(payload) + payload))
            idle.append(conn)
            return answer

        async def episode(row: dict[str, Any]) -> None:
            request = row["responses_create_params"]
            if agent_loop:
                return await looped(row, request)
            async with slots:
                session = await calls.seed_session(row) if calls is not None else ""
                question = list(request["input"])
                for _ in range(episodes.STEPS):
                    if target is not None:
                        answer = (await target.generate({**request, "input": question})).response
                    else:
                        answer = await post({**request, "model": "scripted", "input": question})
                    for item in answer["output"]:
                        question.append(item)
                        if item.get("type") == "function_call":
                            output = (await calls.call_tool(session, item["name"], item["arguments"])).output if calls is not None else "1"
                            question.append({"type": "function_call_output", "call_id": item["call_id"], "output": output})
                if calls is not None:
                    reward, _ = await calls.verify_text({**row, "response": {**answer, "output": question[len(request["input"]):]}}, session_id=session)
                    assert reward == 1.0, reward

        async def looped(row: dict[str, Any], request: dict[str, Any]) -> None:
            """The episode as collect's agent loop runs it (run_episode, tool_caller), no runner."""
            async with slots:
                session = await calls.seed_session(row)
                done = await run_episode(target, request, tool_caller(calls, session, names))
                reward, _ = await calls.verify_text({**row, "response": done.response}, session_id=session)
                assert reward == 1.0, reward

        agent_loop, target = policy_client == "loop", None
        names = [t["name"] for t in rows[0]["responses_create_params"].get("tools", [])]
        if policy_client in ("target", "loop"):  # as collect makes it (--policy-url/-model/-api/-concurrency)
            config = ModelTargetConfig(url=f"http://{address}/v1", model="scripted", api="responses", max_concurrency=concurrency)
            target = ModelTarget(config, lean_http=True)
        client = await ResourcesClient(server).__aenter__() if server else None
        calls = client.session_stream() if client is not None else None
        gc.freeze()
        gc.disable()
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        await asyncio.gather(*(episode(r) for r in rows))
        after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
        if client is not None:
            await client.__aexit__(None, None, None)
        if target is not None:
            await target.aclose()
        return {"wall": wall, "user": after.ru_utime - before.ru_utime, "system": after.ru_stime - before.ru_stime}

    print(json.dumps(uvloop.run(main())))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=16_000)
    parser.add_argument("--concurrency", type=int, default=16_000)
    parser.add_argument("--latency-s", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--_floor", nargs=5, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns._floor:
        _floor(ns._floor[0], ns._floor[1], int(ns._floor[2]), ns._floor[3], ns._floor[4])
        return
    ns.wrap, ns.processes = "", 1  # (what bench_collect_processes.run reads)
    levels = {  # (with the session's calls, the policy client)
        "bare client, the 4 policy exchanges only": (False, "bare"),
        "bare client and the session's 5 calls (SeedSession, 3 CallTool, Verify)": (True, "bare"),
        "the same, the policy called through collect's client (ModelTarget)": (True, "target"),
        "the same, the episode run by collect's agent loop (run_episode, tool_caller)": (True, "loop"),
    }
    floors: dict[str, list[dict[str, float]]] = {level: [] for level in levels}
    collects: list[tuple[float, float]] = []
    with processes.counter_run(ns, "bench-floor-") as (work, rows, server, policy):
        for round_ in range(ns.rounds):
            for level, (with_session, policy_client) in levels.items():
                cmd = [sys.executable, __file__, "--_floor", policy.found, str(rows), str(ns.concurrency), server.found if with_session else "", policy_client]
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
                if done.returncode != 0:
                    raise SystemExit(f"the floor client failed:\n{done.stderr[-3000:]}")
                floors[level].append(json.loads(done.stdout.strip().splitlines()[-1]))
            wall, cpu, _, _, _ = processes.run(ns, server, policy, rows, work / f"out_{round_}.jsonl", 1, ROOT)
            collects.append((wall, cpu))
    per = 1000 / ns.episodes
    print(f"{ns.episodes} episodes, {ns.concurrency} in flight, policy latency {ns.latency_s} s, {ns.rounds} rounds (medians); {episodes.load()}")
    print("| client | wall s | CPU ms an episode | of it user | system |")
    print("|---|---:|---:|---:|---:|")
    for level, runs in floors.items():
        user, system, wall = (statistics.median(f[k] for f in runs) for k in ("user", "system", "wall"))
        total = statistics.median(f["user"] + f["system"] for f in runs)
        print(f"| {level} | {wall:.2f} | {per * total:.3f} | {per * user:.3f} | {per * system:.3f} |")
    print(f"| gym-metrics collect, the whole episode | {statistics.median(c[0] for c in collects):.2f} | "
          f"{per * statistics.median(c[1] for c in collects):.3f} | | |")  # fmt: skip


if __name__ == "__main__":
    main()
