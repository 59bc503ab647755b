"""How a trainer's sample becomes an environment's verify request: the documented, overridable
mapping every adaptor uses.

A sample is a prompt, a completion and the dataset's columns. By default:
- the prompt becomes `responses_create_params` (a text: one user message; a conversation: its
  messages as the Responses `input`);
- the label (`ground_truth`, `labels`, `answer`, or the column `label_column`) goes into
  `answer_field` (default `expected_answer`, math_exact's and NeMo Gym's name);
- every other dataset column is copied as it is (choose them with `columns`);
- the completion is sent as its text (a conversation: its last assistant message), which the
  server makes the assistant message of a Responses object; a Responses object (a dict with
  `output`) is sent as it is.
Subclass it (or pass functions) to map otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Any, Literal, cast

from gym_metrics.recording import TokenLineageError, TrainingSequence, linearize

LABEL_COLUMNS = ("ground_truth", "labels", "answer")
"""The columns a label is found under when none is named (`label_column`) and the dataset has no
`answer_field` column, in this order."""

OnFailure = Literal["none", "nan", "zero", "raise", "error"]
"""What a completion that could not be scored gives the trainer: None (TRL skips it), NaN,
0.0, a RewardFailure raised, or `error`: 0.0 with the failure marked where the trainer reads
it (verifiers' `state["error"]`, OpenRLHF's `gm_failed` log). Each adaptor takes the ones its
trainer can act on (`check_on_failure`)."""


@dataclass
class RowMapping:
    """See the module docstring."""

    answer_field: str = "expected_answer"
    """The verify request field the label fills."""
    label_column: str | None = None
    """The dataset column holding the label, for trainers that pass columns by name (TRL);
    None: `answer_field` itself."""
    columns: Sequence[str] | None = None
    """Dataset columns copied into the row (None: all of them)."""
    prompt_to_request: Callable[[Any], dict[str, Any]] | None = None
    """Replaces the prompt mapping (a prompt in, `responses_create_params` out)."""
    completion_to_response: Callable[[Any], Any] | None = None
    """Replaces the completion mapping (a completion in, a text or a Responses object out)."""

    def request(self, prompt: Any) -> dict[str, Any]:
        """`responses_create_params` of a prompt."""
        if self.prompt_to_request is not None:
            return self.prompt_to_request(prompt)
        if isinstance(prompt, str):
            return {"input": [{"role": "user", "content": prompt}]}
        if isinstance(prompt, Sequence) and all(isinstance(m, Mapping) for m in prompt):
            return {"input": [dict(m) for m in prompt]}
        return {"input": [{"role": "user", "content": str(prompt)}]}

    def completion(self, completion: Any) -> Any:
        """What the server is sent for a completion: its text, or a Responses object."""
        if self.completion_to_response is not None:
            return self.completion_to_response(completion)
        if isinstance(completion, str) or (isinstance(completion, Mapping) and "output" in completion):
            return completion
        if isinstance(completion, Sequence):  # a conversation: the last assistant message's text
            for message in reversed(completion):
                if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant":
                    return _text(message.get("content"))
            return ""
        return str(completion)

    def row(self, prompt: Any, label: Any = None, columns: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The task row (the verify request but its `response`)."""
        row: dict[str, Any] = {}
        for name, value in (columns or {}).items():
            if self.columns is None or name in self.columns:
                row[name] = plain_value(value)
        if label is None and columns is not None and self.label_column is not None:
            label = columns.get(self.label_column)
        elif label is None and columns and self.answer_field not in row:  # the label under a conventional name (TRL passes columns only)
            label = next((columns[name] for name in LABEL_COLUMNS if columns.get(name) is not None), None)
        if label is not None:
            row[self.answer_field] = plain_value(label)
        row["responses_create_params"] = self.request(prompt)
        return row


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def plain_value(value: Any) -> Any:
    """A dataset value as JSON can carry it (numpy scalars and arrays, tensors' items, also
    inside lists and dicts), so values compare with == and serialise."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, dict):
        return {k: plain_value(v) for k, v in value.items()}
    return value


def check_on_failure(value: Any, allowed: Sequence[str], trainer: str) -> OnFailure:
    """`value` if `trainer`'s adaptor takes it, else a ValueError naming the ones it does."""
    if value not in allowed:
        raise ValueError(f"on_failure {value!r}: {trainer} takes {', '.join(repr(a) for a in allowed)}")
    return cast(OnFailure, value)


