"""What running the tool calls of one turn in order costs (issue 37): episodes/s of `collect` with
the calls of a turn one after another (the default, NeMo Gym's simple_agent) against
`--parallel-tool-calls`, on loopback.

    python scripts/bench_tool_call_order.py [--episodes 400] [--concurrency 32] [--calls 4]
        [--tool-ms 0 10] [--rounds 3]

The environment (written here) has one tool, `lookup`, which waits --tool-ms (a tool calling a
service) and answers; it is served by `gym-metrics serve <tmp>/env.py:Lookup --port 0` in its own
process. The policy (gym_metrics.testing.ScriptedPolicyServer, in a thread) makes --calls
`lookup` calls in its first turn and answers in its second: per episode 1 SeedSession, 2 policy
calls, --calls CallTool, 1 Verify. The two modes run alternately, --rounds times each, per tool
latency; the table gives the median episodes/s and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ENV = '''
import asyncio
import pydantic
from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, Session, SimpleResourcesServer, tool

DELAY_S = {delay}

class Key(pydantic.BaseModel):
    key: int

class Lookup(SimpleResourcesServer):
    @tool
    async def lookup(self, args: Key, session: Session) -> dict:
        """A value by key."""
        if DELAY_S:
            await asyncio.sleep(DELAY_S)
        return {{"key": args.key, "value": args.key * 2}}

    async def verify(self, body: BaseVerifyRequest, session: Session | None = None) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward=1.0)
'''


def serve(path: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gym_metrics.cli", "serve", f"{path}:Lookup", "--port", "0"], stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if m := re.search(r"listening on (\S+)", proc.stderr.readline()):
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError("server did not start")


def write_episode_rows(path: Path, episodes: int) -> Path:
    """The task rows: one per episode, each its own prompt (`episode <i>`)."""
    with path.open("w") as f:
        for i in range(episodes):
            f.write(json.dumps({"agent_ref": {"name": "a"}, "responses_create_params": {"input": f"episode {i}"}}) + "\n")
    return path


async def one_run(address: str, policy_url: str, rows: Path, out: Path, concurrency: int, parallel: bool) -> float:
    from gym_metrics import ResourcesClient
    from gym_metrics.collector import CollectOptions, collect_async
    from gym_metrics.targets import ModelTargetConfig

    target = ModelTargetConfig(url=policy_url, model="scripted", api="responses", max_concurrency=concurrency)
    out.unlink(missing_ok=True)
    async with ResourcesClient(address) as client:
        start = time.perf_counter()
        result = await collect_async(client, rows, out, CollectOptions(target=target, parallel_tool_calls=parallel))
        seconds = time.perf_counter() - start
    assert result.verified == sum(1 for _ in rows.open()) and result.failed_tool_calls == 0, result
    return result.verified / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--tool-ms", type=float, nargs="+", default=[0.0, 10.0])
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()

    from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer

    calls = [{"name": "lookup", "arguments": {"key": k}} for k in range(ns.calls)]
    steps = [PolicyAnswer(tool_calls=calls), PolicyAnswer(text="done")]
    lines = ["| tool latency | in order (default) | --parallel-tool-calls | parallel / in order |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp, ScriptedPolicyServer(lambda prompt: steps) as policy:
        work = Path(tmp)
        rows = write_episode_rows(work / "rows.jsonl", ns.episodes)
        for ms in ns.tool_ms:
            env = work / f"env_{int(ms * 1000)}.py"
            env.write_text(ENV.format(delay=ms / 1000))
            proc, address = serve(env)
            rates: dict[bool, list[float]] = {False: [], True: []}
            try:
                for _ in range(ns.rounds):
                    for parallel in (False, True):
                        rate = asyncio.run(one_run(address, policy.url, rows, work / "out.jsonl", ns.concurrency, parallel))
                        rates[parallel].append(rate)
                        print(f"tool {ms:g} ms, parallel={parallel}: {rate:,.0f} episodes/s", file=sys.stderr)
            finally:
                proc.terminate()
                proc.wait(15)
            seq, par = statistics.median(rates[False]), statistics.median(rates[True])
            lines.append(f"| {ms:g} ms | {seq:,.0f} ep/s | {par:,.0f} ep/s | {par / seq:.2f}x |")
    print(f"{ns.episodes} episodes, {ns.calls} calls in one turn, {ns.concurrency} in flight, median of {ns.rounds}\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
