"""The verl reward functions against a real server (math_exact).

Call-shape tests run everywhere and call the functions the way verl 0.9.1 does:
`verl/trainer/ppo/reward.py` `get_custom_reward_fn` loads `custom_reward_function.name` from
its `path` (`pkg://` imports the module) and wraps it in a partial merging `reward_kwargs`
into every call, async when `inspect.iscoroutinefunction(raw_fn)`;
`verl/experimental/reward_loop/reward_manager/naive.py` `NaiveRewardManager.run_single`
awaits an async one or runs a sync one in an executor, with the keywords `data_source`,
`solution_str`, `ground_truth`, `extra_info` (to which it adds `num_turns` and
`rollout_reward_scores`), and takes `result["score"]` from a dict;
`verl/workers/reward_manager/batch.py` `BatchRewardManager.verify` passes `data_sources`
(a numpy array), `solution_strs`, `ground_truths`, `extra_infos` and its `reward_kwargs`;
`verl/workers/reward_manager/prime.py` calls it positionally in a process pool (so it must
pickle). The real-package test drives verl's own reward managers on a DataProto and skips
where verl (and torch) are not importable. By hand, in a throwaway Python 3.11 venv: torch
(CPU), `verl==0.9.1 --no-deps`, then `tensordict<=0.10` `transformers<5.11` omegaconf ray
aiohttp codetiming and this package."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import math
import pickle
import subprocess
import sys
from functools import partial
from typing import Any

import numpy as np
import pytest

from gym_metrics.errors import InvalidInputError

from gym_metrics.integrations import RewardFailure, RowMapping
from gym_metrics.integrations.verl import compute_score, group_consecutive, reward_function, task_row
from gym_metrics.testing import serve_environment

pytestmark = pytest.mark.timeout(120)

SOLUTIONS = ["The answer is 4.", "5", "Answer: 4", "6", "It is 6.", "I do not know"]
TRUTHS = ["4"] * 3 + ["6"] * 3
EXPECTED = [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]


def extra_info(i: int) -> dict[str, Any]:
    return {"split": "train", "index": i // 3, "question": "What is 2+2?" if i < 3 else "What is 3+3?"}


def load(name: str, reward_kwargs: dict[str, Any]) -> Any:
    """get_custom_reward_fn: the object from a pkg:// path, reward_kwargs merged into each call."""
    raw_fn = getattr(importlib.import_module("gym_metrics.integrations.verl"), name)

    def merged(*args: Any, **kwargs: Any) -> Any:
        return raw_fn(*args, **{**kwargs, **reward_kwargs})

    async def merged_async(*args: Any, **kwargs: Any) -> Any:
        return await raw_fn(*args, **{**kwargs, **reward_kwargs})

    return merged_async if inspect.iscoroutinefunction(raw_fn) else merged


async def run_single(fn: Any, i: int) -> Any:
    """The reward loop's NaiveRewardManager.run_single, from the call on."""
    info = {**extra_info(i), "num_turns": None, "rollout_reward_scores": {}}
    kwargs = {"data_source": "openai/gsm8k", "solution_str": SOLUTIONS[i], "ground_truth": TRUTHS[i], "extra_info": info}
    if inspect.iscoroutinefunction(fn):
        result = await fn(**kwargs)
    else:
        result = await asyncio.get_running_loop().run_in_executor(None, lambda: fn(**kwargs))
    return result["score"] if isinstance(result, dict) else result


def test_importing_the_adaptor_imports_no_verl() -> None:
    code = "import sys, gym_metrics.integrations.verl; print(sorted({'verl', 'torch'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_consecutive_samples_of_one_row_are_one_group() -> None:
    rows = [{"a": 1}, {"a": 1}, {"a": 2}, {"a": 1}]
    groups, spans = group_consecutive(rows, ["w", "x", "y", "z"])
    assert spans == [(0, 2), (2, 3), (3, 4)] and groups[0] == ({"a": 1}, ["w", "x"])


def test_the_row_is_the_extra_info_less_verls_own_keys() -> None:
    info = {**extra_info(0), "num_turns": None, "rollout_reward_scores": {}}
    request = {"input": [{"role": "user", "content": "What is 2+2?"}]}
    assert task_row(RowMapping(), np.str_("4"), info) == {"split": "train", "index": 0, "question": "What is 2+2?", "expected_answer": "4", "responses_create_params": request}
    assert task_row(RowMapping(columns=["index"]), "4", info) == {"index": 0, "expected_answer": "4", "responses_create_params": request}
    gym = {"responses_create_params": {"input": [{"role": "user", "content": "q"}], "temperature": 0.5}}
    assert task_row(RowMapping(), "4", gym)["responses_create_params"] == gym["responses_create_params"]


async def test_per_sample_functions_sync_and_async_from_the_reward_loop() -> None:
    async with serve_environment("math_exact") as server:
        sync_fn = load("compute_score", {"server": server.address})
        async_fn = load("compute_score_async", {"server": server.address})
        assert inspect.iscoroutinefunction(async_fn) and not inspect.iscoroutinefunction(sync_fn)
        sync_rewards = await asyncio.gather(*(run_single(sync_fn, i) for i in range(6)))
        async_rewards = await asyncio.gather(*(run_single(async_fn, i) for i in range(6)))
    assert sync_rewards == EXPECTED and async_rewards == EXPECTED


