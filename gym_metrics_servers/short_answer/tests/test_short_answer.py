"""short_answer, the NeMo Gym-style worked example: built from its config YAML, verified in
process, then served over gRPC and collected, with NeMo Gym's pass@k and majority@k metrics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gym_metrics._transport.client import ResourcesClient
from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.nemo_gym.port import rewrite_imports

HERE = Path(__file__).resolve().parents[1]
CONFIG = HERE / "configs" / "short_answer.yaml"
SAMPLE = HERE / "sample.jsonl"


def test_extraction_and_normalisation() -> None:
    env = load_config_server(CONFIG)
    module = sys.modules[type(env).__module__]
    extract = module.extract_answer
    assert extract("The answer is Lyon.\nAnswer: Lyon") == "Lyon"
    assert extract("  \nMars\n") == "Mars" and extract("") is None
    assert env.normalise("  Carbon   Dioxide. ") == "carbon dioxide"
    strict = load_config_server(CONFIG, overrides=["case_sensitive=true", "strip_punctuation=false"])
    assert strict.normalise("Paris.") == "Paris."


async def test_sample_rewards() -> None:
    env = load_config_server(CONFIG)
    rewards = [(await env.verify_json(line))[0] for line in SAMPLE.read_text().splitlines()]
    assert rewards == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0]


async def test_served_from_its_config_and_collected(tmp_path: Path) -> None:
    server = await start_server(load_config_server(CONFIG), ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            result = await collect_async(client, SAMPLE, tmp_path / "run.jsonl", CollectOptions())
    finally:
        await server.stop(0)
    [agent] = json.loads(result.metrics_path.read_text())
    metrics, key = agent["agent_metrics"], agent["key_metrics"]
    assert metrics["mean/reward"] == pytest.approx(5 / 9)
    assert metrics["pass@3/accuracy"] == pytest.approx(100.0)  # every task solved in 3 tries
    # NeMo Gym's majority vote counts (extracted answer, score) pairs: "Paris" and "paris." are two
    # votes, so each task is a three-way tie, scored by the mean of the tied scores (2/3, 2/3, 1/3)
    assert metrics["majority@3/accuracy"] == pytest.approx(100 * 5 / 9)
    assert set(key) == {"mean/reward", "pass@3/accuracy", "majority@3/accuracy"}


def test_its_imports_are_already_ported() -> None:
    source = (HERE / "app.py").read_text()
    assert rewrite_imports(source) == source and "from gym_metrics.nemo_gym." in source
