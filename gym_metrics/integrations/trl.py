"""TRL: a reward function for `GRPOTrainer(reward_funcs=[...])` scored by a gym-metrics server.

    from gym_metrics.integrations.trl import reward_function
    trainer = GRPOTrainer(model=..., reward_funcs=[reward_function(server="127.0.0.1:50051")], ...)

For multi-turn training, `rollout_function(...)` is GRPOTrainer's `rollout_func`: gym-metrics runs
each episode (the policy, a vLLM server that returns token IDs, calling the environment's tools)
and hands TRL the token IDs, log-probs and a mask of the tokens the policy generated, with the
reward verify gave (read by `rollout_reward`).

TRL calls it with `prompts`, `completions` (texts, or message lists for conversational data),
`completion_ids`, `trainer_state` and every dataset column as a keyword list. The completions of
one prompt (TRL repeats each prompt `num_generations` times in a row) are scored as one group;
the dataset columns fill the verify request (docs/training.md#the-mapping). A completion that
cannot be scored gives None (TRL leaves it out), unless `on_failure` says otherwise. Nothing of
TRL is imported.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gym_metrics.integrations._client import RewardClient, reward_client
from gym_metrics._util.failure_log import FailureLog
from gym_metrics._util.run_sync import run_sync
from gym_metrics.integrations._mapping import (
    OnFailure,
    RolloutFailed,
    RowMapping,
    Span,
    check_lengths,
    check_on_failure,
    consecutive_runs,
    plain_value,
    settle,
    trained_sequence,
)

_TRL_ARGUMENTS = ("prompts", "completions", "completion_ids", "trainer_state", "environments", "log_extra", "log_metric")
"""What GRPOTrainer passes beside the dataset columns (`environments`: its environment objects,
one per completion, when it has an environment_factory)."""
_JSON = (str, int, float, bool, type(None), list, dict)


def reward_function(
    server: str,
    *,
    mapping: RowMapping | None = None,
    on_failure: OnFailure = "none",
    name: str = "gym_metrics",
    asynchronous: bool = False,
    token: str | None = None,
    record: str | Path | None = None,
    timeout_s: float | None = None,
) -> Callable[..., Any]:
    """The callable `GRPOTrainer(reward_funcs=[...])` takes (`asynchronous=True`: an async
    one, which TRL runs concurrently with its other async reward functions). `record`: also
    append every scored completion to this rollouts file (agents `step_<n>`), for
    `gym-metrics aggregate`. `timeout_s`: a scoring call's deadline (RewardClient's, 180 s)."""
    mapping = mapping or RowMapping()
    on_failure = check_on_failure(on_failure, ("none", "nan", "zero", "raise"), "TRL")
    client = reward_client(server, token=token, timeout_s=timeout_s) if record is None else RewardClient(server, token=token, record=record)
    if record is not None and timeout_s is not None:
        client.timeout_s = float(timeout_s)

    failures = FailureLog(f"reward function {name}")

    def prepare(prompts: Sequence[Any], completions: Sequence[Any], columns: Mapping[str, Any]) -> tuple[list[Any], Any]:
        check_lengths(f"reward function {name}", prompts=prompts, completions=completions)
        if mapping.label_column is not None and mapping.label_column not in columns:
            given = sorted(k for k in columns if k not in _TRL_ARGUMENTS)
            raise ValueError(f"label_column {mapping.label_column!r} is not a column of the dataset (its columns: {', '.join(given) or 'none'})")
        groups, spans = group_by_prompt(prompts, completions, columns, mapping)
        step = getattr(columns.get("trainer_state"), "global_step", None)
        return [groups, spans], step

    def finish(spans: list[tuple[int, int]], scored: Any, n: int) -> list[float | None]:
        out: list[float | None] = [None] * n
        for (start, stop), group in zip(spans, scored):
            out[start:stop] = settle(group.rewards, group.failed, group.errors, on_failure)
        failed = [error for group in scored for bad, error in zip(group.failed, group.errors) if bad]
        failures.note(len(failed), n, failed[0] if failed else "")
        return out

    def score(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float | None]:
        (groups, spans), step = prepare(prompts, completions, columns)
        return finish(spans, client.score(groups, step=step), len(completions))

    async def score_async(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float | None]:
        (groups, spans), step = prepare(prompts, completions, columns)
        return finish(spans, await client.score_async(groups, step=step), len(completions))

    chosen = score_async if asynchronous else score
    chosen.__name__ = chosen.__qualname__ = name  # TRL logs each reward function by its name
    return chosen


def group_by_prompt(
    prompts: Sequence[Any], completions: Sequence[Any], columns: Mapping[str, Any], mapping: RowMapping
) -> tuple[list[tuple[dict[str, Any], list[Any]]], list[Span]]:
    """Consecutive samples of one prompt (and the same dataset values) as one group; the
    groups and the [start, stop) of each."""
    listed = {  # as plain values: an array-valued column's cells compare with == as lists
        k: [plain_value(x) for x in v] for k, v in columns.items()
        if k not in _TRL_ARGUMENTS and isinstance(v, Sequence) and not isinstance(v, str) and len(v) == len(prompts)
        and all(isinstance(x, _JSON) or hasattr(x, "tolist") for x in v)  # a dataset column, not objects
    }  # fmt: skip
    spans = consecutive_runs(len(prompts), lambda a, b: prompts[a] == prompts[b] and all(v[a] == v[b] for v in listed.values()))
    groups = [
        (mapping.row(prompts[start], columns={k: v[start] for k, v in listed.items()}), [mapping.completion(c) for c in completions[start:stop]])
        for start, stop in spans
    ]
    return groups, spans


def rollout_function(
    server: str,
    policy_url: str,
    policy_model: str,
    *,
    mapping: RowMapping | None = None,
    max_steps: int | None = None,
    policy_key_env: str | None = None,
    concurrency: int = 16,
) -> Callable[[list[Any], Any], dict[str, list[Any]]]:
    """GRPOTrainer's `rollout_func`: per prompt TRL gives (each `num_generations` times in a
    row), one episode of the environment served at `server`, its turns laid end to end
    (`recording.linearize`). Returns TRL's `prompt_ids` (the first turn's prompt), `completion_ids`,
    `logprobs` and `env_mask` (1 on the policy's tokens, 0 on tool outputs and later prompts),
    and `gm_reward`, verify's reward, which TRL passes to `rollout_reward`. The task row of a
    prompt is its row of the trainer's dataset (the `prompt` column; its other columns fill the
    row as `mapping` says). The policy must return token IDs as vLLM does (`return_token_ids`)."""
    mapping = mapping or RowMapping()
    by_prompt: dict[str, dict[str, Any]] = {}

    def row_of(prompt: Any, trainer: Any) -> dict[str, Any]:
        if not by_prompt:
            for dataset in (getattr(trainer, "train_dataset", None), getattr(trainer, "eval_dataset", None)):
                for example in dataset if dataset is not None and not isinstance(dataset, Mapping) else ():
                    key = _prompt_key(example["prompt"])
                    if by_prompt.setdefault(key, dict(example)) != dict(example):
                        raise ValueError(f"two dataset rows share the prompt {str(example['prompt'])[:80]!r}: a rollout cannot tell their task rows apart")
        example = by_prompt.get(_prompt_key(prompt))
        if example is None:
            raise ValueError(f"prompt {str(prompt)[:80]!r} is not in the trainer's dataset: its task row is unknown")
        return mapping.row(prompt, columns={k: v for k, v in example.items() if k != "prompt"})

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        rows = []
        for task, (start, stop) in enumerate(consecutive_runs(len(prompts), lambda a, b: prompts[a] == prompts[b])):
            row = row_of(prompts[start], trainer)
            rows += [{**row, "agent_ref": {"name": "trl"}, "_ng_task_index": task, "_ng_rollout_index": r} for r in range(stop - start)]
        done = run_sync(_episodes(server, rows, policy_url, policy_model, policy_key_env, max_steps, concurrency))
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "gm_reward": []}
        for row, prompt in zip(done, prompts):
            sequence = trained_sequence(row, f"the episode of prompt {str(prompt)[:80]!r}")
            cut = sequence.prompt_length
            out["prompt_ids"].append(sequence.token_ids[:cut])
            out["completion_ids"].append(sequence.token_ids[cut:])
            out["logprobs"].append(sequence.log_probs[cut:])
            out["env_mask"].append(sequence.loss_mask[cut:])
            out["gm_reward"].append(float(row["reward"]))
        return out

    return rollout


def rollout_reward(prompts: Sequence[Any], completions: Sequence[Any], gm_reward: Sequence[float], **_: Any) -> list[float]:
    """The reward function beside `rollout_function`: verify's reward of each episode."""
    return [float(r) for r in gm_reward]


