"""TRL's `rollout_func` from gym-metrics (`integrations.trl.rollout_function`, issue 39 item 4):
multi-turn episodes of a real tool environment (served on loopback) against the scripted
vLLM-like policy (exact byte-level token IDs over a known chat template, known log-probs), called
as GRPOTrainer calls it: the prompts of a batch, each `num_generations` times in a row, and the
trainer (its dataset gives each prompt's task row). What comes back is checked against what the
policy itself sent, not against `linearize`; tests/integrations/test_trl_package.py runs it
inside TRL's real GRPOTrainer."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "collector"))
from test_collect_episodes import TOOLS, script  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import Counter  # noqa: E402

from gym_metrics.integrations.trl import RolloutFailed, rollout_function, rollout_reward
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment
from gym_metrics.testing._tokens import log_prob, prompt_text

pytestmark = pytest.mark.timeout(120)


def dataset(tasks: int) -> list[dict[str, Any]]:
    return [{"prompt": f"Task {t}, rollout 0: add {t} then 1", "initial_count": 10, "expected_count": 10 + t + 1} for t in range(tasks)]


def runs(mask: list[int], value: int) -> list[tuple[int, int]]:
    """[start, stop) of each run of `value` in `mask`."""
    out, start = [], None
    for i, m in enumerate([*mask, -1]):
        if m == value and start is None:
            start = i
        elif m != value and start is not None:
            out.append((start, i))
            start = None
    return out


async def test_each_prompt_becomes_its_episodes_tokens_mask_and_reward(tmp_path: Path) -> None:
    rows = dataset(5)
    prompts = [r["prompt"] for r in rows for _ in range(2)]  # num_generations=2, as TRL's sampler repeats them
    trainer = SimpleNamespace(train_dataset=rows, eval_dataset=None)
    async with serve_environment(Counter()) as server:
        with ScriptedPolicyServer(script) as policy:
            rollout = rollout_function(server.address, policy.url, "scripted")
            out = await asyncio.to_thread(rollout, prompts, trainer)
    assert sorted(out) == ["completion_ids", "env_mask", "gm_reward", "logprobs", "prompt_ids"]
    assert all(len(v) == len(prompts) for v in out.values())
    for n, prompt in enumerate(prompts):
        task = int(prompt.split()[1].rstrip(","))
        assert out["prompt_ids"][n] == list(prompt_text([{"role": "user", "content": prompt}]).encode())
        ids, mask, probs = out["completion_ids"][n], out["env_mask"][n], out["logprobs"][n]
        assert len(ids) == len(mask) == len(probs)
        generated = runs(mask, 1)
        assert len(generated) == len(script(prompt)) and mask[0] == 1  # each policy turn, the first right after the prompt
        for start, stop in generated:  # the policy's own tokens and log-probs
            assert bytes(ids[start:stop]).decode().endswith("<|end|>")
            assert probs[start:stop] == [log_prob(t, i) for i, t in enumerate(ids[start:stop])]
        assert bytes(ids[generated[-1][0] : generated[-1][1]]).decode() == "Done.<|end|>"
        between = b"".join(bytes(ids[a:b]) for a, b in runs(mask, 0)).decode()
        assert '{"success":true}' in between and all(probs[i] == 0.0 for i, m in enumerate(mask) if m == 0)
        assert out["gm_reward"][n] == (0.0 if task % 5 == 4 else 1.0)  # the script adds one too many on every fifth task
    assert rollout_reward(prompts, [None] * len(prompts), out["gm_reward"]) == out["gm_reward"]
    assert rollout_reward.__name__ == "gym_metrics"


async def test_a_prompt_outside_the_dataset_or_a_policy_without_tokens_is_an_error(tmp_path: Path) -> None:
    rows = dataset(1)
    trainer = SimpleNamespace(train_dataset=rows, eval_dataset=None)
    async with serve_environment(Counter()) as server:
        with ScriptedPolicyServer(script) as policy:
            rollout = rollout_function(server.address, policy.url, "scripted")
            with pytest.raises(ValueError, match="is not in the trainer's dataset"):
                await asyncio.to_thread(rollout, ["Task 9, rollout 0: add 9 then 1"], trainer)
        with NoTokens({rows[0]["prompt"]: [PolicyAnswer(text="Done.")]}) as bare:
            rollout = rollout_function(server.address, bare.url, "scripted")
            with pytest.raises(RolloutFailed, match="no token IDs|failed"):
                await asyncio.to_thread(rollout, [rows[0]["prompt"]], trainer)


class NoTokens(ScriptedPolicyServer):
    """An endpoint that ignores the ask for token IDs (not vLLM)."""

    def _reply(self, item: Any, request: Any) -> Any:
        request.body.pop("return_token_ids", None)
        return super()._reply(item, request)


def test_two_rows_with_one_prompt_are_refused() -> None:
    rows = [{"prompt": "same", "expected_count": 1}, {"prompt": "same", "expected_count": 2}]
    rollout = rollout_function("127.0.0.1:1", "http://127.0.0.1:1/v1", "m")
    with pytest.raises(ValueError, match="two dataset rows share the prompt"):
        rollout(["same"], SimpleNamespace(train_dataset=rows, eval_dataset=None))


assert TOOLS  # the rows' tools come from the server (collect adds them when a request names none)



async def test_run_sync_works_where_a_loop_is_running_already() -> None:
    """rollout_function runs its episodes with run_sync: from a notebook, the trainer's thread
    already runs a loop, where asyncio.run refuses."""
    import threading

    from gym_metrics._util.run_sync import run_sync

    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    here = threading.current_thread().name
    assert run_sync(where()).startswith("gym-metrics run_sync")  # this test's loop is running: another thread
    elsewhere = await asyncio.to_thread(lambda: (threading.current_thread().name, run_sync(where())))
    assert elsewhere[0] == elsewhere[1] != here  # no loop in that thread: asyncio.run right there
