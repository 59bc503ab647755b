"""verl: `compute_score` reward functions (per sample, async, batch) scored by a gym-metrics server.

Nothing to write: point verl's `custom_reward_function` at this module, the server in its
`reward_kwargs` (verl merges them into every call; verl 0.9 shown):

    reward:
      custom_reward_function:
        path: pkg://gym_metrics.integrations.verl
        name: compute_score         # compute_score_async: awaited by the reward loop;
        reward_kwargs:              # compute_score_batch: for `reward_manager: {name: batch}`
          server: "127.0.0.1:50051"

Before verl 0.7 `path` must be a file (one line: `from gym_metrics.integrations.verl import
compute_score`), and before 0.8 the section sits at the top level of the config.

Or make one with another row mapping or failure policy, in a file of your own:

    from gym_metrics.integrations import RowMapping
    from gym_metrics.integrations.verl import reward_function
    compute_score = reward_function("127.0.0.1:50051", mapping=RowMapping(answer_field="answer"))

verl gives `data_source`, the decoded `solution_str`, `ground_truth` (the dataset's
`reward_model.ground_truth`: the label, in `mapping.answer_field`) and `extra_info` (its
columns become the row, less verl's own `num_turns` and `rollout_reward_scores`; its `prompt`
or `question`, when there, the prompt; a `responses_create_params` there is kept as it is).
The batch form gets the same as plural lists and scores consecutive samples of one row (verl
repeats a prompt `rollout.n` times) as one group. `extra_fields` names verify-response fields
returned beside `score` in a dict, which verl logs. A completion that cannot be scored raises a
RewardFailure (verl has no way to leave a sample out, and a made-up 0 would be trained on);
`on_failure="nan"` or `"zero"` choose otherwise. verl's `prime` manager turns any exception
into 0.0 itself and takes only floats: use it with care. Nothing of verl is imported.

For an agent loop of your own whose episodes gym-metrics runs (NeMo Gym's `POST /run` door,
`serve --agent-http-port`, or `collect --capture-tokens`), `agent_loop_output(answer)` gives
the fields of verl's `AgentLoopOutput` from the answer's token IDs (`recording.linearize`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from difflib import get_close_matches
from functools import lru_cache
from typing import Any

import orjson

from gym_metrics.integrations._client import Scored, reward_client
from gym_metrics.integrations._mapping import OnFailure, RowMapping, check_on_failure, group_consecutive, settle, trained_sequence
from gym_metrics.errors import InvalidInputError

Score = float | dict[str, Any]
_VERL_KEYS = ("num_turns", "rollout_reward_scores")
"""Keys verl itself adds to `extra_info`: not the task's, not sent."""
_PROMPT_KEYS = ("prompt", "question")


def reward_function(
    server: str,
    *,
    mapping: RowMapping | None = None,
    on_failure: OnFailure = "raise",
    extra_fields: Sequence[str] = (),
    form: str = "sync",
    token: str | None = None,
    timeout_s: float | None = None,
) -> Callable[..., Any]:
    """A verl reward function: `form` "sync" (`compute_score(data_source, solution_str,
    ground_truth, extra_info=None, **kwargs)`), "async" (the same, awaited by verl's reward
    loop) or "batch" (`compute_score(data_sources, solution_strs, ground_truths, extra_infos,
    **kwargs)`, a list back). `timeout_s`: a scoring call's deadline (RewardClient's, 180 s)."""
    mapping = mapping or RowMapping()
    on_failure = check_on_failure(on_failure, ("raise", "nan", "zero"), "verl")
    client = reward_client(server, token=token, timeout_s=timeout_s)
    wanted = tuple(extra_fields)

    def finish(scored: Scored) -> list[Score]:
        rewards = settle(scored.rewards, scored.failed, scored.errors, on_failure)
        return [_score(r, text, wanted) for r, text in zip(rewards, scored.responses)]

    def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **_: Any) -> Score:
        (scored,) = client.score([(task_row(mapping, ground_truth, extra_info), [mapping.completion(solution_str)])], responses=bool(wanted))
        return finish(scored)[0]

    async def compute_score_async(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **_: Any) -> Score:
        group = (task_row(mapping, ground_truth, extra_info), [mapping.completion(solution_str)])
        (scored,) = await client.score_async([group], responses=bool(wanted))
        return finish(scored)[0]

    def compute_score_batch(
        data_sources: Sequence[Any], solution_strs: Sequence[str], ground_truths: Sequence[Any], extra_infos: Sequence[Any] | None = None, **_: Any
    ) -> list[Score]:
        infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
        given = {"ground_truths": len(ground_truths), "extra_infos": len(infos)}
        short = [f"{name} has {n}" for name, n in given.items() if n != len(solution_strs)]
        if short:  # zip would score fewer samples than verl sent, without a word
            raise InvalidInputError(f"compute_score_batch: {len(solution_strs)} solution_strs, but {' and '.join(short)}")
        rows = [task_row(mapping, truth, info) for truth, info in zip(ground_truths, infos)]
        groups, spans = group_consecutive(rows, [mapping.completion(s) for s in solution_strs])
        out: list[Score] = []
        for scored in client.score(groups, responses=bool(wanted)):
            out.extend(finish(scored))
        assert len(out) == sum(stop - start for start, stop in spans)
        return out

    if form == "batch":
        return compute_score_batch
    if form == "async":
        return compute_score_async
    if form != "sync":
        raise ValueError(f"form {form!r}: 'sync', 'async' or 'batch'")
    return compute_score


