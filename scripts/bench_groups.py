"""Benchmark group scoring for RL trainers (issue 28) on loopback; prints Markdown tables.

Usage: python scripts/bench_groups.py [--only latency rate nemo] [--workers 1 2] [--what-if] [--rounds 3] [--calls 500]
       [--duration 10] [--groups-per-call 64] [--in-flight 4] [--nemo-groups-in-flight 16]
       [--profile] [--wheel /tmp/nemo/wheel] [--nemo-python /tmp/ngvenv/bin/python]

Load: GRPO-shaped groups. A group is one prompt ("Problem k: what is A + B?", expected answer
A + B) and 16 completions, each a reasoning text of 1-4 KB (words and small sums, seeded) ending
"The answer is N."; N is right for 10 of the 16 and wrong for 6 (positions vary by group; off by
100 to 900, as string_match gives 0.98 to a number within 2%), so
every reward is known in advance and every call's rewards are checked (a run that differs fails).
64 distinct groups are built once and cycled.

Server: `gym-metrics serve math_exact --port 0 [--workers 2] [--http-port 0]` in a child process
(the HTTP door is one process: `--http-port` with `--workers 1` only), started afresh for each
round of each configuration, untimed; 20 warm-up calls before every measured door.

1. `latency`: one group of 16 per call, --calls sequential calls, p50/p99 per door:
   - gRPC `ResourcesClient.score_groups([(row, completions)], omit_responses=True)` (as trainers
     call it) and with responses; with `--workers 2`, one connection per worker
     (`ResourcesClient.open_connections()`), calls alternating over them;
   - the TRL adaptor, `gym_metrics.integrations.trl.reward_function(server)` (synchronous, as
     GRPOTrainer calls it): `prompts` the prompt repeated 16 times, `completions`,
     `completion_ids`, `expected_answer` a column of 16;
   - HTTP `POST /score_groups` (omit_responses) and `POST /get_reward` (OpenRLHF's shape), one
     aiohttp keep-alive connection, bodies encoded per call.
2. `rate`: sustained rewards/s for --duration seconds, every door kept full:
   - gRPC: calls of --groups-per-call groups (1,024 completions), --in-flight calls per
     connection, omit_responses, over every connection;
   - TRL adaptor: `reward_function(server, asynchronous=True)` called with --groups-per-call
     prompts x 16 completions, --in-flight x connections calls at once (TRL runs async reward
     functions concurrently; the adaptor's shared client batches them);
   - HTTP: `POST /score_groups` with --groups-per-call groups and `POST /get_reward` with as many
     queries, --in-flight requests at once (one connection each).
   Rewards/s = completions scored / wall time from the first call to the last answer (calls
   started before the deadline all count). Beside it, CPU ms per 1,000 rewards of this client
   process (time.process_time, the adaptor's thread included) and of the server (its process
   tree, /proc).
3. `nemo`: NeMo Gym 0.7.0 has no math_exact. Its math environment without a judge,
   `math_with_judge` with `should_use_judge: false`, needs math-verify (not in either venv) and
   forks a process per completion, polled every 50 ms; so the closest self-contained answer
   scorer is used: `string_match` (extraction_mode final_answer: the last "Answer: ..."), with
   the same 16 completions per group, the last sentence written "Final answer: N." for it.
   (A) NeMo Gym's own server of it, served as scripts/bench_nemo_env.py serves it (its FastAPI
       app under uvicorn with NeMo Gym's keep-alive protocol, one worker, a child of the
       nemo-gym venv); its only door is `POST /verify`, one completion per request: a group is
       16 concurrent POSTs (aiohttp of this venv, in this process, keep-alive, no cookie jar,
       bodies encoded before the clock). Latency:
       --calls groups one after another; rate: --nemo-groups-in-flight groups at once for
       --duration seconds.
   (B) the same environment ported (`gym_metrics.nemo_gym.port.port_folder`, as bench_nemo_env.py
       ports it) and served by `gym-metrics serve <its config.yaml>`, --workers 1 and 2, through
       ScoreGroups exactly as part 1 and 2's gRPC door.

Runs alternate (the order of the configurations rotates each round); figures are medians of
--rounds; each run is printed with the load average (1, 5, 15 minutes) taken just before it, and
each table with the load after the runs. Every run is bounded (asyncio timeouts, subprocess
timeouts); child processes are stopped on exit (SIGTERM and Ctrl-C included).

--what-if: also the gRPC door (latency and rate) of math_exact with its "answer is" regex
(gym_metrics_servers/math_exact/app.py `_ANSWER_IS`) started from the first "answer" instead of tried at every
position (FAST_ENV, a file target that patches the module in the serving process only; the same
matches): what the group path gives when the environment's verify is cheap.
The rate lines also name the server worker each gRPC connection reached (GetServerInfo).

--profile: cProfile of `gym_metrics.environments.score_groups` on math_exact's handler
in-process (no transport): calls of --groups-per-call groups, the top functions by own time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_episodes import cpu_s, load, pct  # noqa: E402
from bench_generate import Child  # noqa: E402

RUN_TIMEOUT_S = 120
"""No single measured run may take longer than this."""
GROUP = 16
"""Completions per group (GRPO's num_generations)."""
DISTINCT_GROUPS = 64
WARMUP = 20
FAST_ENV = '''"""bench_groups.py: math_exact with its "answer is" regex searched from the first "answer" only (a what-if)."""
import re

import gym_metrics_servers.math_exact.app as app


class _Prefiltered:
    """_ANSWER_IS.finditer(text) from the first "answer" (any case) on: the same matches (the
    pattern starts with it), without trying the regex at every earlier position. ASCII texts
    only (str.lower keeps their offsets); others are searched whole, as before."""

    def __init__(self, pattern: "re.Pattern[str]") -> None:
        self.pattern = pattern

    def finditer(self, text: str):  # noqa: ANN201
        if not text.isascii():
            return self.pattern.finditer(text)
        first = text.lower().find("answer")
        return iter(()) if first < 0 else self.pattern.finditer(text, max(0, first - 1))


app._ANSWER_IS = _Prefiltered(app._ANSWER_IS)
MathExactServer = app.MathExactServer
'''
"""gym_metrics_servers/math_exact/app.py with one regex prefiltered, in the serving process only (--what-if); nothing in
gym_metrics_servers/ is changed."""
WORDS = ("we", "add", "the", "two", "numbers", "carry", "one", "so", "then", "check", "again", "sum", "is", "first",
         "digit", "next", "gives", "therefore", "let", "us", "verify", "by", "subtracting", "back", "result")  # fmt: skip


# ---------------------------------------------------------------- the load


def build_groups(
    n: int = DISTINCT_GROUPS, final: str = "The answer is {}.", seed: int = 28
) -> list[tuple[dict[str, Any], list[str], list[float]]]:
    """(row, 16 completions, expected rewards) per group; see the module docstring."""
    rng = random.Random(seed)
    groups = []
    for k in range(n):
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        prompt = f"Problem {k}: what is {a} + {b}?"
        row = {"responses_create_params": {"input": [{"role": "user", "content": prompt}]}, "expected_answer": str(a + b)}
        completions, rewards = [], []
        for j in range(GROUP):
            size = rng.randint(1024, 4096)
            parts: list[str] = []
            length = 0
            while length < size:
                piece = rng.choice(WORDS) if rng.random() < 0.8 else f"{rng.randint(1, 99)} + {rng.randint(1, 99)}"
                parts.append(piece)
                length += len(piece) + 1
            right = (j * 7 + k) % 16 < 10
            answer = a + b if right else a + b + rng.randint(100, 900)  # far off: string_match gives 0.98 within 2%
            completions.append(" ".join(parts) + ". " + final.format(answer))
            rewards.append(1.0 if right else 0.0)
        groups.append((row, completions, rewards))
    return groups


def prompt_of(row: dict[str, Any]) -> str:
    return str(row["responses_create_params"]["input"][0]["content"])


class Checker:
    """Counts completions scored and rewards that differ from the expected ones."""

    def __init__(self) -> None:
        self.scored = self.wrong = 0

    def check(self, got: list[Any], expected: list[float]) -> None:
        self.scored += len(got)
        self.wrong += sum(1 for g, e in zip(got, expected) if g is None or float(g) != e)


def serve(target: list[str], workers: int, http: bool = False) -> Child:
    cmd = [sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "serve", *target, "--port", "0"]
    cmd += ["--workers", str(workers)] * (workers > 1) + ["--http-port", "0"] * http
    return Child(cmd, r"listening on (\S+:\d+.*)", timeout_s=60)


def addresses(child: Child) -> tuple[str, str | None]:
    """(gRPC address, HTTP address or None) from serve's 'listening on' line."""
    grpc_address = child.found.split()[0]
    if "rewards over HTTP on port" in child.found:
        port = child.found.rsplit("port", 1)[1].strip(" )")
        return grpc_address, f"127.0.0.1:{port}"
    return grpc_address, None


# ---------------------------------------------------------------- the doors, one call each


async def grpc_clients(address: str, workers: int) -> list[Any]:
    from gym_metrics import ResourcesClient

    client = ResourcesClient(address)
    return await client.open_connections() if workers > 1 else [client]


def grpc_door(omit: bool) -> Callable[..., Any]:
    async def open_(address: str, http: str | None, workers: int) -> Any:
        clients = await grpc_clients(address, workers)
        turn = [0]
        reached = "".join([str((await c.worker())[0]) for c in clients])  # the server worker of each connection

        async def call(batch: list[tuple[dict[str, Any], list[str], list[float]]], checker: Checker) -> None:
            client = clients[turn[0] % len(clients)]
            turn[0] += 1
            answer = await client.score_groups([(row, comps) for row, comps, _ in batch], omit_responses=omit)
            for group, (_, _, expected) in zip(answer, batch):
                checker.check([None if f else r for r, f in zip(group.rewards, group.failed)], expected)

        async def close() -> None:
            for c in clients:
                await c.close()

        call.reached = reached  # type: ignore[attr-defined]

        return call, close, len(clients)

    return open_


def trl_door(asynchronous: bool) -> Callable[..., Any]:
    async def open_(address: str, http: str | None, workers: int) -> Any:
        from gym_metrics.integrations._client import reward_client
        from gym_metrics.integrations.trl import reward_function

        reward = reward_function(server=address, asynchronous=asynchronous)

        def arguments(batch: list[tuple[dict[str, Any], list[str], list[float]]]) -> dict[str, Any]:
            prompts = [prompt_of(row) for row, comps, _ in batch for _ in comps]
            completions = [c for _, comps, _ in batch for c in comps]
            answers = [row["expected_answer"] for row, comps, _ in batch for _ in comps]
            return {"prompts": prompts, "completions": completions, "completion_ids": [[0]] * len(completions),
                    "expected_answer": answers}  # fmt: skip

        async def call(batch: list[tuple[dict[str, Any], list[str], list[float]]], checker: Checker) -> None:
            if asynchronous:
                got = await reward(**arguments(batch))
            else:  # the synchronous function, called as GRPOTrainer calls it (it blocks this thread)
                got = reward(**arguments(batch))
            checker.check(got, [e for _, _, expected in batch for e in expected])

        async def close() -> None:
            await asyncio.to_thread(reward_client(address).close)

        return call, close, 1

    return open_


def http_door(route: str) -> Callable[..., Any]:
    async def open_(address: str, http: str | None, workers: int) -> Any:
        import aiohttp
        import orjson

        assert http is not None
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=64), cookie_jar=aiohttp.DummyCookieJar(), timeout=aiohttp.ClientTimeout(total=60)
        )
        url, headers = f"http://{http}/{route}", {"content-type": "application/json"}

        async def call(batch: list[tuple[dict[str, Any], list[str], list[float]]], checker: Checker) -> None:
            if route == "score_groups":
                body = {"groups": [{"row": row, "completions": comps} for row, comps, _ in batch], "omit_responses": True}
            else:
                prompts = [prompt_of(row) for row, comps, _ in batch for _ in comps]
                body = {"query": [prompt_of(row) + c for row, comps, _ in batch for c in comps], "prompts": prompts,
                        "labels": [row["expected_answer"] for row, comps, _ in batch for _ in comps]}  # fmt: skip
            async with session.post(url, data=orjson.dumps(body), headers=headers) as answer:
                answer.raise_for_status()
                got = orjson.loads(await answer.read())
            if route == "score_groups":
                for group, (_, _, expected) in zip(got["groups"], batch):
                    checker.check([None if f else r for r, f in zip(group["rewards"], group["failed"])], expected)
            else:
                failed = got["extra_logs"]["gm_failed"]
                checker.check([None if f else r for r, f in zip(got["rewards"], failed)], [e for _, _, x in batch for e in x])

        async def close() -> None:
            await session.close()

        return call, close, 1

    return open_


