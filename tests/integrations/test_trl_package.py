"""The TRL reward function inside TRL's real GRPOTrainer (tests/integrations/test_trl.py calls
it the same way without TRL).

A tiny Llama (hidden size 16, one layer) and a character-level tokenizer are built here, with no
download; math_exact is served on loopback. The trainer's own reward step
(`GRPOTrainer._calculate_rewards`) scores fixed completions with a sync and an async
`reward_function`, and the rewards must be what math_exact's verify gives for the same rows
(asked directly with ResourcesClient.verify); then one real `train()` step must log, for both,
the rewards verify gives for what the model generated.

It needs torch, trl, transformers and datasets (about 1.6 GB), which the project's other venvs
do not have: it runs in a venv of its own on Python 3.11, because the CPU build of torch 2.13.0
lies on this machine's disk for 3.11 only (`pip install torch==2.13.0` takes it; any other torch
request downloads a CUDA build of several GB). .ci/run's "trl" stage builds that venv
(.venv311-trl, about a minute) and runs only this file (about 10 s). By hand:

    python3.11 -m venv .venv311-trl
    .venv311-trl/bin/pip install torch==2.13.0
    .venv311-trl/bin/pip install trl==1.16.0 transformers==5.24.0 datasets==5.2.0 accelerate==1.15.0
    .venv311-trl/bin/pip install tokenizers==0.23.3 pytest pytest-asyncio pytest-timeout -e .
    .venv311-trl/bin/python -m pytest -q tests/integrations/test_trl_package.py

Tested with exactly those (torch 2.13.0+cpu) on CPython 3.11.7. Elsewhere it skips with the
reason (tests/_ci.py: under CI=true it fails, so .ci/run's other stages leave it out: --ignore on
the default suite, `slow` on the other Pythons).
"""

from __future__ import annotations

import asyncio
import math
import string
import time
from pathlib import Path
from typing import Any

import pytest

import _ci
from gym_metrics import ResourcesClient
from gym_metrics.integrations.trl import reward_function
from gym_metrics.testing import serve_environment

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

INSTALL = "it runs in its own venv: .ci/run's trl stage, or by hand as this file's docstring says"

# Two prompts, two generations each, as TRL orders them (each prompt repeated num_generations
# times in a row); right and wrong answers, and a row without its label (math_exact refuses it:
# the reward function gives None and TRL turns it into NaN, never a silent 0).
ROWS = [
    {"prompt": "What is 2+2?", "expected_answer": "4"},
    {"prompt": "What is 2+2?", "expected_answer": "4"},
    {"prompt": "What is 3+3?", "expected_answer": "6"},
    {"prompt": "What is 3+3?", "expected_answer": "6"},
    {"prompt": "What is 5+5?", "expected_answer": None},
    {"prompt": "What is 5+5?", "expected_answer": None},
]
COMPLETIONS = ["The answer is 4.", "5", "Answer: 6", "I do not know", "10", "ten"]


@pytest.fixture(scope="module")
def trl() -> Any:
    _ci.need_module("torch", INSTALL)
    _ci.need_module("transformers", INSTALL)
    _ci.need_module("datasets", INSTALL)
    return _ci.need_module("trl", INSTALL)


def tiny_model_and_tokenizer(characters: str = string.digits + string.ascii_letters + " ?+:.=", positions: int = 64) -> tuple[Any, Any]:
    """A one-layer Llama with hidden size 16 over a vocabulary of `characters`, built locally."""
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials + sorted(set(characters)))}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), behavior="isolated")  # one token per character, newlines too
    backend.decoder = decoders.Fuse()  # and back without spaces between them
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=positions, pad_token_id=0, eos_token_id=1, bos_token_id=None,
        tie_word_embeddings=True,
    )  # fmt: skip
    return LlamaForCausalLM(config), tokenizer


def make_trainer(trl: Any, tmp_path: Path, reward_funcs: list[Any]) -> Any:
    from datasets import Dataset

    model, tokenizer = tiny_model_and_tokenizer()
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", save_strategy="no", max_steps=1,
        per_device_train_batch_size=4, num_generations=2, max_completion_length=4, logging_steps=1,
        learning_rate=1e-3, beta=0.0, seed=0, dataloader_num_workers=0, bf16=False,
    )  # fmt: skip
    dataset = Dataset.from_list([r for r in ROWS[::2] if r["expected_answer"] is not None] * 2)
    return trl.GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset, processing_class=tokenizer)