async def test_the_batch_form_as_the_batch_reward_manager_calls_it() -> None:
    async with serve_environment("math_exact") as server:
        fn = load("compute_score_batch", {"server": server.address, "extra_fields": ["extracted_answer"]})
        infos = np.array([{**extra_info(i), "rollout_reward_scores": {}} for i in range(6)], dtype=object)
        scores = await asyncio.to_thread(
            fn, data_sources=np.array(["openai/gsm8k"] * 6, dtype=object), solution_strs=SOLUTIONS, ground_truths=TRUTHS, extra_infos=infos
        )
    assert [s["score"] for s in scores] == EXPECTED
    assert [s["extracted_answer"] for s in scores] == ["4", "5", "4", "6", "6", None]


async def test_the_batch_form_refuses_lists_of_other_lengths() -> None:
    """zip scored as many samples as the shortest list held: 4 solutions with 2 truths gave 2
    scores, without a word."""
    async with serve_environment("math_exact") as server:
        fn = reward_function(server.address, form="batch")
        with pytest.raises(InvalidInputError, match="4 solution_strs, but ground_truths has 2$"):
            await asyncio.to_thread(fn, ["src"] * 4, SOLUTIONS[:4], TRUTHS[:2])
        with pytest.raises(InvalidInputError, match="4 solution_strs, but extra_infos has 3$"):
            await asyncio.to_thread(fn, ["src"] * 4, SOLUTIONS[:4], TRUTHS[:4], [extra_info(i) for i in range(3)])


async def test_positional_calls_from_a_process_pool_pickle() -> None:
    async with serve_environment("math_exact") as server:
        fn = pickle.loads(pickle.dumps(partial(compute_score, server=server.address)))  # prime's pool pickles it
        rewards = [await asyncio.to_thread(fn, "openai/gsm8k", s, t, extra_info(i)) for i, (s, t) in enumerate(zip(SOLUTIONS, TRUTHS))]
    assert rewards == EXPECTED


async def test_a_sample_that_cannot_be_scored_raises_unless_told_otherwise() -> None:
    async with serve_environment("math_exact") as server:  # without the label math_exact refuses the row
        with pytest.raises(RewardFailure, match="expected_answer"):
            await asyncio.to_thread(compute_score, "src", "4", None, {}, server=server.address)
        nan = await asyncio.to_thread(compute_score, "src", "4", None, {}, server=server.address, on_failure="nan")
        custom = reward_function(server.address, on_failure="zero", form="batch")
        zero = await asyncio.to_thread(custom, ["src"] * 2, ["4", "4"], [None, "4"], [{}, {}])
    assert math.isnan(nan) and zero == [0.0, 1.0]


# ----------------------------------------------------------------------------- verl itself


class CharTokenizer:
    """A tokenizer whose token ids are character codes (0: padding)."""

    def encode(self, text: str, length: int) -> list[int]:
        return [ord(c) for c in text] + [0] * (length - len(text))

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids if int(i))

    def batch_decode(self, rows: Any, skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(r) for r in rows]


def _data_proto(verl: Any, torch: Any) -> Any:
    tok, prompt_len, response_len = CharTokenizer(), 16, 20
    prompts = [extra_info(i)["question"] for i in range(6)]
    prompt_ids = torch.tensor([tok.encode(p, prompt_len) for p in prompts])
    response_ids = torch.tensor([tok.encode(s, response_len) for s in SOLUTIONS])
    mask = torch.cat([(prompt_ids != 0).long(), (response_ids != 0).long()], dim=1)
    return verl.DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": response_ids, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["openai/gsm8k"] * 6, dtype=object),
            "reward_model": np.array([{"ground_truth": t} for t in TRUTHS], dtype=object),
            "extra_info": np.array([extra_info(i) for i in range(6)], dtype=object),
        },
    )


async def test_verl_reward_managers_call_the_functions() -> None:
    verl = pytest.importorskip("verl", reason="verl (with torch) is not installed")
    torch = pytest.importorskip("torch")
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager.batch import BatchRewardManager
    from verl.workers.reward_manager.naive import NaiveRewardManager

    async with serve_environment("math_exact") as server:

        def custom(name: str, **kwargs: Any) -> Any:
            section = {"path": "pkg://gym_metrics.integrations.verl", "name": name, "reward_kwargs": {"server": server.address, **kwargs}}
            return get_custom_reward_fn(OmegaConf.create({"reward": {"custom_reward_function": section}}))

        naive = NaiveRewardManager(CharTokenizer(), num_examine=0, compute_score=custom("compute_score", extra_fields=["is_correct"]))
        naive_out = await asyncio.to_thread(naive, _data_proto(verl, torch), return_dict=True)
        batch = BatchRewardManager(CharTokenizer(), num_examine=0, compute_score=custom("compute_score_batch"))
        batch_out = await asyncio.to_thread(batch, _data_proto(verl, torch), return_dict=True)
        loop_rewards = await _reward_loop(verl, torch, custom("compute_score_async"))
    lengths = [len(s) for s in SOLUTIONS]
    for out in (naive_out, batch_out):
        assert [out["reward_tensor"][i, n - 1].item() for i, n in enumerate(lengths)] == EXPECTED
        assert out["reward_tensor"].sum().item() == sum(EXPECTED)  # the reward sits on the last token only
    assert naive_out["reward_extra_info"]["is_correct"] == [r == 1.0 for r in EXPECTED]
    assert loop_rewards == EXPECTED


async def _reward_loop(verl: Any, torch: Any, fn: Any) -> list[float]:
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    manager = NaiveRewardManager(OmegaConf.create({}), CharTokenizer(), fn)
    manager.loop = asyncio.get_running_loop()
    data = _data_proto(verl, torch)
    results = await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(6)))
    return [r["reward_score"] for r in results]
