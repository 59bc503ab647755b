"""Benchmark ported NeMo Gym environments: NeMo Gym's own server beside `gym-metrics serve CONFIG.yaml`.

Usage: python scripts/bench_nemo_env.py [--envs string_match mcqa xlam_fc] [--rollouts 20000]
       [--rounds 3] [--concurrency 64] [--wheel /tmp/nemo/wheel] [--nemo-python /tmp/ngvenv/bin/python]
       [--gm-python PYTHON]

Rows: an environment's reference rollouts (tests/data/nemo_gym_envs/<env>/rollouts.jsonl, 15 rows
of 5 tasks) repeated to --rollouts rows, copy k's task indices shifted by k * tasks, so every
(task, rollout) key is unique. The expected reward of row i is verify.jsonl's reward of row i % 15.

(A) NeMo Gym 0.7.0: the environment's server built as scripts/make_nemo_env_reference.py builds it,
    its FastAPI app (`setup_webserver()`, plus the exception and cancellation middleware and the
    validation handler `run_webserver` adds) under uvicorn with httptools and keep-alive as
    `run_webserver` configures it, one worker (NeMo Gym's default: `num_workers` unset), in a
    child process of the nemo-gym venv on 127.0.0.1:0. Driven by another child of that venv: an
    aiohttp client with --concurrency requests in flight (one connection each, no cookie jar, so
    every rollout has its own session as separate agent calls do), POSTing each row's request body
    (the row minus agent_ref and _ng_ keys), bodies encoded before the clock starts.
(B) gym-metrics: `gym-metrics serve <ported config.yaml> --port 0`, --workers 1 and --workers 2,
    under --gm-python (this script's Python unless given: NeMo Gym's venv may be another version),
    driven by the collector's own verification machinery (make_batches + verify_all over one
    connection per server worker, as scripts/bench_collect.py's part (b); not `collect` end to
    end: no file reading, writing or aggregation), batches encoded before the clock starts.

Both sides are checked row by row against the reference rewards (a run that differs fails).
Runs alternate (the order rotates each round); servers start afresh for each run, untimed, and
take one warm-up verify before the clock. Figures are rollouts/s over the whole set; medians.
Every run is bounded (subprocess timeouts, asyncio.wait_for); child processes are killed on exit
(SIGTERM and Ctrl-C included).

--profile: where gym-metrics' time per rollout goes, in-process (no transport), per environment:
validating the body (`parse_verify_request`), the environment's verify (`run_verify`, its own
code and the models it builds) and serialising the response (`model_dump_json`), as
time.perf_counter splits over --profile-rollouts rows; beside the wire figure's time per rollout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
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
DATA = ROOT / "tests" / "data" / "nemo_gym_envs"
RUN_TIMEOUT_S = 300
"""No single run may take longer than this."""
ENVS = ("string_match", "mcqa", "xlam_fc")
OWN_KEYS = ("agent_ref", "_ng_task_index", "_ng_rollout_index")


def load() -> str:
    """The load average as `uptime` prints it (1, 5, 15 minutes)."""
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def build_rows(env: str, n: int, data: Path = DATA) -> tuple[list[dict[str, Any]], list[float]]:
    """(n rollout rows, their expected rewards): the reference rows repeated, task indices renumbered."""
    rows = read_jsonl(data / env / "rollouts.jsonl")
    rewards = [float(r["reward"]) for r in read_jsonl(data / env / "verify.jsonl")]
    tasks = 1 + max(r["_ng_task_index"] for r in rows)
    out = []
    for i in range(n):
        copy, k = divmod(i, len(rows))
        out.append(dict(rows[k], _ng_task_index=rows[k]["_ng_task_index"] + copy * tasks))
    return out, [rewards[i % len(rows)] for i in range(n)]


# ---------------------------------------------------------------- (A) NeMo Gym, children of its venv


def _nemo_server(wheel: str, env: str) -> None:
    """Serve `env`'s FastAPI app under uvicorn as NeMo Gym's run_webserver does (one worker)."""
    import socket
    import warnings
    from functools import partial

    import uvicorn
    from fastapi.exceptions import RequestValidationError

    import nemo_gym.server_utils as su  # the venv's nemo_gym first; then the wheel's resources_servers

    sys.path.insert(0, str(ROOT / "scripts"))
    sys.path.insert(1, wheel)
    warnings.simplefilter("ignore")
    from make_nemo_env_reference import Env

    server = Env(Path(wheel), env).server
    app = server.setup_webserver()
    server.setup_exception_middleware(app)
    server.setup_cancellation_middleware(app)
    app.exception_handler(RequestValidationError)(su._validation_exception_handler)
    keep = su.GlobalAIOHTTPAsyncClientConfig.model_validate({})
    alive = (keep.global_aiohttp_tcp_keepalive_idle_seconds, keep.global_aiohttp_tcp_keepalive_interval_seconds,
             keep.global_aiohttp_tcp_keepalive_probes)  # fmt: skip
    config = uvicorn.Config(
        app, timeout_graceful_shutdown=0.5, timeout_keep_alive=30, access_log=False, log_level="warning",
        http=partial(su.KeepaliveHttpToolsProtocol, keepalive=alive),
    )  # fmt: skip
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"nemo-gym: listening on 127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


async def _nemo_drive(address: str, bodies: list[bytes], concurrency: int) -> tuple[float, list[float]]:
    """(rollouts/s, rewards) of POSTing every body to /verify, `concurrency` in flight."""
    import aiohttp

    url, headers = f"http://{address}/verify", {"content-type": "application/json"}
    rewards: list[float] = [float("nan")] * len(bodies)
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(), timeout=timeout) as s:
        async with s.post(url, data=bodies[0], headers=headers) as answer:  # warm up
            answer.raise_for_status()
        todo = iter(range(len(bodies)))

        async def worker() -> None:
            for i in todo:
                async with s.post(url, data=bodies[i], headers=headers) as answer:
                    answer.raise_for_status()
                    rewards[i] = float((await answer.json())["reward"])

        start = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), RUN_TIMEOUT_S)
        return len(bodies) / (time.perf_counter() - start), rewards


def _nemo_client(address: str, bodies_path: str, concurrency: str) -> None:
    bodies = [b for b in Path(bodies_path).read_bytes().splitlines() if b.strip()]
    rate, rewards = asyncio.run(_nemo_drive(address, bodies, int(concurrency)))
    print(json.dumps({"rate": rate, "rewards": rewards}))


def nemo_rate(ns: argparse.Namespace, env: str, bodies_path: Path) -> tuple[float, list[float]]:
    """(rollouts/s, rewards) of NeMo Gym's own server of `env`."""
    me = [ns.nemo_python, __file__]
    with Child(me + ["--_nemo_server", str(ns.wheel), env], Child.LISTENING, timeout_s=60) as server:
        cmd = me + ["--_nemo_client", server.found, str(bodies_path), str(ns.concurrency)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=RUN_TIMEOUT_S + 60)
    answer = json.loads(out.stdout)
    return answer["rate"], answer["rewards"]