DOORS: dict[str, tuple[str, Callable[..., Any], Callable[..., Any]]] = {
    # key: (label, door for latency, door for rate)
    "grpc": ("gRPC ScoreGroups, omit_responses", grpc_door(True), grpc_door(True)),
    "grpc_resp": ("gRPC ScoreGroups, with responses", grpc_door(False), grpc_door(False)),
    "trl": ("TRL adaptor reward_function", trl_door(False), trl_door(True)),
    "http_sg": ("HTTP POST /score_groups", http_door("score_groups"), http_door("score_groups")),
    "http_rm": ("HTTP POST /get_reward (OpenRLHF)", http_door("get_reward"), http_door("get_reward")),
}


# ---------------------------------------------------------------- measuring


async def latency(door: Callable[..., Any], address: str, http: str | None, workers: int, groups: list[Any], calls: int) -> dict[str, Any]:
    call, close, _ = await door(address, http, workers)
    checker = Checker()
    try:
        for i in range(WARMUP):
            await call([groups[i % len(groups)]], checker)
        times = []
        for i in range(calls):
            t0 = time.perf_counter()
            await asyncio.wait_for(call([groups[i % len(groups)]], checker), 30)
            times.append(time.perf_counter() - t0)
    finally:
        await close()
    return {"p50": pct(times, 0.5) * 1e3, "p99": pct(times, 0.99) * 1e3, "wrong": checker.wrong, "scored": checker.scored}


