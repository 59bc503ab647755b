"""`gym-metrics demo`: the main job on an embedded default, no external service (the README's
first command): math_exact's sample collected in process, or with a scripted policy
(`--online`, `--reasoning-gym`) or a scripted agent policy (`--agent`)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gym_metrics._util.atomic import check_output_dir
from gym_metrics.cli._collect_report import report, run_keeping_result
from gym_metrics.errors import GymMetricsError


def run_demo(ns: argparse.Namespace) -> int:
    from gym_metrics.environments import resolve_server
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics._transport.server import ServerConfig, start_server
    from gym_metrics.collector import CollectOptions, collect_async

    check_output_dir(ns.out_dir, "--out-dir")
    name = "inventory" if ns.agent else "reasoning_gym" if ns.reasoning_gym else "math_exact"
    env = resolve_server(name)()  # the shipped example environment, found by name (reasoning_gym: the extra, or an error saying so)
    sample = env.sample
    if sample is None:
        raise GymMetricsError(f"{name} ships no sample file (is the package installed whole?)")
    out = ns.out_dir / ("inventory_episodes.jsonl" if ns.agent else f"{name}_online_rollouts.jsonl" if ns.online or ns.reasoning_gym else "math_exact_rollouts.jsonl")
    for stale in (out, out.with_name(f"{out.stem}_aggregate_metrics.json")):
        stale.unlink(missing_ok=True)

    async def collect(source: Path, options: CollectOptions | None) -> Any:
        server = await start_server(env, ServerConfig(port=0, log_requests=False))
        print(f"{name} serving on {server.address}; collecting {source.name}", file=sys.stderr)
        try:
            async with ResourcesClient(server.address) as client:
                return await collect_async(client, source, out, options)
        finally:
            await server.stop(0)

    started = time.perf_counter()
    if ns.reasoning_gym:
        from gym_metrics.cli._demo_reasoning_gym import per_dataset_line, scripted_policy

        with scripted_policy(ns.out_dir) as (tasks, options):
            result = run_keeping_result(collect(tasks, options))
        return report(result, time.perf_counter() - started, per_dataset_line(result))
    if ns.agent:
        with _scripted_agent_policy() as options:
            result = run_keeping_result(collect(sample, options))
        return report(result, time.perf_counter() - started)
    if not ns.online:
        result = run_keeping_result(collect(sample, None))
        return report(result, time.perf_counter() - started)
    with _scripted_policy(sample, ns.out_dir) as (tasks, options):
        result = run_keeping_result(collect(tasks, options))
    return report(result, time.perf_counter() - started)


DEMO_REPEATS = 4


@contextlib.contextmanager
def _scripted_policy(sample: Path, out_dir: Path) -> Iterator[tuple[Path, Any]]:
    """The sample's 12 tasks as NeMo Gym task rows (no response) in `out_dir`, a scripted
    policy on loopback that answers 9 of them right (so mean/reward is 0.75), and the collect
    options that generate 4 rollouts per task with it."""
    import json

    from gym_metrics.collector import CollectOptions
    from gym_metrics.targets import ModelTargetConfig
    from gym_metrics.testing import ScriptedPolicyServer

    tasks: dict[int, dict[str, Any]] = {}
    for line in sample.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        tasks.setdefault(row["_ng_task_index"], row)
    answers, path = {}, out_dir / "math_exact_tasks.jsonl"
    out_dir.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for index, row in sorted(tasks.items()):
            request = row["responses_create_params"]
            prompt = request["input"][-1]["content"]
            right = index % 4 != 3
            answers[prompt] = f"The final answer is $\\boxed{{{row['expected_answer']}}}$." if right else "I am not sure, maybe 7."
            task = {"agent_ref": {"name": "scripted_policy"}, "responses_create_params": request, "expected_answer": row["expected_answer"]}
            f.write(json.dumps(task) + "\n")
    with ScriptedPolicyServer(answers) as policy:
        print(f"scripted policy serving on {policy.url}; generating {DEMO_REPEATS} rollouts per task", file=sys.stderr)
        target = ModelTargetConfig(url=policy.url, model="scripted-policy", max_concurrency=16)
        yield path, CollectOptions(num_repeats=DEMO_REPEATS, target=target)


@contextlib.contextmanager
def _scripted_agent_policy() -> Iterator[Any]:
    """A scripted policy on loopback playing the inventory sample's episodes (5 of 8 reach
    their goal), and the collect options that run them through the agent loop."""
    from gym_metrics.collector import CollectOptions
    from gym_metrics.targets import ModelTargetConfig
    from gym_metrics.testing import ScriptedPolicyServer
    from gym_metrics_servers.inventory.scripted import SCRIPT

    with ScriptedPolicyServer(SCRIPT) as policy:
        print(f"scripted policy serving on {policy.url}; running each task as an episode", file=sys.stderr)
        yield CollectOptions(target=ModelTargetConfig(url=policy.url, model="scripted-policy", api="responses", max_concurrency=16))
