"""OpenRLHF: the remote reward model (`--remote_rm_url http://HOST:P/get_reward`), answered by
`serve --http-port` on the environment the gRPC server serves.

OpenRLHF posts `{"query": [...], "prompts": [...], "labels": [...]}`: each query is the prompt
and its completion as one text, decoded with the special tokens kept. Each query after its
prompt (where the prompt first occurs: a BOS token may lead the query) is the completion, less
the end-of-sequence and padding tokens that close it (END_MARKERS: `<|im_end|>`, `</s>`,
`<|eot_id|>`, ...), which no answer holds and which would make a right answer unreadable; a
query that is not text, has no prompt beside it, or does not hold its prompt fails, named,
never scored whole. The label fills
`label_field` (`serve --http-label-field`, default `expected_answer`); the prompt becomes the
user message of `responses_create_params`. Consecutive queries of one prompt and label are
scored as one group. The answer is `{"rewards": [...], "scores": [...], "extra_logs":
{"gm_failed": [...]}, "gm_errors": [...]}`: a query that cannot be scored has reward 0 with
`gm_failed` 1 beside it, which OpenRLHF averages into its logged metrics (`on_failure="error"`:
never an unmarked 0), and its reason in `gm_errors`. Nothing of OpenRLHF is imported.
"""

from __future__ import annotations

import re
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
    groups, spans, refusals = openrlhf_groups(queries, prompts, labels, label_field)
    rewards: list[float] = [0.0] * len(queries)
    failed: list[float] = [0.0] * len(queries)
    errors: list[str | None] = [None] * len(queries)

    for (start, stop), group in zip(spans, await score(groups)):
        def mark(i: int, error: str, start: int = start) -> bool:
            failed[start + i], errors[start + i] = 1.0, error
            return True

        refused = [refusals.get(i) for i in range(start, stop)]
        settled = settle(group.rewards, [f or r is not None for f, r in zip(group.failed, refused)],
                         [r or e for r, e in zip(refused, group.error_message)], "error", mark)  # fmt: skip
        rewards[start:stop] = [r or 0.0 for r in settled]
    # extra_logs are numbers OpenRLHF averages into its metrics; the reasons go beside them
    return {"rewards": rewards, "scores": rewards, "extra_logs": {"gm_failed": failed}, "gm_errors": errors}


def openrlhf_groups(queries: Sequence[Any], prompts: Sequence[Any], labels: Sequence[Any], label_field: str) -> tuple[list[Group], list[Span], dict[int, str]]:
    """OpenRLHF's lists as groups: consecutive queries of one prompt and label, each completion
    its query's (module docstring); and the queries refused, by index, with why (each sent as
    an empty completion, its result replaced by the refusal)."""
    spans = consecutive_runs(len(queries), lambda a, b: prompts[a] == prompts[b] and labels[a] == labels[b])
    groups: list[Group] = []
    refused: dict[int, str] = {}
    for start, stop in spans:
        prompt = "" if prompts[start] is None else str(prompts[start])
        row: dict[str, Any] = {"responses_create_params": {"input": [{"role": "user", "content": prompt}]}}
        if labels[start] is not None:
            row[label_field] = labels[start]
        completions = []
        for i in range(start, stop):
            completion, why = _completion(queries[i], prompt)
            if why is not None:
                refused[i] = why
            completions.append(completion)
        groups.append(Group(row, completions))
    return groups, spans, refused


END_MARKERS = ("<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>", "<|end_of_text|>", "<|end|>", "<|return|>",
               "<end_of_turn>", "<eos>", "<|eos|>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "<|pad|>", "<pad>", "[PAD]")  # fmt: skip
"""End-of-sequence and padding tokens of common chat templates (Qwen, Llama 2/3, Phi, gpt-oss,
Gemma, DeepSeek, ...), as a query decoded with its special tokens ends."""
_END = re.compile("(?:" + "|".join(re.escape(m) for m in END_MARKERS) + r"|\s)+\Z")


def _completion(query: Any, prompt: str) -> tuple[str, str | None]:
    """A query's completion, or ("", why it has none)."""
    if not isinstance(query, str):
        return "", f"the query is {type(query).__name__}, not text"
    if not prompt:
        return "", "no prompt beside the query (`prompts` missing, null or empty): the completion cannot be told apart"
    at = query.find(prompt)
    if at < 0:
        return "", "the query does not hold its prompt (the `prompts` entry beside it): the completion cannot be told apart"
    return _END.sub("", query[at + len(prompt) :]), None


def _lists(body: Mapping[str, Any], names: Sequence[str]) -> list[list[Any]]:
    """The body's lists, each as long as the first (a missing later one: None each)."""
    out = []
    if not isinstance(body.get(names[0]), list):
        raise InvalidInputError(f"`{names[0]}` must be a list (got {type(body.get(names[0])).__name__})")
    n = len(body[names[0]])
    for name in names:
        value = body.get(name)
        if value is None and name != names[0]:
            value = [None] * n
        if not isinstance(value, list) or len(value) != n:
            raise InvalidInputError(f"`{name}` must be a list as long as `{names[0]}` ({n})")
        out.append(value)
    return out


__all__ = ["get_reward", "openrlhf_groups"]