async def rate(
    door: Callable[..., Any], address: str, http: str | None, workers: int, groups: list[Any], ns: argparse.Namespace, server_pid: int
) -> dict[str, Any]:
    call, close, connections = await door(address, http, workers)
    reached = getattr(call, "reached", "-")
    checker = Checker()
    per_call = ns.groups_per_call
    batches = [[groups[(i * per_call + j) % len(groups)] for j in range(per_call)] for i in range(len(groups))]
    try:
        for i in range(4):
            await call(batches[i], checker)
        checker = Checker()
        in_flight = ns.in_flight * connections
        deadline = time.perf_counter() + ns.duration

        async def loop(k: int) -> None:
            i = k
            while time.perf_counter() < deadline:
                await call(batches[i % len(batches)], checker)
                i += in_flight

        cpu0, server0, t0 = time.process_time(), cpu_s(server_pid), time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(loop(k) for k in range(in_flight))), ns.duration + RUN_TIMEOUT_S)
        wall = time.perf_counter() - t0
        cpu, server = time.process_time() - cpu0, cpu_s(server_pid) - server0
    finally:
        await close()
    n = checker.scored
    return {"rate": n / wall, "wall": wall, "client_ms": 1e6 * cpu / n, "server_ms": 1e6 * server / n, "wrong": checker.wrong,
            "scored": n, "in_flight": in_flight, "reached": reached}  # fmt: skip


