"""Reward reducers in a server: listed by name (class attribute `reducers`, or `metrics` its old
name; `serve(reducers=...)`, `serve --reducers` / `--metrics`), added to agent_metrics with their
uncertainty, key_metrics by pattern."""

from __future__ import annotations

import asyncio
import random
import re
import signal
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson
import pytest

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer
from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics._transport.client import ResourcesClient
from gym_metrics._transport.server import load_env
from gym_metrics.rollouts import RolloutColumns
from gym_metrics.cli import main
from gym_metrics.errors import InvalidInputError, NotFoundError
from gym_metrics.reducers import summarize_reducers

V1 = [[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]]
LISTED = ["mean_reward", "pass_rate", "pass@2", "pass^2", "unbiased_pass@2", "unbiased_pass^2"]


class RewardOne(SimpleResourcesServer):
    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(reward=1.0)


class ReducerEnv(RewardOne):
    name = "reducer_env"
    reducers = LISTED


class KeyedEnv(RewardOne):
    reducers = ["pass@1", "pass@4", "unbiased_pass@2"]
    key_metrics = ["mean/reward", "pass@*"]


class CustomEnv(ReducerEnv):
    """Overrides compute_metrics: the listed reducers still come, its keys win a clash."""

    reducers = ["pass@2", "mean_reward"]

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return {"pass@2": -1.0, "rows": sum(map(len, tasks))}


def rows(tasks: list[list[Any]], **extra: Any) -> list[dict[str, Any]]:
    return [
        {"_ng_task_index": t, "_ng_rollout_index": r, "reward": x, **extra}
        for t, task in enumerate(tasks)
        for r, x in enumerate(task)
    ]


async def test_listed_reducers_go_into_agent_metrics() -> None:
    env = ReducerEnv()
    assert env.wants_rows is False  # the reward column is enough: no rows need to travel
    agg = await env.aggregate_metrics(rows(V1))
    m = agg.agent_metrics
    assert m["mean_reward"] == 0.5 and m["pass_rate"] == 0.5
    assert m["pass@2"] == float(Fraction(2, 3)) and m["pass^2"] == float(Fraction(1, 3))
    assert m["unbiased_pass@2"] == pytest.approx(11 / 18, rel=1e-14)
    assert m["unbiased_pass^2"] == pytest.approx(7 / 18, rel=1e-14)
    for name in LISTED:
        assert m[f"{name}/tasks_used"] == 3 and m[f"{name}/tasks_dropped"] == 0
        assert m[f"{name}/ci_low_95"] <= m[name] <= m[f"{name}/ci_high_95"]
        assert m[f"{name}/stderr"] > 0
    assert {k: v for k, v in m.items() if k.split("/")[0] in LISTED} == summarize_reducers(LISTED, V1)
    keys = list(m)
    assert keys.index("mean/reward") < keys.index("mean_reward") < keys.index("num_repeats")
    assert agg.key_metrics == {"mean/reward": 0.5}  # docs/metrics.md#key-metrics default unchanged


async def test_rollout_order_not_arrival_order() -> None:
    shuffled = rows([[0, 1], [1, 0]])
    random.Random(0).shuffle(shuffled)
    m = (await ReducerEnv().aggregate_metrics(reversed(shuffled))).agent_metrics
    assert m["pass@2"] == 1.0
    env = KeyedEnv()
    m = (await env.aggregate_metrics(shuffled)).agent_metrics
    assert m["pass@1"] == 0.5  # task 0's first rollout fails, task 1's passes


async def test_missing_and_non_numeric_rewards_are_left_out() -> None:
    data = rows([[None, 1, 0], ["1", 0, 1], [None, None]])
    m = (await KeyedEnv().aggregate_metrics(data)).agent_metrics
    # task 0 -> [1, 0], task 1 -> [0, 1], task 2 -> [] (an empty task: fails first-k, dropped by unbiased)
    assert m["pass@1"] == float(Fraction(1, 3))
    assert m["unbiased_pass@2"] == 1.0
    assert (m["unbiased_pass@2/tasks_used"], m["unbiased_pass@2/tasks_dropped"]) == (2, 1)
    assert (m["pass@1/tasks_used"], m["pass@1/tasks_dropped"]) == (3, 0)


