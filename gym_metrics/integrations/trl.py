"""TRL: a reward function for `GRPOTrainer(reward_funcs=[...])` scored by a gym-metrics server.

    from gym_metrics.integrations.trl import reward_function
    trainer = GRPOTrainer(model=..., reward_funcs=[reward_function(server="127.0.0.1:50051")], ...)

TRL calls it with `prompts`, `completions` (texts, or message lists for conversational data),
`completion_ids`, `trainer_state` and every dataset column as a keyword list. The completions of
one prompt (TRL repeats each prompt `num_generations` times in a row) are scored as one group;
the dataset columns fill the verify request (docs/training.md#the-mapping). A completion that
cannot be scored gives None (TRL leaves it out), unless `on_failure` says otherwise. Nothing of
TRL is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gym_metrics.integrations._client import RewardClient, reward_client
from gym_metrics._util.failure_log import FailureLog
from gym_metrics.integrations._mapping import OnFailure, RowMapping, Span, check_on_failure, consecutive_runs, plain_value, settle

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
) -> Callable[..., Any]:
    """The callable `GRPOTrainer(reward_funcs=[...])` takes (`asynchronous=True`: an async
    one, which TRL runs concurrently with its other async reward functions). `record`: also
    append every scored completion to this rollouts file (agents `step_<n>`), for
    `gym-metrics aggregate`."""
    mapping = mapping or RowMapping()
    on_failure = check_on_failure(on_failure, ("none", "nan", "zero", "raise"), "TRL")
    client = RewardClient(server, token=token, record=record) if record is not None else reward_client(server, token=token)

    failures = FailureLog(f"reward function {name}")

    def prepare(prompts: Sequence[Any], completions: Sequence[Any], columns: Mapping[str, Any]) -> tuple[list[Any], Any]:
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


__all__ = ["RowMapping", "group_by_prompt", "reward_function"]