# ---------------------------------------------------------------- NeMo Gym's /verify (a child of its venv serves)


def nemo_server(ns: argparse.Namespace) -> Child:
    cmd = [ns.nemo_python, str(ROOT / "scripts" / "bench_nemo_env.py"), "--_nemo_server", str(ns.wheel), "string_match"]
    return Child(cmd, Child.LISTENING, timeout_s=60)


async def nemo_measure(address: str, groups: list[Any], ns: argparse.Namespace, server_pid: int) -> dict[str, Any]:
    """Latency of a group (16 concurrent POST /verify) and rewards/s with groups in flight."""
    import aiohttp
    import orjson

    from gym_metrics.environments import text_response

    bodies = [[orjson.dumps({**row, "response": text_response(c)}) for c in comps] for row, comps, _ in groups]
    url, headers = f"http://{address}/verify", {"content-type": "application/json"}
    connector = aiohttp.TCPConnector(limit=GROUP * max(1, ns.nemo_groups_in_flight))
    checker = Checker()
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                                     timeout=aiohttp.ClientTimeout(total=60)) as s:  # fmt: skip
        for _ in range(300):  # the child prints its address once bound, before uvicorn listens
            try:
                async with s.get(f"http://{address}/docs") as answer:
                    await answer.read()
                break
            except aiohttp.ClientConnectorError:
                await asyncio.sleep(0.1)

        async def one(body: bytes) -> float:
            async with s.post(url, data=body, headers=headers) as answer:
                answer.raise_for_status()
                return float((await answer.json(loads=orjson.loads))["reward"])

        async def group(i: int) -> None:
            got = await asyncio.gather(*(one(b) for b in bodies[i % len(bodies)]))
            checker.check(list(got), groups[i % len(groups)][2])

        for i in range(WARMUP):
            await group(i)
        times = []
        for i in range(ns.calls):
            t0 = time.perf_counter()
            await asyncio.wait_for(group(i), 30)
            times.append(time.perf_counter() - t0)
        wrong_latency, checker = checker.wrong, Checker()
        deadline = time.perf_counter() + ns.duration
        flight = ns.nemo_groups_in_flight

        async def loop(k: int) -> None:
            i = k
            while time.perf_counter() < deadline:
                await group(i)
                i += flight

        cpu0, server0, t0 = time.process_time(), cpu_s(server_pid), time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(loop(k) for k in range(flight))), ns.duration + RUN_TIMEOUT_S)
        wall = time.perf_counter() - t0
        cpu, server = time.process_time() - cpu0, cpu_s(server_pid) - server0
    n = checker.scored
    return {"p50": pct(times, 0.5) * 1e3, "p99": pct(times, 0.99) * 1e3, "rate": n / wall, "client_ms": 1e6 * cpu / n,
            "server_ms": 1e6 * server / n, "wrong": checker.wrong + wrong_latency, "scored": n}  # fmt: skip


