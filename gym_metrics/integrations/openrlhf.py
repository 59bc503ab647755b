"""OpenRLHF: the remote reward model (`--remote_rm_url http://HOST:P/get_reward`), answered by
`serve --http-port` on the environment the gRPC server serves.

OpenRLHF posts `{"query": [...], "prompts": [...], "labels": [...]}`: each query is the prompt
and its completion as one text. Each query minus its prompt is the completion; the label fills
`label_field` (`serve --http-label-field`, default `expected_answer`); the prompt becomes the
user message of `responses_create_params`. Consecutive queries of one prompt and label are
scored as one group. The answer is `{"rewards": [...], "scores": [...], "extra_logs":
{"gm_failed": [...]}, "gm_errors": [...]}`: a query that cannot be scored has reward 0 with
`gm_failed` 1 beside it, which OpenRLHF averages into its logged metrics (`on_failure="error"`:
never an unmarked 0), and its reason in `gm_errors`. Nothing of OpenRLHF is imported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from gym_metrics.environments import Group, GroupScores
from gym_metrics.errors import InvalidInputError
from gym_metrics.integrations._mapping import Span, consecutive_runs, settle

Score = Callable[[list[Group]], Awaitable[list[GroupScores]]]
"""Scores groups in order (the server's own `score_groups` over its environment)."""


async def get_reward(body: Mapping[str, Any], score: Score, *, label_field: str = "expected_answer") -> dict[str, Any]:
    """The answer to one `POST /get_reward` body (see the module docstring); an
    InvalidInputError names the field that is wrong."""
    queries, prompts, labels = _lists(body, ("query", "prompts", "labels"))
    groups, spans = openrlhf_groups(queries, prompts, labels, label_field)
    rewards: list[float] = [0.0] * len(queries)
    failed: list[float] = [0.0] * len(queries)
    errors: list[str | None] = [None] * len(queries)

    for (start, stop), group in zip(spans, await score(groups)):
        def mark(i: int, error: str, start: int = start) -> bool:
            failed[start + i], errors[start + i] = 1.0, error
            return True

        settled = settle(group.rewards, group.failed, group.error_message, "error", mark)
        rewards[start:stop] = [r or 0.0 for r in settled]
    # extra_logs are numbers OpenRLHF averages into its metrics; the reasons go beside them
    return {"rewards": rewards, "scores": rewards, "extra_logs": {"gm_failed": failed}, "gm_errors": errors}


def openrlhf_groups(queries: Sequence[Any], prompts: Sequence[Any], labels: Sequence[Any], label_field: str) -> tuple[list[Group], list[Span]]:
    """OpenRLHF's lists as groups: consecutive queries of one prompt and label; each
    completion is its query minus the prompt."""
    spans = consecutive_runs(len(queries), lambda a, b: prompts[a] == prompts[b] and labels[a] == labels[b])
    groups = []
    for start, stop in spans:
        prompt = str(prompts[start])
        row: dict[str, Any] = {"responses_create_params": {"input": [{"role": "user", "content": prompt}]}}
        if labels[start] is not None:
            row[label_field] = labels[start]
        completions = [q[len(prompt) :] if isinstance(q, str) and q.startswith(prompt) else str(q) for q in queries[start:stop]]
        groups.append(Group(row, completions))
    return groups, spans


def _lists(body: Mapping[str, Any], names: Sequence[str]) -> list[list[Any]]:
    """The body's lists, each as long as the first (a missing later one: None each)."""
    out = []
    n = len(body.get(names[0]) or [])
    for name in names:
        value = body.get(name)
        if value is None and name != names[0]:
            value = [None] * n
        if not isinstance(value, list) or len(value) != n:
            raise InvalidInputError(f"`{name}` must be a list as long as `{names[0]}` ({n})")
        out.append(value)
    return out


__all__ = ["get_reward", "openrlhf_groups"]