async def test_masked_rows_are_left_out() -> None:
    data = rows([[1, 0], [0, 0]])
    data[0]["mask_sample"] = True
    m = (await KeyedEnv().aggregate_metrics(data)).agent_metrics
    assert m["pass@1"] == 0.0  # task 0 starts at its first measured rollout, which fails


async def test_no_reward_field_means_empty_tasks() -> None:
    data = [{"_ng_task_index": t, "_ng_rollout_index": 0, "score": 1.0} for t in range(3)]
    m = (await ReducerEnv().aggregate_metrics(data)).agent_metrics
    assert m["mean_reward"] == 0.0 and m["mean_reward/tasks_dropped"] == 3 and m["pass@2"] == 0.0


async def test_compute_metrics_override_keeps_reducers_and_wins_clashes() -> None:
    env = CustomEnv()
    assert env.wants_rows is True
    m = (await env.aggregate_metrics(rows(V1))).agent_metrics
    assert m["pass@2"] == -1.0 and m["rows"] == 12
    assert m["pass@2/tasks_used"] == 3 and m["mean_reward"] == 0.5


async def test_key_metrics_by_name_and_pattern() -> None:
    agg = await KeyedEnv().aggregate_metrics(rows(V1))
    assert list(agg.key_metrics) == [k for k in agg.agent_metrics if k == "mean/reward" or k.startswith("pass@")]
    assert "pass@4/stderr" in agg.key_metrics and "unbiased_pass@2" not in agg.key_metrics
    assert agg.key_metrics["pass@4"] == float(Fraction(2, 3))


def test_load_env_reducers_option() -> None:
    env = load_env(ReducerEnv, ["pass@8", "pass^8", "pass@8"])
    assert env.listed_reducers() == ["pass@8", "pass^8"] and env.server_info()["metrics"] == ["pass@8", "pass^8"]
    assert ReducerEnv.reducers == LISTED and ReducerEnv().listed_reducers() == LISTED  # the class is untouched
    old = load_env(KeyedEnv, metrics=["pass@8", "pass^8", "pass@8"])  # the option's old name
    assert old.listed_reducers() == old.metrics == ["pass@8", "pass^8"]
    assert KeyedEnv().listed_reducers() == ["pass@1", "pass@4", "unbiased_pass@2"]
    with pytest.raises(NotFoundError, match="unknown reducer 'pass@eight'"):
        load_env(ReducerEnv, reducers=["pass@1", "pass@eight"])
    with pytest.raises(InvalidInputError, match="give one of them"):
        load_env(ReducerEnv, reducers=["pass@1"], metrics=["pass@2"])

    class Typo(ReducerEnv):
        reducers = ["mean_rewrd"]

    with pytest.raises(NotFoundError, match="mean_rewrd"):  # a bad class list fails before serving too
        load_env(Typo)


async def test_served_over_grpc_with_reducers_option() -> None:
    running = await start_server(ReducerEnv, ServerConfig(port=0, log_requests=False), reducers=["pass@2", "pass^4"])
    try:
        async with ResourcesClient(running.address) as client:
            info = await client.server_info()
            assert info.metrics == ["pass@2", "pass^4"] and info.wants_rows is False
            agg = await client.aggregate("a", RolloutColumns.from_rows(rows(V1)), batch_size=5, include_rows=False)
        assert agg.agent_metrics["pass@2"] == float(Fraction(2, 3))
        assert agg.agent_metrics["pass^4"] == float(Fraction(1, 3))
        assert agg.agent_metrics["pass^4/tasks_used"] == 3
        assert "mean_reward" not in agg.agent_metrics
    finally:
        await running.stop(0)