# ---------------------------------------------------------------- configurations and rounds


def fail_if_wrong(label: str, r: dict[str, Any]) -> None:
    if r["wrong"]:
        raise SystemExit(f"{label}: {r['wrong']} of {r['scored']} rewards differ from the expected ones")


def run_config(key: str, ns: argparse.Namespace, groups: dict[str, list[Any]], targets: dict[str, list[str]], k: int,
               results: dict[tuple[str, str, str], list[dict[str, Any]]]) -> None:  # fmt: skip
    """One configuration (a server started afresh), every door of it in a rotating order."""
    if key == "nemo":
        loads = load()
        with nemo_server(ns) as server:
            r = asyncio.run(nemo_measure(server.found, groups["nemo"], ns, server.proc.pid))
        fail_if_wrong("nemo", r)
        results.setdefault(("nemo", "nemo", "both"), []).append(r)
        print(f"|   round {k + 1}, NeMo Gym string_match /verify: group p50 {r['p50']:.2f} ms p99 {r['p99']:.2f} ms; "
              f"{r['rate']:,.0f} rewards/s (CPU ms per 1k rewards: client {r['client_ms']:.0f}, server {r['server_ms']:.0f}) "
              f"| {loads} |", flush=True)  # fmt: skip
        return
    env, workers = key.rsplit("_w", 1)[0], int(key.rsplit("_w", 1)[1])
    http = env == "math_exact" and workers == 1
    doors = ["grpc", "grpc_resp", "trl"] + ["http_sg", "http_rm"] * http if env == "math_exact" else ["grpc"]
    parts = [p for p in ("latency", "rate") if p in ns.only]
    runs = [(p, d) for p in parts for d in doors if not (p == "rate" and d == "grpc_resp")]
    runs = runs[k % len(runs):] + runs[: k % len(runs)]
    data = groups["nemo" if env == "string_match" else "math"]
    with serve(targets[env], workers, http) as server:
        address, http_address = addresses(server)
        for part, door in runs:
            loads = load()
            label = f"{env} --workers {workers}, {DOORS[door][0]}"
            if part == "latency":
                r = asyncio.run(latency(DOORS[door][1], address, http_address, workers, data, ns.calls))
                fail_if_wrong(label, r)
                print(f"|   round {k + 1}, {label}: group p50 {r['p50']:.3f} ms p99 {r['p99']:.3f} ms | {loads} |", flush=True)
            else:
                r = asyncio.run(rate(DOORS[door][2], address, http_address, workers, data, ns, server.proc.pid))
                fail_if_wrong(label, r)
                print(f"|   round {k + 1}, {label}: {r['rate']:,.0f} rewards/s ({r['in_flight']} calls in flight, workers reached {r['reached']}, "
                      f"{r['wall']:.1f} s; CPU ms per 1k rewards: client {r['client_ms']:.0f}, server {r['server_ms']:.0f}) "
                      f"| {loads} |", flush=True)  # fmt: skip
            results.setdefault((key, door, part), []).append(r)


