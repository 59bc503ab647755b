"""What recording a rollout costs (issue 39): episodes/s of `collect` and bytes per written
rollout with model-call capture off (the default), on (`--capture-model-calls`), on with
payloads (`--capture-payloads`), with the trajectory (`--trajectory`) and with token IDs
(`--capture-tokens`, against the scripted policy's chat endpoint), on loopback.

    python scripts/bench_recording.py [--episodes 600] [--concurrency 32] [--turns 3] [--rounds 5] [--only off trajectory]

A before/after of a change: the same command with PYTHONPATH=<a worktree of the commit before>
(the script's own code is this checkout's), the two in turn.

First, the CPU of capture alone, in process: --cpu-episodes episodes of three exchanges begun
and ended under `capturing()`, their `ng_model_call_capture` block built and encoded (what
collect adds per episode with --capture-model-calls); the median of 5 runs per episode. Then
that of `ng_perf` alone (what --trajectory adds to its trajectory per rollout), the same way, and
of its conversation's items made as NeMo Gym's models dump them.

The environment is bench_tool_call_order.py's `lookup` (no tool latency), served by `gym-metrics
serve` in its own process; the scripted policy (a thread) makes one `lookup` call per turn for
--turns - 1 turns and then answers: per episode --turns policy calls, each one captured record.
The modes run in turn, --rounds times each; the table gives the medians and the ratio to off,
and the bytes per rollout of the output and of its metrics file (each rollout here is a task of
its own, so the latter is mostly its `sample`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_tool_call_order import ENV, serve, write_episode_rows  # noqa: E402

MODES: dict[str, dict[str, bool]] = {
    "off (default)": {},
    "--capture-model-calls": {"capture_model_calls": True},
    "+ --capture-payloads": {"capture_model_calls": True, "capture_payloads": True},
    "--trajectory": {"trajectory": True},
    "--capture-tokens (chat)": {"capture_tokens": True},
}
"""CollectOptions per mode; --capture-tokens asks a chat endpoint (the scripted policy then
tokenizes each request, on this machine's cores too)."""


async def one_run(address: str, policy_url: str, rows: Path, out: Path, concurrency: int, options: dict[str, bool]) -> tuple[float, int, int]:
    from gym_metrics import ResourcesClient
    from gym_metrics.collector import CollectOptions, collect_async
    from gym_metrics.targets import ModelTargetConfig

    api = "chat" if options.get("capture_tokens") else "responses"
    target = ModelTargetConfig(url=policy_url, model="scripted", api=api, max_concurrency=concurrency)
    out.unlink(missing_ok=True)
    opts = CollectOptions(target=target, **options)
    async with ResourcesClient(address) as client:
        start = time.perf_counter()
        result = await collect_async(client, rows, out, opts)
        seconds = time.perf_counter() - start
    assert result.verified == sum(1 for _ in rows.open()) and result.failed_tool_calls == 0, result
    metrics = out.with_name(f"{out.stem}_aggregate_metrics.json").stat().st_size
    return result.verified / seconds, out.stat().st_size // result.verified, metrics // result.verified


def trajectory_cpu_us(episodes: int) -> tuple[float, float]:  # (NaN: this checkout has no as_dumped)
    """Microseconds of CPU per rollout of what --trajectory adds to a collected 3-turn trajectory
    (tests/data/nemo_gym_perf/cases.jsonl): its `ng_perf`, and its conversation's items as NeMo
    Gym's models dump them (`as_dumped`); the median of 5 runs each."""
    import json

    from gym_metrics.recording import rollout_perf

    try:
        from gym_metrics.recording._items import as_dumped
    except ImportError:  # a checkout from before it (PYTHONPATH=OTHER_TREE for a before/after)
        as_dumped = None

    cases = Path(__file__).parents[1] / "tests" / "data" / "nemo_gym_perf" / "cases.jsonl"
    trajectory = next(c for c in map(json.loads, cases.read_text().splitlines()) if c["case"] == "collected over responses")["trajectory"]
    conversation = trajectory["invocations"][0]["conversation"]

    def median_us(work: Any) -> float:
        runs = []
        for _ in range(5):
            start = time.process_time()
            for _ in range(episodes):
                work()
            runs.append((time.process_time() - start) / episodes * 1e6)
        return statistics.median(runs)

    items = median_us(lambda: [as_dumped(i) for i in conversation]) if as_dumped else float("nan")
    return median_us(lambda: rollout_perf(trajectory, 1.0)), items


def capture_cpu_us(episodes: int) -> float:
    """Microseconds of CPU per episode of three calls that capture adds (see the docstring)."""
    import orjson

    from gym_metrics.recording import capture_block, model_call_records
    from gym_metrics.targets import _capture

    request = {"model": "scripted", "input": [{"role": "user", "content": "episode 1"}], "tools": [{"type": "function", "name": "lookup"}]}
    response = {"id": "resp-1", "object": "response", "model": "scripted", "status": "completed",
                "output": [{"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"key": 1}'}],
                "usage": {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17}}  # fmt: skip
    runs = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(episodes):
            with _capture.capturing() as calls:
                for _ in range(3):
                    exchange = _capture.begin("responses", request)
                    assert exchange is not None
                    _capture.end(exchange, time.perf_counter(), 200)
                    exchange.response = response
            orjson.dumps(capture_block("1-0", model_call_records(calls.exchanges)))
        runs.append((time.process_time() - start) / episodes * 1e6)
    return statistics.median(runs)


def nemo_agent_cpu_us(episodes: int) -> float:
    """Microseconds of CPU per rollout of what a NeMo Gym config's observed agent adds (session 33):
    its calls as NeMo Gym's model server records them (`as_recorded`: the typed answer, the body as
    sent), simple_agent's own trajectory, NeMo Gym's join and projection (`with_evidence`), on the
    example's recorded 2-call rollout (tests/data/nemo_gym_session_protocol.json); NaN before it."""
    import copy
    import json

    try:
        from gym_metrics.collector._agent_code import with_evidence
        from gym_metrics.collector._capture import Capture
        from gym_metrics.collector._input import Rollout
        from gym_metrics.nemo_gym import as_recorded
        from gym_metrics.recording import EpisodeTrace, agent_trajectory
    except ImportError:
        return float("nan")
    data = json.loads((Path(__file__).parents[1] / "tests" / "data" / "nemo_gym_session_protocol.json").read_text())
    answer = data["flat_observed"]["responses"][0]
    row = data["flat_observed"]["rows"][0]
    block = answer["ng_model_call_capture"]
    records = [{**c, "request": m["request"], "response": m["response"]} for c, m in zip(block["calls"], answer["ng_trajectory"]["model_calls"])]
    trace = EpisodeTrace()
    for call in records:
        trace.turn(call["request"]["input"], call["response"]["output"], 0.0)
    trace.conversation = [*records[-1]["request"]["input"], *records[-1]["response"]["output"]]
    verify = {k: v for k, v in answer.items() if not k.startswith("ng_")}
    ref = {"type": "responses_api_models", "name": "policy_model"}
    capture = Capture(trajectory=True)

    def one() -> None:
        rollout = Rollout(agent="a", task=0, rollout=0, row=row, verified=False, line=1)
        rollout.recorded = {"ng_model_call_capture": copy.deepcopy({k: v for k, v in block.items()})}
        typed = as_recorded(records, row["responses_create_params"])
        out = dict(verify)
        out["ng_trajectory"] = agent_trajectory(trace, typed, {**row, **out}, "0-0", ref)
        with_evidence(out, rollout, typed, capture, 1.0)

    runs = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(episodes):
            one()
        runs.append((time.process_time() - start) / episodes * 1e6)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cpu-episodes", type=int, default=20_000)
    parser.add_argument("--only", nargs="*", default=[], help="the modes whose name holds one of these words (say `off trajectory`)")
    ns = parser.parse_args()
    modes = {m: o for m, o in MODES.items() if not ns.only or any(word in m for word in ns.only)}
    print(f"capture alone, in process: {capture_cpu_us(ns.cpu_episodes):.0f} us of CPU per episode of 3 calls")
    perf_us, items_us = trajectory_cpu_us(ns.cpu_episodes)
    print(f"ng_perf alone, in process: {perf_us:.1f} us of CPU per rollout of 3 turns")
    print(f"the conversation's items as NeMo Gym dumps them, in process: {items_us:.1f} us of CPU per rollout of 3 turns")
    print(f"a NeMo Gym agent's observed rollout (typed calls, its trajectory, join and projection), in process: "
          f"{nemo_agent_cpu_us(max(1, ns.cpu_episodes // 10)):.0f} us of CPU per rollout of 2 calls\n")

    from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer

    steps = [PolicyAnswer(tool_calls=[{"name": "lookup", "arguments": {"key": k}}]) for k in range(ns.turns - 1)] + [PolicyAnswer(text="done")]
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    sizes: dict[str, tuple[int, int]] = {}
    with tempfile.TemporaryDirectory() as tmp, ScriptedPolicyServer(lambda prompt: steps) as policy:
        work = Path(tmp)
        rows = write_episode_rows(work / "rows.jsonl", ns.episodes)
        env = work / "env.py"
        env.write_text(ENV.format(delay=0.0))
        proc, address = serve(env)
        try:
            for _ in range(ns.rounds):
                for mode, options in modes.items():
                    rate, size, metrics = asyncio.run(one_run(address, policy.url, rows, work / "out.jsonl", ns.concurrency, options))
                    rates[mode].append(rate)
                    sizes[mode] = size, metrics
                    print(f"{mode}: {rate:,.0f} episodes/s, {size:,} bytes/rollout, {metrics:,} metrics bytes/rollout", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait(15)
    off = statistics.median(rates["off (default)"]) if "off (default)" in rates else float("nan")
    print(f"{ns.episodes} episodes of {ns.turns} policy calls, {ns.concurrency} in flight, median of {ns.rounds}\n")
    print("| capture | episodes/s | vs off | bytes/rollout | metrics file bytes/rollout |\n|---|---:|---:|---:|---:|")
    for mode in modes:
        rate = statistics.median(rates[mode])
        print(f"| {mode} | {rate:,.0f} | {rate / off:.3f}x | {sizes[mode][0]:,} | {sizes[mode][1]:,} |")


if __name__ == "__main__":
    main()
