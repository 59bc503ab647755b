"""One answered VerifyStream batch, column-wise.

A batch's results are read off the wire in one pass into plain lists: a caller that writes
rows (the collector) parses each response once and makes no object per rollout, and one that
wants objects asks for `outcomes()`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gym_metrics._transport._batches import dumps_json
from gym_metrics.v1 import resources_pb2 as pb

ERROR_KINDS: dict[int, str | None] = {
    pb.VERIFY_ERROR_KIND_UNSPECIFIED: None,
    pb.VERIFY_ERROR_KIND_INVALID_REQUEST: "invalid_request",
    pb.VERIFY_ERROR_KIND_VERIFY_FAILED: "verify_failed",
    pb.VERIFY_ERROR_KIND_TIMEOUT: "timeout",
    pb.VERIFY_ERROR_KIND_GENERATION: "generation",
}


@dataclass(frozen=True)
class VerifyOutcome:
    """One VerifyStream result; `response` is None when `error_kind` is set."""

    task_index: int
    rollout_index: int
    reward: float
    response: dict[str, Any] | None
    error_kind: str | None = None
    error_message: str = ""


@dataclass
class VerifiedBatch:
    """The results of one batch, position i for the batch's item i. `response_json` is the
    verify response as JSON text ("" for a failed rollout, whose `error_kind` is set)."""

    task_index: list[int] = field(default_factory=list)
    rollout_index: list[int] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    response_json: list[str] = field(default_factory=list)
    error_kind: list[str | None] = field(default_factory=list)
    error_message: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.reward)

    @classmethod
    def from_results(cls, results: Iterable[pb.VerifyResult]) -> VerifiedBatch:
        """Read in one pass (a repeated field's element is a new Python object per access)."""
        out = cls()
        tasks, rollouts, rewards, texts = out.task_index, out.rollout_index, out.reward, out.response_json
        kinds, messages, get = out.error_kind, out.error_message, ERROR_KINDS.get
        for r in results:
            tasks.append(r.task_index)
            rollouts.append(r.rollout_index)
            rewards.append(r.reward)
            texts.append(r.response_json)
            kinds.append(get(r.error_kind, "unknown"))
            messages.append(r.error_message)
        return out

    @classmethod
    def from_outcomes(cls, outcomes: Iterable[VerifyOutcome]) -> VerifiedBatch:
        """The columns of outcomes (from a client that yields VerifyOutcome objects)."""
        out = cls()
        for o in outcomes:
            out.task_index.append(o.task_index)
            out.rollout_index.append(o.rollout_index)
            out.reward.append(o.reward)
            out.response_json.append("" if o.response is None else dumps_json(o.response))
            out.error_kind.append(o.error_kind)
            out.error_message.append(o.error_message)
        return out

    def outcomes(self) -> list[VerifyOutcome]:
        return [
            VerifyOutcome(t, r, reward, orjson.loads(text) if text else None, kind, message)
            for t, r, reward, text, kind, message in zip(
                self.task_index, self.rollout_index, self.reward, self.response_json, self.error_kind, self.error_message
            )
        ]

    def take(self, positions: Sequence[int]) -> VerifiedBatch:
        """The results at `positions`, in that order."""
        columns = (self.task_index, self.rollout_index, self.reward, self.response_json, self.error_kind, self.error_message)
        return VerifiedBatch(*([column[p] for p in positions] for column in columns))  # type: ignore[arg-type]


@dataclass(frozen=True)
class VerifiedPart:
    """Some results of one batch (an `answer_each` batch comes in parts as its rollouts finish):
    `positions[i]` is the batch position of `verified`'s result i; `last` ends the batch."""

    batch_id: str
    positions: Sequence[int]
    verified: VerifiedBatch
    last: bool
