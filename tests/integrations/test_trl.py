"""The TRL reward function against a real server (math_exact), called the way TRL's
GRPOTrainer calls a reward function: `prompts` and `completions` with each prompt repeated
num_generations times, `completion_ids`, `trainer_state` and the dataset columns as keyword
lists (TRL's own package is exercised in tests/integrations/test_trl_package.py where it installs)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from gym_metrics.aggregate import aggregate_file
from gym_metrics.integrations import RewardFailure, RowMapping
from gym_metrics.integrations.trl import group_by_prompt, reward_function
from gym_metrics.testing import serve_environment

pytestmark = pytest.mark.timeout(60)

PROMPTS = ["What is 2+2?"] * 3 + ["What is 3+3?"] * 3
COMPLETIONS = ["The answer is 4.", "5", "Answer: 4", "6", "It is 6.", "I do not know"]
COLUMNS: dict[str, Any] = {"expected_answer": ["4"] * 3 + ["6"] * 3, "level": [1] * 3 + [2] * 3}


def call(fn: Any, **overrides: Any) -> Any:
    kwargs = {"prompts": PROMPTS, "completions": COMPLETIONS, "completion_ids": [[1]] * 6,
              "trainer_state": SimpleNamespace(global_step=7), **COLUMNS, **overrides}  # fmt: skip
    return fn(**kwargs)


def test_groups_follow_the_repeated_prompts_and_their_columns() -> None:
    groups, spans = group_by_prompt(PROMPTS, COMPLETIONS, COLUMNS, RowMapping())
    assert spans == [(0, 3), (3, 6)]
    row, completions = groups[1]
    assert row == {"expected_answer": "6", "level": 2, "responses_create_params": {"input": [{"role": "user", "content": "What is 3+3?"}]}}
    assert completions == ["6", "It is 6.", "I do not know"]


def test_array_valued_columns_group_and_travel_as_lists() -> None:
    """A column of numpy arrays (datasets with a numpy format; a list of arrays too) once
    crashed the grouping (an array's == is elementwise): cells compare and travel as lists."""
    columns = {**COLUMNS, "ids": [np.array([1, 2])] * 3 + [np.array([1, 3])] * 3, "nested": [[np.float32(0.5), np.array([7])]] * 6}
    groups, spans = group_by_prompt(["same prompt"] * 6, COMPLETIONS, columns, RowMapping())
    assert spans == [(0, 3), (3, 6)]
    assert groups[1][0]["ids"] == [1, 3] and groups[0][0]["nested"] == [0.5, [7]]
    json.dumps(groups)  # every value is plain


async def test_sync_and_async_reward_functions_give_the_servers_rewards() -> None:
    async with serve_environment("math_exact") as server:
        sync_fn = reward_function(server.address)
        async_fn = reward_function(server.address, asynchronous=True, name="math")
        assert sync_fn.__name__ == "gym_metrics" and async_fn.__name__ == "math"
        rewards = await asyncio.to_thread(call, sync_fn)
        concurrent = await asyncio.gather(call(async_fn), call(async_fn))  # TRL runs async ones together
    assert rewards == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    assert concurrent == [rewards, rewards]


async def test_prompts_and_completions_of_different_lengths_are_refused_not_scored_short() -> None:
    """Three prompts with two completions gave two rewards; two with three gave the third None
    (TRL's "left out"), without a word."""
    async with serve_environment("math_exact") as server:
        fn = reward_function(server.address)
        for prompts, completions, said in ((PROMPTS, COMPLETIONS[:5], "6 prompts but 5 completions"), (PROMPTS[:5], COMPLETIONS, "5 prompts but 6 completions")):
            with pytest.raises(ValueError, match=f"reward function gym_metrics got {said}: one each, in order"):
                await asyncio.to_thread(call, fn, prompts=prompts, completions=completions)


async def test_conversational_samples_and_a_renamed_label_column() -> None:
    prompts = [[{"role": "user", "content": "What is 2+2?"}]] * 2
    completions = [[{"role": "assistant", "content": "4"}], [{"role": "assistant", "content": "3"}]]
    async with serve_environment("math_exact") as server:
        fn = reward_function(server.address, mapping=RowMapping(label_column="solution"))
        rewards = await asyncio.to_thread(fn, prompts=prompts, completions=completions, solution=["4", "4"])
    assert rewards == [1.0, 0.0]


@pytest.mark.parametrize("column", ["ground_truth", "labels", "answer"])
async def test_a_label_under_a_conventional_name_is_the_label(column: str) -> None:
    """The mapping says `ground_truth`, `labels` or `answer` is the label; TRL passes columns only,
    and every completion failed on a missing expected_answer."""
    async with serve_environment("math_exact") as server:
        fn = reward_function(server.address)
        rewards = await asyncio.to_thread(fn, prompts=["What is 2+2?"] * 2, completions=["4", "5"], **{column: ["4", "4"]})
    assert rewards == [1.0, 0.0]


async def test_a_completion_that_cannot_be_scored_is_never_a_silent_zero() -> None:
    async with serve_environment("math_exact") as server:  # without the label math_exact refuses each row
        skipped = await asyncio.to_thread(call, reward_function(server.address), expected_answer=None)
        nan = await asyncio.to_thread(call, reward_function(server.address, on_failure="nan"), expected_answer=None)
        with pytest.raises(RewardFailure, match="expected_answer"):
            await asyncio.to_thread(call, reward_function(server.address, on_failure="raise"), expected_answer=None)
    assert skipped == [None] * 6 and all(math.isnan(r) for r in nan)


async def test_why_completions_failed_is_logged_once_and_a_misnamed_label_column_is_an_error(caplog: pytest.LogCaptureFixture) -> None:
    """A reward function whose rows all fail once returned None for each and logged nothing:
    the first reason is logged (then at most a line a minute); a label column the dataset does
    not have is an error naming the columns it does have."""
    async with serve_environment("math_exact") as server:
        fn = reward_function(server.address, name="math")
        with caplog.at_level(logging.WARNING, logger="gym_metrics.integrations"):
            for _ in range(3):
                assert await asyncio.to_thread(call, fn, expected_answer=None) == [None] * 6
        lines = [r.getMessage() for r in caplog.records if r.name == "gym_metrics.integrations"]
        assert len(lines) == 1 and lines[0].startswith("reward function math: 6 of 6 completions could not be scored") and "expected_answer" in lines[0]
        misnamed = reward_function(server.address, mapping=RowMapping(label_column="solution"))
        with pytest.raises(ValueError, match=r"label_column 'solution' is not a column of the dataset \(its columns: expected_answer, level\)"):
            await asyncio.to_thread(call, misnamed)


async def test_recorded_training_rewards_aggregate_like_any_run(tmp_path: Path) -> None:
    record = tmp_path / "train.jsonl"
    async with serve_environment("math_exact") as server:
        fn = reward_function(server.address, record=record)
        await asyncio.to_thread(call, fn)
        await asyncio.to_thread(call, fn, trainer_state=SimpleNamespace(global_step=8))
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    assert [r["agent_ref"]["name"] for r in rows] == ["step_7"] * 6 + ["step_8"] * 6
    assert [r["reward"] for r in rows[:6]] == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    # what was asked and answered (math_exact's verify echoes neither): a recorded sample can be read
    assert [r["response"]["output"][0]["content"][0]["text"] for r in rows[:6]] == [c for c in COMPLETIONS]
    assert all(r["responses_create_params"]["input"] for r in rows)
    metrics, _, _ = aggregate_file(record, tmp_path / "train_aggregate_metrics.json")
    by_step = {m["agent_ref"]["name"]: m["agent_metrics"]["mean/reward"] for m in json.loads(metrics.read_text())}
    assert by_step == {"step_7": pytest.approx(4 / 6), "step_8": pytest.approx(4 / 6)}


async def test_what_grpotrainer_passes_beside_the_columns_stays_out_of_the_row() -> None:
    """TRL passes `environments` (one environment object per completion) when the trainer has an
    environment_factory, and `log_extra` / `log_metric` callables: none is a dataset column."""
    objects = [object()] * 6
    groups, _ = group_by_prompt(PROMPTS, COMPLETIONS, {**COLUMNS, "environments": objects, "odd": objects}, RowMapping())
    assert set(groups[0][0]) == {"expected_answer", "level", "responses_create_params"}
    async with serve_environment("math_exact") as server:
        rewards = await asyncio.to_thread(call, reward_function(server.address), environments=objects, log_extra=print)
    assert rewards == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