APP = '''
from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer

class Listed(SimpleResourcesServer):
    name = "listed"
    reducers = ["pass@2", "unbiased_pass^2"]
    key_metrics = ["pass@2", "unbiased_*"]

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(reward=0.0)
'''


def test_cli_aggregate_with_env_adds_reducers(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    data = tmp_path / "runs.jsonl"
    data.write_bytes(b"".join(orjson.dumps({"agent_ref": {"name": "a"}, **r}) + b"\n" for r in rows(V1)))
    assert main(["aggregate", str(data), "--env", f"{tmp_path / 'app.py'}:Listed", "-q"]) == 0
    [entry] = orjson.loads((tmp_path / "runs_aggregate_metrics.json").read_bytes())
    assert entry["agent_metrics"]["pass@2"] == float(Fraction(2, 3))
    assert entry["agent_metrics"]["unbiased_pass^2"] == pytest.approx(7 / 18, rel=1e-14)
    assert set(entry["key_metrics"]) == {
        "pass@2", "unbiased_pass^2", "unbiased_pass^2/stderr", "unbiased_pass^2/ci_low_95",
        "unbiased_pass^2/ci_high_95", "unbiased_pass^2/tasks_used", "unbiased_pass^2/tasks_dropped",
    }  # fmt: skip


async def _serve(*args: str) -> tuple[int | None, str, list[str]]:
    """Run `gym-metrics serve ARGS --port 0`; if it comes up, ask its metrics and stop it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gym_metrics.cli", "serve", *args, "--port", "0", stderr=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), timeout=30)).decode()
        address = re.search(r"listening on (\S+:\d+)", line)
        if not address:
            rest = (await asyncio.wait_for(proc.stderr.read(), timeout=30)).decode()
            return await asyncio.wait_for(proc.wait(), timeout=30), line + rest, []
        async with ResourcesClient(address.group(1)) as client:
            metrics = list((await client.server_info()).metrics)
        proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(proc.wait(), timeout=20), line, metrics
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_cli_serve_reducers_option() -> None:
    code, _, metrics = await _serve("math_exact", "--reducers", "pass@1", "unbiased_pass^4")
    assert code == 0 and metrics == ["pass@1", "unbiased_pass^4"]
    code, err, _ = await _serve("math_exact", "--metrics", "pass@1", "bogus")  # the old spelling
    assert code != 0 and "unknown reducer 'bogus'" in err and "listening" not in err


async def test_math_exact_first_k_pass_at_k_agrees_with_the_registry() -> None:
    from gym_metrics_servers.math_exact import MathExactServer

    rng = random.Random(5)
    tasks = [[float(rng.random() < 0.4) for _ in range(rng.randint(1, 8))] for _ in range(50)]
    own = MathExactServer().compute_metrics([[{"_ng_task_index": t, "reward": x} for x in task] for t, task in enumerate(tasks)])
    for k in (1, 2, 4, 8):
        assert own[f"pass@{k}"] == summarize_reducers([f"pass@{k}"], tasks)[f"pass@{k}"]
    assert own["pass@1[avg-of-k]"] == pytest.approx(summarize_reducers(["mean_reward"], tasks)["mean_reward"], rel=1e-14)


async def test_a_key_metrics_pattern_that_matches_nothing_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    """A misspelt pattern left the headline empty without a word."""

    class Misspelt(KeyedEnv):
        key_metrics = ["mean/reward", "mean/rewrd_gm_test"]

    with caplog.at_level("WARNING", logger="gym_metrics.environments"):
        for _ in range(2):
            agg = await Misspelt().aggregate_metrics(rows(V1))
    assert list(agg.key_metrics) == ["mean/reward"]
    said = [r.getMessage() for r in caplog.records if "mean/rewrd_gm_test" in r.getMessage()]
    assert len(said) == 1 and "Misspelt.key_metrics: 'mean/rewrd_gm_test' matches no metric (" in said[0]