def responses_object(text: str) -> dict[str, Any]:
    """The Responses API object of one assistant message (written out here, not the adaptor's)."""
    content = [{"type": "output_text", "text": text, "annotations": []}]
    message = {"type": "message", "id": "msg_test", "role": "assistant", "status": "completed", "content": content}
    return {"id": "resp_test", "object": "response", "created_at": 0, "model": "", "status": "completed",
            "output": [message], "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}  # fmt: skip


async def verified_rewards(address: str, rows: list[dict[str, Any]], completions: list[str]) -> list[float | None]:
    """math_exact's reward for each (row, completion), asked one by one (None: refused)."""
    out: list[float | None] = []
    async with ResourcesClient(address) as client:
        for row, completion in zip(rows, completions, strict=True):
            body = {
                "responses_create_params": {"input": [{"role": "user", "content": row["prompt"]}]},
                "expected_answer": row["expected_answer"],
                "response": responses_object(completion),
            }
            try:
                out.append(float((await client.verify(body))["reward"]))
            except Exception:  # the server refused the row
                out.append(None)
    return out


async def test_the_trainers_reward_step_gives_math_exacts_rewards(trl: Any, tmp_path: Path) -> None:
    async with serve_environment("math_exact") as server:
        sync_fn = reward_function(server.address)
        async_fn = reward_function(server.address, asynchronous=True, name="gym_metrics_async")
        trainer = await asyncio.to_thread(make_trainer, trl, tmp_path, [sync_fn, async_fn])
        assert trainer.reward_func_names == ["gym_metrics", "gym_metrics_async"]
        assert trainer._has_async_funcs  # TRL runs the async one on its own event loop thread
        prompts = [r["prompt"] for r in ROWS]
        completion_ids = [trainer.processing_class(c, add_special_tokens=False)["input_ids"] for c in COMPLETIONS]
        rewards = await asyncio.to_thread(trainer._calculate_rewards, ROWS, prompts, COMPLETIONS, completion_ids)
        # conversational data: TRL passes message lists, the completion as one assistant message
        chats = [[{"role": "user", "content": p}] for p in prompts]
        replies = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
        chat_rewards = await asyncio.to_thread(trainer._calculate_rewards, ROWS, chats, replies, completion_ids)
        expected = await verified_rewards(server.address, ROWS, COMPLETIONS)
    assert expected == [1.0, 0.0, 1.0, 0.0, None, None]
    for got in (rewards, chat_rewards):
        assert tuple(got.shape) == (len(ROWS), 2)
        for column in (0, 1):
            values = got[:, column].tolist()
            assert [None if math.isnan(r) else r for r in values] == expected, (trainer.reward_func_names[column], values)


async def test_one_real_grpo_training_step_logs_our_rewards(trl: Any, tmp_path: Path) -> None:
    answers = {r["prompt"]: r["expected_answer"] for r in ROWS}
    async with serve_environment("math_exact") as server:
        sync_fn = reward_function(server.address)
        async_fn = reward_function(server.address, asynchronous=True, name="gym_metrics_async")
        trainer = await asyncio.to_thread(make_trainer, trl, tmp_path, [sync_fn, async_fn])
        start = time.monotonic()
        await asyncio.to_thread(trainer.train)
        took = time.monotonic() - start
        # what the model generated in that step, as the trainer logged it, verified directly
        prompts, completions = list(trainer._logs["prompt"]), list(trainer._logs["completion"])
        rows = [{"prompt": p, "expected_answer": answers[p]} for p in prompts]
        expected = await verified_rewards(server.address, rows, completions)
    assert trainer.state.global_step == 1 and len(completions) == 4, trainer.state.log_history
    logged = next(entry for entry in trainer.state.log_history if "rewards/gym_metrics/mean" in entry)
    scored = [r for r in expected if r is not None]  # a refused completion (None) is NaN in TRL's logs
    assert scored, (completions, expected)
    for name in ("gym_metrics", "gym_metrics_async"):
        assert [None if math.isnan(r) else r for r in trainer._logs["rewards"][name]] == expected, (name, completions)
        mean = logged[f"rewards/{name}/mean"]
        assert math.isfinite(mean) and mean == pytest.approx(sum(scored) / len(scored)), logged
    assert took < 120, f"one tiny training step took {took:.0f} s"


class _Environment:
    """What TRL's `environment_factory` makes, one per completion (here: nothing to do)."""

    def reset(self, **kwargs: Any) -> None:
        return None


# A bug of the adaptor found here (it copied TRL's `environments` keyword, a list of environment
# objects, into the verify row as a dataset column): fixed in trl.py, kept as a test.
async def test_the_trainers_environments_keyword_is_not_a_dataset_column(trl: Any, tmp_path: Path) -> None:
    async with serve_environment("math_exact") as server:
        trainer = await asyncio.to_thread(make_trainer, trl, tmp_path, [reward_function(server.address)])
        trainer.environments = [_Environment() for _ in ROWS]  # as _generate_and_score_completions sets it
        prompts = [r["prompt"] for r in ROWS]
        rewards = await asyncio.to_thread(trainer._calculate_rewards, ROWS, prompts, COMPLETIONS, [[1]] * len(ROWS))
    assert [None if math.isnan(r) else r for r in rewards[:, 0].tolist()] == [1.0, 0.0, 1.0, 0.0, None, None]


async def test_multi_turn_episodes_train_through_rollout_func(trl: Any, tmp_path: Path) -> None:
    """GRPOTrainer(rollout_func=rollout_function(...)): one real step on episodes of a tool
    environment; TRL logs verify's rewards and counts only the policy's tokens (env_mask)."""
    import sys

    from datasets import Dataset

    sys.path[:0] = [str(Path(__file__).parents[1]), str(Path(__file__).parents[1] / "collector")]
    from _tool_envs import Counter
    from test_collect_episodes import script

    from gym_metrics.integrations.trl import rollout_function, rollout_reward
    from gym_metrics.testing import ScriptedPolicyServer

    model, tokenizer = tiny_model_and_tokenizer(string.printable, positions=1024)  # the chat template's characters; a whole episode
    rows = [{"prompt": f"Task {t}, rollout 0: add {t} then 1", "initial_count": 10, "expected_count": 10 + t + 1} for t in (3, 4)]
    seen: list[dict[str, Any]] = []
    async with serve_environment(Counter()) as server:
        with ScriptedPolicyServer(script, tokenizer=lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]) as policy:
            rollout = rollout_function(server.address, policy.url, "scripted")

            def recorded(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
                seen.append(out := rollout(prompts, trainer))
                return out

            args = trl.GRPOConfig(
                output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", save_strategy="no", max_steps=1,
                per_device_train_batch_size=4, num_generations=2, max_completion_length=512, logging_steps=1,
                learning_rate=1e-3, beta=0.0, seed=0, dataloader_num_workers=0, bf16=False,
            )  # fmt: skip
            trainer = await asyncio.to_thread(
                trl.GRPOTrainer, model=model, reward_funcs=[rollout_reward], args=args, train_dataset=Dataset.from_list(rows),
                processing_class=tokenizer, rollout_func=recorded,
            )  # fmt: skip
            await asyncio.to_thread(trainer.train)
    assert trainer.state.global_step == 1 and len(seen) == 1
    [out] = seen
    assert sorted(out["gm_reward"]) == [0.0, 0.0, 1.0, 1.0]  # task 4 adds one too many (the script's fifth task)
    logged = next(entry for entry in trainer.state.log_history if "rewards/gym_metrics/mean" in entry)
    assert logged["rewards/gym_metrics/mean"] == pytest.approx(0.5)
    generated = [sum(mask) for mask in out["env_mask"]]  # TRL's completion length counts env_mask=1 tokens only
    assert logged["completions/mean_length"] == pytest.approx(sum(generated) / len(generated))
    assert all(sum(mask) < len(ids) for mask, ids in zip(out["env_mask"], out["completion_ids"]))  # tool outputs in between