def task_row(mapping: RowMapping, ground_truth: Any, extra_info: Any) -> dict[str, Any]:
    """The task row of one verl sample (see the module docstring)."""
    info = {k: v for k, v in (extra_info or {}).items() if k not in _VERL_KEYS} if isinstance(extra_info, Mapping) else {}
    prompt = next((info[k] for k in _PROMPT_KEYS if info.get(k) is not None), "")
    row = mapping.row(prompt, label=ground_truth, columns=info)
    if isinstance(info.get("responses_create_params"), Mapping):
        row["responses_create_params"] = dict(info["responses_create_params"])
    return row


def _score(reward: float | None, response: str, fields: tuple[str, ...]) -> Score:
    value = float("nan") if reward is None else reward
    if not fields:
        return value
    verified = orjson.loads(response) if response else {}
    return {"score": value, **{name: verified.get(name) for name in fields}}


@lru_cache(maxsize=64)
def _configured(form: str, server: str, on_failure: OnFailure, answer_field: str, columns: tuple[str, ...] | None,
                extra_fields: tuple[str, ...], token: str | None, timeout_s: float | None) -> Callable[..., Any]:  # fmt: skip
    mapping = RowMapping(answer_field=answer_field, columns=columns)
    return reward_function(server, mapping=mapping, on_failure=on_failure, extra_fields=extra_fields, form=form, token=token, timeout_s=timeout_s)


_KWARGS = ("server", "on_failure", "answer_field", "columns", "extra_fields", "token", "timeout_s")
"""The `reward_kwargs` these functions read (verl passes others of its own with them)."""


def _from_kwargs(
    form: str,
    *,
    server: str | None = None,
    on_failure: OnFailure = "raise",
    answer_field: str = "expected_answer",
    columns: Sequence[str] | None = None,
    extra_fields: Sequence[str] = (),
    token: str | None = None,
    timeout_s: float | None = None,
    **others: Any,
) -> Callable[..., Any]:
    """The reward function `reward_kwargs` configure (verl passes them with every call; made
    once per configuration). A missing `server`, or a key that looks like a misspelt one of
    ours, is refused by name (a typo made every sample fail, or was passed over)."""
    if not server:
        raise ValueError("gym_metrics.integrations.verl needs `server: HOST:PORT` in custom_reward_function.reward_kwargs")
    for key in others:
        close = get_close_matches(key, _KWARGS, n=1, cutoff=0.8)
        if close:
            raise ValueError(f"reward_kwargs has {key!r}: did you mean {close[0]!r}? (it reads {', '.join(_KWARGS)})")
    return _configured(form, server, on_failure, answer_field, tuple(columns) if columns is not None else None, tuple(extra_fields), token, timeout_s)


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **reward_kwargs: Any) -> Score:
    """verl's per-sample reward function, configured by `reward_kwargs`: `server` (HOST:PORT),
    and optionally `on_failure`, `answer_field`, `columns` (the `extra_info` keys sent; None:
    all), `extra_fields`, `token`."""
    result: Score = _from_kwargs("sync", **reward_kwargs)(data_source, solution_str, ground_truth, extra_info)
    return result


async def compute_score_async(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **reward_kwargs: Any) -> Score:
    """`compute_score` as a coroutine function (verl's reward loop awaits it)."""
    result: Score = await _from_kwargs("async", **reward_kwargs)(data_source, solution_str, ground_truth, extra_info)
    return result


def compute_score_batch(
    data_sources: Sequence[Any], solution_strs: Sequence[str], ground_truths: Sequence[Any], extra_infos: Sequence[Any] | None = None, **reward_kwargs: Any
) -> list[Score]:
    """verl's batch reward function (`reward_manager: batch`), configured by `reward_kwargs`."""
    result: list[Score] = _from_kwargs("batch", **reward_kwargs)(data_sources, solution_strs, ground_truths, extra_infos)
    return result


def agent_loop_output(answer: Mapping[str, Any]) -> dict[str, Any]:
    """An episode gym-metrics ran, with token IDs (a `/run` answer or a collected row), as
    verl's `AgentLoopOutput` fields: `prompt_ids` (the first turn's prompt), `response_ids` and
    `response_logprobs` (the rest, generated tokens and tool outputs alike), `response_mask` (1
    on generated tokens), `reward_score` (verify's) and `num_turns` (the prompt, each model
    turn, and each turn of tool results, as verl's tool agent loop counts them). RolloutFailed
    when the episode has nothing to train on."""
    sequence = trained_sequence(answer, f"rollout {answer.get('_ng_task_index')}-{answer.get('_ng_rollout_index')}")
    cut = sequence.prompt_length
    output = (answer.get("response") or {}).get("output") or []
    kinds = [item.get("type") for item in output if isinstance(item, Mapping)]
    model_turns = sum(1 for item in output if isinstance(item, Mapping) and item.get("generation_token_ids"))
    tool_turns = sum(1 for a, b in zip(kinds, kinds[1:] + [None]) if a == "function_call_output" and b != "function_call_output")
    reward = answer.get("reward")
    return {
        "prompt_ids": sequence.token_ids[:cut], "response_ids": sequence.token_ids[cut:], "response_mask": sequence.loss_mask[cut:],
        "response_logprobs": sequence.log_probs[cut:], "reward_score": float(reward) if reward is not None else None,
        "num_turns": 1 + model_turns + tool_turns,
    }  # fmt: skip


__all__ = [
    "agent_loop_output", "compute_score", "compute_score_async", "compute_score_batch", "group_consecutive", "reward_function", "task_row"]
