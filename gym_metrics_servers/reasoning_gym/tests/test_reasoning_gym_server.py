"""reasoning_gym: the shipped sample, request validation (INVALID_ARGUMENT naming the field over a
real gRPC server), rewards against reasoning-gym's own scorers, per-dataset metrics and pass@k
through the reducers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))  # tests/_ci.py, tests/_transport_helpers.py
import _ci  # noqa: E402
from _transport_helpers import bad_request  # noqa: E402

from gym_metrics import InvalidInputError, ResourcesClient  # noqa: E402
from gym_metrics.collector import collect_async  # noqa: E402
from gym_metrics.ecosystems.reasoning_gym import dataset_rows, json_bytes  # noqa: E402
from gym_metrics.reducers import summarize_reducers  # noqa: E402
from gym_metrics.testing import serve_environment  # noqa: E402
from gym_metrics.v1 import resources_pb2 as pb  # noqa: E402
from gym_metrics.v1 import resources_pb2_grpc as pb_grpc  # noqa: E402
from gym_metrics_servers.reasoning_gym import make_sample  # noqa: E402
from gym_metrics_servers.reasoning_gym.app import SAMPLE_PATH, ReasoningGymServer  # noqa: E402
from gym_metrics_servers.reasoning_gym.scripted import answer_text, response  # noqa: E402


@pytest.fixture(autouse=True)
def _reasoning_gym() -> None:
    """Every test here scores against reasoning-gym itself (the dev extra brings it)."""
    _ci.need_module("reasoning_gym", "pip install -e '.[dev]' (it brings the reasoning-gym extra)")


def _create(name: str, **settings: Any) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(name, **settings)


def _sample() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE_PATH.read_text(encoding="utf-8").splitlines()]


def _expected(row: dict[str, Any]) -> float:
    """reasoning-gym's own reward for a row: its dataset built here, its entry generated here
    (not read from the row), the answer taken by its extract_answer; 0.0 where the scorer
    raises, as its evaluation scores that."""
    from reasoning_gym.utils import extract_answer

    ref = row["reasoning_gym"]
    dataset = _create(ref["dataset"], seed=ref["seed"], size=ref["size"], **ref["config"])
    text = "".join(p["text"] for item in row["response"]["output"] for p in item["content"])
    try:
        return float(dataset.score_answer(extract_answer(text), dataset[ref["index"]]))
    except Exception:
        return 0.0


def test_the_sample_is_up_to_date() -> None:
    assert make_sample.render(make_sample.build_rows()) == SAMPLE_PATH.read_bytes()


def test_the_sample_holds_every_answer_kind_of_each_task() -> None:
    rows = _sample()
    assert len(rows) == 24
    assert {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows} == {(t, i) for t in range(6) for i in range(4)}
    assert {r["reasoning_gym"]["dataset"] for r in rows} == set(make_sample.DATASETS)
    rewards = [_expected(r) for r in rows]
    assert 0 < sum(x == 1.0 for x in rewards) < len(rows) and any(0 < x < 1 for x in rewards), rewards


async def _verify(env: ReasoningGymServer, row: dict[str, Any]) -> dict[str, Any]:
    return await env.verify_dict(row)


async def test_verify_gives_reasoning_gyms_reward_for_each_sample_row() -> None:
    env = ReasoningGymServer()
    for row in _sample():
        got = await _verify(env, row)
        assert got["reward"] == _expected(row), row["response"]
        assert got["dataset"] == row["reasoning_gym"]["dataset"]
        assert got["answer_found"] == ("<answer>" in row["response"]["output"][0]["content"][0]["text"])


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r["reasoning_gym"].update(dataset="no_such_dataset"), "body_json.reasoning_gym.dataset"),
        (lambda r: r["reasoning_gym"].update(dataset="composite"), "body_json.reasoning_gym.dataset"),
        (lambda r: r["reasoning_gym"]["config"].update(no_such_setting=1), "body_json.reasoning_gym.config.no_such_setting"),
        (lambda r: r["reasoning_gym"]["config"].update(min_animals=0), "body_json.reasoning_gym.config"),
        (lambda r: r["reasoning_gym"]["config"].update(seed=3), "body_json.reasoning_gym.config.seed"),
        (lambda r: r["reasoning_gym"].pop("seed"), "body_json.reasoning_gym.seed"),
        (lambda r: r["reasoning_gym"].update(index=99), "body_json.reasoning_gym"),
        (lambda r: r.pop("reasoning_gym"), "body_json.reasoning_gym"),
        (lambda r: r["entry"].pop("metadata"), "body_json.entry"),
        (lambda r: r.pop("response"), "body_json.response"),
        (lambda r: r.update(entry_types={"metadata/source_dataset": "tuple"}), "body_json.entry_types"),
    ],
)
async def test_a_row_that_cannot_be_rebuilt_is_invalid_argument_naming_the_field(change: Any, field: str) -> None:
    row = next(r for r in _sample() if r["reasoning_gym"]["dataset"] == "leg_counting")
    change(row)
    with pytest.raises(InvalidInputError) as caught:
        await _verify(ReasoningGymServer(), row)
    assert [v.field for v in caught.value.violations] == [field], caught.value
    async with serve_environment(ReasoningGymServer()) as server, grpc.aio.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as over_grpc:
            await pb_grpc.ResourcesServiceStub(channel).Verify(pb.VerifyRequest(body_json=json.dumps(row)))
    assert over_grpc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in bad_request(over_grpc.value)] == [field]


async def test_a_scorer_that_raises_scores_zero_and_says_why() -> None:
    """reasoning-gym's evaluation scores an answer its scorer chokes on as 0.0; so does verify,
    with the error kept (prime_factorization's scorer raises on a non-number)."""
    [row] = [json.loads(json_bytes(r)) for r in dataset_rows("prime_factorization", size=1, seed=3)]
    with pytest.raises(ValueError):
        _create("prime_factorization", size=1, seed=3).score_answer("lots", row["entry"])
    got = await _verify(ReasoningGymServer(), {**row, "response": response("<answer>lots</answer>")})
    assert got["reward"] == 0.0 and got["extracted_answer"] == "lots" and got["score_error"].startswith("ValueError")


async def test_collect_of_the_sample_gives_per_dataset_metrics_and_pass_at_k(tmp_path: Path) -> None:
    """Through a real server: each row's reward is reasoning-gym's, and the metrics per dataset
    are the reducers over that dataset's tasks (pass@4 from `reducers`, as `serve --reducers`)."""
    reducers = ["mean_reward", "pass@1", "pass@4"]
    out = tmp_path / "out.jsonl"
    async with serve_environment(ReasoningGymServer(), reducers=reducers) as server, ResourcesClient(server.address) as client:
        result = await collect_async(client, SAMPLE_PATH, out)
    rows = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in _sample()}
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == len(rows)
    by_dataset: dict[str, dict[int, dict[int, float]]] = {}
    for w in written:
        task, rollout = w["_ng_task_index"], w["_ng_rollout_index"]
        assert w["reward"] == _expected(rows[(task, rollout)]), (task, rollout)
        by_dataset.setdefault(w["dataset"], {}).setdefault(task, {})[rollout] = w["reward"]
    [aggregate] = result.aggregates
    metrics = aggregate.agent_metrics
    assert sorted(by_dataset) == sorted(make_sample.DATASETS)
    for name, tasks in by_dataset.items():
        in_order = [[t[i] for i in sorted(t)] for _, t in sorted(tasks.items())]
        want = summarize_reducers(reducers, in_order)
        for key, value in want.items():
            assert metrics[f"{name}/{key}"] == pytest.approx(value, nan_ok=True), (name, key)
        flat = [r for t in in_order for r in t]
        assert metrics[f"mean/reward/{name}"] == pytest.approx(sum(flat) / len(flat))  # the engine's stats of the column
    overall = [[rows[(t, i)] for i in range(4)] for t in range(6)]
    assert metrics["pass@4"] == 1.0  # every task has its right answer among 4
    assert metrics["pass@1"] == pytest.approx(sum(_expected(t[0]) >= 1.0 for t in overall) / 6)
    assert set(aggregate.key_metrics) == {"mean/reward", *reducers}
    assert not ReasoningGymServer().wants_rows  # per dataset from columns: no row travels to be aggregated


def test_the_kinds_of_answers_score_as_their_names_say() -> None:
    """The scripted answers mean what they say under reasoning-gym's own scorer (leg_counting
    keeps the default oracle scoring: partial credit for the answer inside more text)."""
    from reasoning_gym.utils import extract_answer

    dataset = _create("leg_counting", size=3, seed=5)
    for entry in dataset:
        score = {kind: dataset.score_answer(extract_answer(answer_text(entry, kind)), entry) for kind in ("right", "partly", "wrong", "no_tags", "unclosed", "empty", "last_wins")}
        assert score["right"] == score["last_wins"] == 1.0
        assert 0 < score["partly"] < 1
        assert score["wrong"] == score["no_tags"] == score["unclosed"] == score["empty"] == 0.0