Mark = Callable[[int, str], bool]
"""`mark(i, error)` records completion i's failure where the trainer reads it (for `error`);
False when it cannot (then the failure is raised)."""


def settle(
    rewards: Sequence[float], failed: Sequence[bool], errors: Sequence[str | None], on_failure: OnFailure, mark: Mark | None = None
) -> list[float | None]:
    """The rewards a trainer gets, a failure turned into what `on_failure` says: the one
    failure policy of every adaptor."""
    from gym_metrics.integrations._client import RewardFailure

    out: list[float | None] = []
    for i, (reward, bad, error) in enumerate(zip(rewards, failed, errors)):
        if not bad:
            out.append(float(reward))
        elif on_failure == "raise" or (on_failure == "error" and (mark is None or not mark(i, error or ""))):
            raise RewardFailure(f"a completion could not be scored: {error}")
        else:
            out.append({"none": None, "nan": math.nan, "zero": 0.0, "error": 0.0}[on_failure])
    return out


def check_lengths(where: str, **lists: Sized | None) -> None:
    """A ValueError naming them unless every list given (None: not given) is as long as the
    first: a trainer's per-sample lists zipped or sliced together scored the fewer, answering
    fewer rewards than samples or shifting them, without a word."""
    given = [(name, len(value)) for name, value in lists.items() if value is not None]
    wrong = [f"{n} {name}" for name, n in given[1:] if n != given[0][1]]
    if wrong:
        raise ValueError(f"{where} got {given[0][1]} {given[0][0]} but {' and '.join(wrong)}: one each, in order")


Span = tuple[int, int]


def consecutive_runs(n: int, same: Callable[[int, int], bool]) -> list[Span]:
    """The [start, stop) of each run of consecutive samples that `same(start, i)` says are one
    prompt's (trainers repeat a prompt once per completion, in a row): every adaptor's groups."""
    spans: list[Span] = []
    start = 0
    for i in range(1, n + 1):
        if i < n and same(start, i):
            continue
        spans.append((start, i))
        start = i
    return spans


def group_consecutive(rows: Sequence[dict[str, Any]], completions: Sequence[Any]) -> tuple[list[tuple[dict[str, Any], list[Any]]], list[Span]]:
    """Consecutive samples of one row as one group; the groups and the [start, stop) of each."""
    spans = consecutive_runs(len(rows), lambda a, b: rows[a] == rows[b])
    return [(rows[start], list(completions[start:stop])) for start, stop in spans], spans


class RolloutFailed(RuntimeError):
    """An episode that gave nothing to train on (its generation failed, the policy sent no token
    IDs, its turns do not lay end to end); the message names the episode and why. Raised rather
    than trained on as an empty or wrongly stitched sample."""


def trained_sequence(row: Mapping[str, Any], where: str) -> TrainingSequence:
    """The episode's `recording.TrainingSequence`, or RolloutFailed naming `where`."""
    if "_gm_error" in row:
        raise RolloutFailed(f"{where} failed: {(row['_gm_error'] or {}).get('message')}")
    try:
        sequence = linearize(row)
    except TokenLineageError as exc:
        raise RolloutFailed(f"{where} cannot be laid end to end: {exc}") from None
    if not sequence.prompt_length:
        raise RolloutFailed(f"{where} has no token IDs (does the policy return them, as vLLM does with return_token_ids?)")
    return sequence
