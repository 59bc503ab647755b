"""OpenEnv episodes: the same OpenEnv environment served by gym-metrics (`gym-metrics serve
FILE:Env`, gRPC, reset and a step per turn over the session stream collect uses) and by OpenEnv's own server (`create_app` under
uvicorn, its `GenericEnvClient` over a WebSocket per episode, reset + step), each in a process
of its own, driven from this one with the same actions (figures in BENCHMARKS.md, "OpenEnv").
Rounds alternate the two; medians and the ratio are printed.

    .venv311-vf/bin/python scripts/bench_openenv.py --episodes 400 --steps 10 --concurrency 16 --rounds 5

Needs openenv (with uvicorn and websockets) beside gym-metrics: .ci/run's .venv311-vf has both.
The environment is a ten-cell walk with a typed action: about the cheapest step there is, so
what is measured is each server's cost per call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

HERE = Path(__file__).resolve()


class WalkAction(Action):
    step: int = 1


class WalkObservation(Observation):
    position: int = 0


class Walk(Environment[WalkAction, WalkObservation, State]):
    """Walk right along ten cells; reward 1 at the end."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state, self.position = State(), 0

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> WalkObservation:
        self._state, self.position = State(episode_id=episode_id), 0
        return WalkObservation(position=0)

    def step(self, action: WalkAction, timeout_s: Optional[float] = None, **kwargs: Any) -> WalkObservation:
        self._state.step_count += 1
        self.position += action.step
        return WalkObservation(position=self.position, reward=float(self.position >= 10), done=self.position >= 10)

    @property
    def state(self) -> State:
        return self._state


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(kind: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    if kind == "gym-metrics":
        cmd = [str(Path(sys.executable).parent / "gym-metrics"), "serve", f"{HERE}:Walk", "--port", str(port), "--log-level", "warning"]
    else:
        cmd = [sys.executable, str(HERE), "--openenv-server", str(port)]
    log = open(f"/tmp/bench_openenv_{kind}.log", "wb")  # (a pipe nobody reads would fill and stop the server)
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"127.0.0.1:{port}"
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{kind} server did not start: see {log.name}")


def _turn(step: int) -> dict[str, Any]:
    text = '{"step": %d}' % step
    return {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]}


async def _ours(address: str, episodes: int, steps: int, concurrency: int) -> int:
    from gym_metrics import ResourcesClient

    done = 0
    gate = asyncio.Semaphore(concurrency)
    async with ResourcesClient(address) as client:
        calls = client.session_stream()  # (the one stream collect drives episodes over)

        async def episode() -> None:
            nonlocal done
            async with gate:
                session, _ = await calls.reset_session({"openenv": {"reset": {}}})
                for _ in range(steps):
                    answer = await calls.step(session, _turn(1))
                    done += 1
                    if answer["terminated"]:
                        break

        await asyncio.gather(*(episode() for _ in range(episodes)))
    return done


async def _theirs(address: str, episodes: int, steps: int, concurrency: int) -> int:
    from openenv.core.generic_client import GenericEnvClient

    done = 0
    gate = asyncio.Semaphore(concurrency)

    async def episode() -> None:
        nonlocal done
        async with gate:
            async with GenericEnvClient(base_url=f"http://{address}") as client:
                await client.reset()
                for _ in range(steps):
                    result = await client.step({"step": 1})
                    done += 1
                    if result.done:
                        break

    await asyncio.gather(*(episode() for _ in range(episodes)))
    return done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--openenv-server", type=int, default=None, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.openenv_server is not None:  # the reference server, in its own process
        import uvicorn
        from openenv.core.env_server.http_server import create_app

        app = create_app(Walk, WalkAction, WalkObservation, env_name="walk", max_concurrent_envs=ns.concurrency * 2)
        uvicorn.run(app, host="127.0.0.1", port=ns.openenv_server, log_level="warning")
        return
    servers = {kind: _start(kind) for kind in ("gym-metrics", "openenv")}
    runs = {"gym-metrics": _ours, "openenv": _theirs}
    seconds: dict[str, list[float]] = {kind: [] for kind in runs}
    try:
        for kind, run in runs.items():  # warm-up
            asyncio.run(run(servers[kind][1], 20, ns.steps, ns.concurrency))
        for _ in range(ns.rounds):
            for kind, run in runs.items():
                start = time.perf_counter()
                steps = asyncio.run(run(servers[kind][1], ns.episodes, ns.steps, ns.concurrency))
                seconds[kind].append(time.perf_counter() - start)
                assert steps == ns.episodes * ns.steps, (kind, steps)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(10)
    print(f"{ns.episodes} episodes x {ns.steps} steps, {ns.concurrency} at a time, {ns.rounds} rounds (median):")
    medians = {kind: statistics.median(values) for kind, values in seconds.items()}
    for kind, median in medians.items():
        print(f"  {kind:12s} {median:6.2f} s  {ns.episodes / median:8.0f} episodes/s  {ns.episodes * ns.steps / median:8.0f} steps/s"
              f"  (rounds: {', '.join(f'{v:.2f}' for v in seconds[kind])})")
    print(f"  ratio openenv / gym-metrics: {medians['openenv'] / medians['gym-metrics']:.2f}x")


if __name__ == "__main__":
    main()