# ---------------------------------------------------------------- (B) gym-metrics


async def _gm_drive(address: str, rows: list[dict[str, Any]]) -> tuple[float, list[float]]:
    """(rollouts/s, rewards) of the collector's verification (bench_collect.timed_verify)."""
    from bench_collect import timed_verify

    rewards: list[float] = [float("nan")] * len(rows)

    def on_results(batch: list, verified: Any) -> None:
        for (rollout, _), reward in zip(batch, verified.reward):
            rewards[rollout.line] = float(reward)

    elapsed, _ = await timed_verify(address, rows, on_results)
    return len(rows) / elapsed, rewards


def gm_rate(config: Path, rows: list[dict[str, Any]], workers: int, python: str) -> tuple[float, list[float]]:
    cmd = [python, "-m", "gym_metrics.cli", "--log-level", "warning", "serve", str(config), "--port", "0"]
    with Child(cmd + ["--workers", str(workers)] * (workers > 1), Child.LISTENING, timeout_s=60) as server:
        return asyncio.run(_gm_drive(server.found, rows))


async def _splits(server: Any, bodies: list[bytes]) -> tuple[float, float, float]:
    """Seconds spent validating, verifying and serialising `bodies`, in-process."""
    parse = verify = dump = 0.0
    for body in bodies:
        t0 = time.perf_counter()
        request = server.parse_verify_request(body)
        t1 = time.perf_counter()
        response = server.checked_response(await server.run_verify(request))
        t2 = time.perf_counter()
        response.model_dump_json()
        t3 = time.perf_counter()
        parse, verify, dump = parse + t1 - t0, verify + t2 - t1, dump + t3 - t2
    return parse, verify, dump


def profile(env: str, config: Path, n: int, wire_rate: float) -> str:
    """A table row: microseconds per rollout in each step, in-process (after one warm-up pass)."""
    import orjson

    from gym_metrics.nemo_gym import load_config_server

    meta = json.loads((DATA / env / "meta.json").read_text())
    server = load_config_server(config, name=meta["server_instance"])
    bodies = [orjson.dumps(r) for r in build_rows(env, n)[0]]
    asyncio.run(_splits(server, bodies))
    parse, verify, dump = (1e6 * s / n for s in asyncio.run(_splits(server, bodies)))
    return (f"| {env} | {parse:.0f} us | {verify:.0f} us | {dump:.0f} us | {parse + verify + dump:.0f} us | "
            f"{1e6 / wire_rate:.0f} us |")  # fmt: skip


# ---------------------------------------------------------------- the comparison