def med(runs: list[dict[str, Any]], field: str) -> float:
    return statistics.median(r[field] for r in runs)


def tables(ns: argparse.Namespace, results: dict[tuple[str, str, str], list[dict[str, Any]]]) -> str:
    out = []
    measured = {key for key, _, _ in results}
    if "latency" in ns.only and measured & {"math_exact_w1", "math_exact_w2"}:
        lines = [f"Group latency: one group of {GROUP} completions (1-4 KB each) per call, {ns.calls} sequential calls "
                 f"(medians of {ns.rounds}, {load()}):", "",
                 "| door | --workers 1 p50 | p99 | --workers 2 p50 | p99 |", "|---|---:|---:|---:|---:|"]  # fmt: skip
        for door, (label, _, _) in DOORS.items():
            cells = []
            for w in (1, 2):
                runs = results.get((f"math_exact_w{w}", door, "latency"))
                cells += [f"{med(runs, 'p50'):.2f} ms", f"{med(runs, 'p99'):.2f} ms"] if runs else ["-", "-"]
            out_line = f"| {label} | " + " | ".join(cells) + " |"
            lines.append(out_line)
        out.append("\n".join(lines))
    if "rate" in ns.only and measured & {"math_exact_w1", "math_exact_w2"}:
        lines = [f"Sustained rewards/s, {ns.duration:g} s per run, calls of {ns.groups_per_call} groups x {GROUP} "
                 f"(medians of {ns.rounds}, {load()}):", "",
                 "| door | --workers | calls in flight | rewards/s | CPU ms per 1k rewards: client | server |",
                 "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        for w in (1, 2):
            for door, (label, _, _) in DOORS.items():
                runs = results.get((f"math_exact_w{w}", door, "rate"))
                if runs:
                    lines.append(f"| {label} | {w} | {runs[0]['in_flight']} | {med(runs, 'rate'):,.0f} | "
                                 f"{med(runs, 'client_ms'):.0f} | {med(runs, 'server_ms'):.0f} |")  # fmt: skip
        out.append("\n".join(lines))
    fast = [(w, results.get((f"math_exact_fast_w{w}", "grpc", "latency")), results.get((f"math_exact_fast_w{w}", "grpc", "rate")))
            for w in (1, 2)]  # fmt: skip
    if any(lat and rt for _, lat, rt in fast):
        lines = ["What if: math_exact with its \"answer is\" regex searched from the first \"answer\" (FAST_ENV, in the "
                 f"serving process only), gRPC ScoreGroups omit_responses (medians of {ns.rounds}, {load()}):", "",
                 "| --workers | group p50 | group p99 | rewards/s (calls in flight) | CPU ms per 1k rewards: client | server |",
                 "|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for w, lat, rt in fast:
            if lat and rt:
                lines.append(f"| {w} | {med(lat, 'p50'):.2f} ms | {med(lat, 'p99'):.2f} ms | {med(rt, 'rate'):,.0f} "
                             f"({rt[0]['in_flight']}) | {med(rt, 'client_ms'):.0f} | {med(rt, 'server_ms'):.0f} |")  # fmt: skip
        out.append("\n".join(lines))
    nemo = results.get(("nemo", "nemo", "both"))
    if nemo:
        lines = [f"string_match, the same groups (last sentence 'Final answer: N.'): NeMo Gym's /verify beside the port "
                 f"served by gym-metrics through ScoreGroups (omit_responses); latency: {ns.calls} groups one after another; "
                 f"rate: {ns.duration:g} s (medians of {ns.rounds}, {load()}):", "",
                 "| side | group p50 | group p99 | rewards/s (in flight) | CPU ms per 1k rewards: client | server |",
                 "|---|---:|---:|---:|---:|---:|",
                 f"| NeMo Gym 0.7.0, uvicorn 1 worker, 16 concurrent POST /verify per group | {med(nemo, 'p50'):.2f} ms | "
                 f"{med(nemo, 'p99'):.2f} ms | {med(nemo, 'rate'):,.0f} ({ns.nemo_groups_in_flight} groups) | "
                 f"{med(nemo, 'client_ms'):.0f} | {med(nemo, 'server_ms'):.0f} |"]  # fmt: skip
        for w in (1, 2):
            lat, rt = results.get((f"string_match_w{w}", "grpc", "latency")), results.get((f"string_match_w{w}", "grpc", "rate"))
            if lat and rt:
                lines.append(f"| gym-metrics, ported, --workers {w}, ScoreGroups | {med(lat, 'p50'):.2f} ms "
                             f"({med(nemo, 'p50') / med(lat, 'p50'):.1f}x) | {med(lat, 'p99'):.2f} ms "
                             f"({med(nemo, 'p99') / med(lat, 'p99'):.1f}x) | {med(rt, 'rate'):,.0f} "
                             f"({rt[0]['in_flight']} calls of {ns.groups_per_call} groups; {med(rt, 'rate') / med(nemo, 'rate'):.1f}x) | "
                             f"{med(rt, 'client_ms'):.0f} | {med(rt, 'server_ms'):.0f} |")  # fmt: skip
        out.append("\n".join(lines))
    return "\n\n".join(out)


# ---------------------------------------------------------------- profile


def profile(ns: argparse.Namespace, groups: list[Any]) -> str:
    """cProfile of score_groups on math_exact's handler, in-process; the top functions by own time."""
    import cProfile
    import io
    import pstats

    import orjson

    from gym_metrics.environments import EnvironmentHandler, Group, resolve_server, score_groups

    handler = EnvironmentHandler(resolve_server("math_exact")())
    batch = [groups[j % len(groups)] for j in range(ns.groups_per_call)]
    wire = [Group(orjson.dumps(row).decode(), [orjson.dumps(c).decode() for c in comps], encoded=True) for row, comps, _ in batch]
    n = 30

    async def run() -> float:
        await score_groups(handler, wire, omit_responses=True)
        t0 = time.perf_counter()
        for _ in range(n):
            await score_groups(handler, wire, omit_responses=True)
        return time.perf_counter() - t0

    plain = asyncio.run(run())
    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(run())
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
    rewards = n * len(wire) * GROUP
    return (f"score_groups in-process, math_exact, {n} calls of {ns.groups_per_call} groups x {GROUP}: "
            f"{rewards / plain:,.0f} rewards/s without the profiler ({1e6 * plain / rewards:.1f} us per reward; {load()})\n\n"
            + "\n".join(line for line in text.getvalue().splitlines() if line.strip())[:6000])  # fmt: skip


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=["latency", "rate", "nemo"], choices=["latency", "rate", "nemo"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=500, help="sequential group calls per latency run")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each sustained run")
    parser.add_argument("--groups-per-call", type=int, default=64)
    parser.add_argument("--in-flight", type=int, default=4, help="calls in flight per connection (sustained runs)")
    parser.add_argument("--nemo-groups-in-flight", type=int, default=16, help="NeMo Gym: groups of 16 POSTs at once")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], choices=[1, 2], help="serve --workers of the runs")
    parser.add_argument("--profile", action="store_true", help="also profile score_groups in-process")
    parser.add_argument("--what-if", action="store_true",
                        help="also the gRPC door of math_exact with its answer regex prefiltered (FAST_ENV)")
    parser.add_argument("--wheel", type=Path, default=Path("/tmp/nemo/wheel"), help="the unzipped nemo-gym 0.7.0 wheel")
    parser.add_argument("--nemo-python", default="/tmp/ngvenv/bin/python", help="python of a nemo-gym 0.7.0 venv")
    ns = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind, so every child is stopped
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()} (gym-metrics); {load()}\n",
          flush=True)  # fmt: skip
    groups = {"math": build_groups(), "nemo": build_groups(final="Final answer: {}.")}
    sizes = [len(c) for _, comps, _ in groups["math"] for c in comps]
    print(f"load: {len(groups['math'])} groups x {GROUP}, completions {min(sizes):,}-{max(sizes):,} bytes "
          f"(mean {statistics.mean(sizes):,.0f}), {sum(r for g in groups['math'] for r in g[2]):.0f} rewards of 1\n", flush=True)  # fmt: skip
    results: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_groups_") as tmp:
        targets: dict[str, list[str]] = {"math_exact": ["math_exact"]}
        configs = []
        if "latency" in ns.only or "rate" in ns.only:
            configs += [f"math_exact_w{w}" for w in ns.workers]
        if ns.what_if:
            (Path(tmp) / "math_exact_fast.py").write_text(FAST_ENV)
            targets["math_exact_fast"] = [f"{Path(tmp) / 'math_exact_fast.py'}:MathExactServer"]
            configs += [f"math_exact_fast_w{w}" for w in ns.workers]
        if "nemo" in ns.only:
            from bench_nemo_env import port_envs

            targets["string_match"] = [str(port_envs(ns.wheel, ["string_match"], Path(tmp))["string_match"])]
            configs += ["nemo"] + [f"string_match_w{w}" for w in ns.workers]
            if "latency" not in ns.only:
                ns.only += ["latency"]
            if "rate" not in ns.only:
                ns.only += ["rate"]
        for k in range(ns.rounds):
            for key in configs[k % len(configs):] + configs[: k % len(configs)]:
                run_config(key, ns, groups, targets, k, results)
    print("\n" + tables(ns, results))
    if ns.profile:
        print("\n" + profile(ns, groups["math"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