rollout_reward.__name__ = rollout_reward.__qualname__ = "gym_metrics"


def _prompt_key(prompt: Any) -> str:
    return json.dumps(plain_value(prompt), sort_keys=True, default=str)


async def _episodes(server: str, rows: list[dict[str, Any]], url: str, model: str, key_env: str | None, max_steps: int | None, concurrency: int) -> list[dict[str, Any]]:
    """The rows' episodes through collect (retries, capture, sessions), in the rows' order."""
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics.collector import CollectOptions, collect_async
    from gym_metrics.targets import ModelTargetConfig

    target = ModelTargetConfig(url=url, model=model, api="chat", api_key_env=key_env, max_concurrency=concurrency)
    with tempfile.TemporaryDirectory(prefix="gym-metrics-trl-") as tmp:
        given, written = Path(tmp) / "rows.jsonl", Path(tmp) / "rollouts.jsonl"
        given.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        async with ResourcesClient(server) as client:
            await collect_async(client, given, written, CollectOptions(target=target, capture_tokens=True, max_steps=max_steps))
        by_key = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in map(json.loads, written.read_text(encoding="utf-8").splitlines())}
    return [by_key[(r["_ng_task_index"], r["_ng_rollout_index"])] for r in rows]


__all__ = ["RolloutFailed", "RowMapping", "group_by_prompt", "reward_function", "rollout_function", "rollout_reward"]