def port_envs(wheel: Path, envs: list[str], root: Path) -> dict[str, Path]:
    """Each environment's folder ported under root/resources_servers/; its config YAML."""
    from gym_metrics.nemo_gym.port import port_folder

    configs = {}
    for env in envs:
        port_folder(wheel / "resources_servers" / env, root / "resources_servers" / env)
        meta = json.loads((DATA / env / "meta.json").read_text())
        configs[env] = root / meta["config_file"]
    return configs


def check(side: str, got: list[float], expected: list[float]) -> None:
    wrong = [i for i, (a, b) in enumerate(zip(got, expected)) if a != b]
    if len(got) != len(expected) or wrong:
        raise SystemExit(f"{side}: rewards differ from the reference at {len(wrong)} rows (first {wrong[:5]})")


def bench_env(ns: argparse.Namespace, env: str, config: Path, work: Path) -> dict[str, list[float]]:
    """Alternating runs of the three figures for one environment; the rates."""
    import orjson

    rows, expected = build_rows(env, ns.rollouts)
    bodies = work / f"{env}_bodies.jsonl"
    bodies.write_bytes(b"".join(orjson.dumps({k: v for k, v in r.items() if k not in OWN_KEYS}) + b"\n" for r in rows))
    sides = ["nemo", "gm1", "gm2"]
    rates: dict[str, list[float]] = {s: [] for s in sides}
    for k in range(ns.rounds):
        for side in sides[k % 3:] + sides[: k % 3]:
            loads = load()
            rate, rewards = nemo_rate(ns, env, bodies) if side == "nemo" else gm_rate(config, rows, int(side[2]), ns.gm_python)
            check(f"{env} {side}", rewards, expected)
            rates[side].append(rate)
            print(f"|   {env} round {k + 1}, {LABELS[side]}: {rate:,.0f} rollouts/s | {loads} |", flush=True)
    print(f"|   {env}: reward sum {sum(expected):g} over {len(expected):,} rows, equal row by row on every run |")
    return rates


LABELS = {"nemo": "NeMo Gym (uvicorn, 1 worker)", "gm1": "gym-metrics --workers 1", "gm2": "gym-metrics --workers 2"}


def table(ns: argparse.Namespace, results: dict[str, dict[str, list[float]]]) -> str:
    lines = [
        f"| env ({ns.rollouts:,} rollouts) | NeMo Gym, uvicorn 1 worker, {ns.concurrency} in flight | "
        "gym-metrics --workers 1 | gym-metrics --workers 2 | ratio (1 worker) | ratio (2 workers) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for env, rates in results.items():
        nemo, one, two = (statistics.median(rates[s]) for s in ("nemo", "gm1", "gm2"))
        figures = f"{nemo:,.0f} /s | {one:,.0f} /s | {two:,.0f} /s"
        lines.append(f"| {env} | {figures} | {one / nemo:.1f}x | {two / nemo:.1f}x |")
    return "\n".join(lines)


def version(python: str) -> str:
    """`python`'s version, as `python --version` prints it."""
    return subprocess.run([python, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--rollouts", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs per figure (medians)")
    parser.add_argument("--concurrency", type=int, default=64, help="NeMo Gym client: requests in flight")
    parser.add_argument("--wheel", type=Path, default=Path("/tmp/nemo/wheel"), help="the unzipped nemo-gym 0.7.0 wheel")
    parser.add_argument("--nemo-python", default="/tmp/ngvenv/bin/python", help="python of a nemo-gym 0.7.0 venv")
    parser.add_argument("--gm-python", default=sys.executable,
                        help="python of gym-metrics' server (e.g. a venv of NeMo Gym's Python version)")
    parser.add_argument("--profile", action="store_true", help="also split gym-metrics' time per rollout, in-process")
    parser.add_argument("--profile-rollouts", type=int, default=3000)
    ns = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind, so every child is stopped
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {version(ns.gm_python)} (gym-metrics' server), "
          f"{version(ns.nemo_python)} (NeMo Gym)\n")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench_nemo_env_") as tmp:
        configs = port_envs(ns.wheel, ns.envs, Path(tmp))
        results = {env: bench_env(ns, env, configs[env], Path(tmp)) for env in ns.envs}
        print(f"\nmedians of {ns.rounds} ({load()}):\n\n{table(ns, results)}")
        if ns.profile:
            print(f"\ngym-metrics in-process, per rollout ({ns.profile_rollouts:,} rows, {load()}):\n")
            print("| env | validate body | verify | serialise | in-process total | on the wire, --workers 1 |")
            print("|---|---:|---:|---:|---:|---:|")
            for env in ns.envs:
                print(profile(env, configs[env], ns.profile_rollouts, statistics.median(results[env]["gm1"])))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--_nemo_server":
        _nemo_server(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "--_nemo_client":
        _nemo_client(*sys.argv[2:])
    else:
        sys.exit(main())
