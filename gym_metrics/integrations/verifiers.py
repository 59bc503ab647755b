"""verifiers (prime-rl): reward functions for `vf.Rubric(funcs=[...])`, and a rubric, scored by a gym-metrics server.

    import verifiers as vf
    from gym_metrics.integrations.verifiers import reward_function, rubric

    env = vf.SingleTurnEnv(dataset=..., rubric=rubric("127.0.0.1:50051"))
    # or beside your own functions:
    env = vf.SingleTurnEnv(dataset=..., rubric=vf.Rubric(funcs=[reward_function("127.0.0.1:50051"), fmt], weights=[1.0, 0.2]))

verifiers calls a reward function with the arguments its signature names. The per-rollout
function takes `prompt`, `completion`, `answer`, `info` and `state` (its concurrent calls of a
`score_group` go out as one batched call); `group=True` gives the group-level one (`prompts`,
`completions`, `answers`, `infos`, `states`: one group per call, a list back), which
verifiers' `score_rollout` refuses. The prompt is the row's prompt, `answer` its label (in
`mapping.answer_field`), `info` its columns, the completion's last assistant message the answer.

verifiers turns an exception of a reward function into a logged 0.0, so by default
(`on_failure="error"`) a completion that cannot be scored gets 0.0 and its rollout is marked
failed with a `vf.InfraError` in `state["error"]` (saved with the rollout, retried where the
environment retries; what your trainer does with errored rollouts applies). `"nan"` and
`"raise"` choose otherwise. Nothing of verifiers is imported at load (only `rubric()` and a
failure import it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gym_metrics.integrations._client import Scored, reward_client
from gym_metrics.integrations._mapping import OnFailure, RowMapping, check_lengths, check_on_failure, group_consecutive, settle

_ON_FAILURE = ("error", "nan", "raise")
"""A completion that cannot be scored: 0.0 and `state["error"]` set (verifiers' errored
rollout), NaN, or a RewardFailure raised (which verifiers logs and counts as 0.0)."""


def reward_function(
    server: str,
    *,
    mapping: RowMapping | None = None,
    on_failure: OnFailure = "error",
    group: bool = False,
    name: str = "gym_metrics",
    token: str | None = None,
    timeout_s: float | None = None,
) -> Callable[..., Any]:
    """An async reward function for `vf.Rubric(funcs=[...])` (see the module docstring),
    named `name` (verifiers reports each function's score under its name); `timeout_s`: a
    scoring call's deadline (RewardClient's, 180 s)."""
    mapping = mapping or RowMapping()
    on_failure = check_on_failure(on_failure, _ON_FAILURE, "verifiers")
    client = reward_client(server, token=token, timeout_s=timeout_s)

    def one(prompt: Any, completion: Any, answer: Any, info: Any) -> tuple[dict[str, Any], Any]:
        label = None if answer is None or answer == "" else answer
        row = mapping.row(_plain_messages(prompt), label=label, columns=info if isinstance(info, Mapping) else None)
        return row, mapping.completion(_plain_messages(completion))

    async def score(
        prompt: Any = None, completion: Any = None, answer: Any = None, info: Any = None, state: Any = None
    ) -> float:
        row, text = one(prompt, completion, answer, info)
        (scored,) = await client.score_async([(row, [text])])
        return _settle(scored, [state], on_failure)[0]

    async def score_group(
        prompts: Sequence[Any], completions: Sequence[Any], answers: Sequence[Any] | None = None,
        infos: Sequence[Any] | None = None, states: Sequence[Any] | None = None,
    ) -> list[float]:  # fmt: skip
        check_lengths(f"reward function {name}", completions=completions, prompts=prompts, answers=answers or None, infos=infos or None, states=states)
        n = len(completions)
        samples = [one(p, c, a, i) for p, c, a, i in zip(prompts, completions, answers or [None] * n, infos or [None] * n)]
        groups, _ = group_consecutive([row for row, _ in samples], [text for _, text in samples])  # one prompt's rollouts
        out: list[float] = []
        state_list = list(states) if states is not None else [None] * n
        for scored in await client.score_async(groups):
            out.extend(_settle(scored, state_list[len(out) : len(out) + len(scored.rewards)], on_failure))
        return out

    chosen = score_group if group else score
    chosen.__name__ = chosen.__qualname__ = name
    return chosen


def rubric(
    server: str,
    *,
    mapping: RowMapping | None = None,
    on_failure: OnFailure = "error",
    group: bool = False,
    weight: float = 1.0,
    name: str = "gym_metrics",
    token: str | None = None,
    **rubric_options: Any,
) -> Any:
    """A `vf.Rubric` of the gym-metrics reward function alone (weight `weight`);
    `rubric_options` go to `vf.Rubric` (a `parser`, ...)."""
    vf = importlib.import_module("verifiers")
    fn = reward_function(server, mapping=mapping, on_failure=on_failure, group=group, name=name, token=token)
    return vf.Rubric(funcs=[fn], weights=[weight], **rubric_options)


def _settle(scored: Scored, states: Sequence[Any], on_failure: OnFailure) -> list[float]:
    def mark(i: int, error: str) -> bool:  # verifiers' errored rollout; no state to mark: raise
        if not hasattr(states[i], "__setitem__"):
            return False
        vf = importlib.import_module("verifiers")
        states[i]["error"] = vf.InfraError(f"gym-metrics could not score the completion: {error}")
        return True

    return [float("nan") if r is None else r for r in settle(scored.rewards, scored.failed, scored.errors, on_failure, mark)]


def _plain_messages(value: Any) -> Any:
    """verifiers' messages (pydantic models in recent releases) as plain dicts."""
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, Sequence):
        return [m.model_dump(exclude_none=True) if hasattr(m, "model_dump") else m for m in value]
    return value


__all__ = ["OnFailure", "reward_function", "rubric"]
