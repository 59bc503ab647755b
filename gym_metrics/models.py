"""Pydantic models an environment subclasses (what verify() takes and returns), and the records
the domain and both faces of the transport share (JobState)."""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class AgentRef(BaseModel):
    """Names the agent (policy) whose rollouts are scored."""

    model_config = ConfigDict(extra="allow")

    name: str
    """Agent name; rollouts are aggregated per name."""


class BaseVerifyRequest(BaseModel):
    """One rollout to verify. Subclass it to declare what your environment needs.

    Unknown fields are kept (NeMo Gym rollouts carry many), so a subclass only declares the
    fields its verify() reads.
    """

    model_config = ConfigDict(extra="allow")

    responses_create_params: dict[str, Any] = Field(default_factory=dict)
    """The request that produced the rollout (OpenAI Responses API shape)."""
    response: dict[str, Any] = Field(default_factory=dict)
    """The model's response (OpenAI Responses API shape); `usage` feeds token stats."""


class BaseVerifyResponse(BaseModel):
    """The verdict on one rollout: a reward plus any custom fields (all are aggregated)."""

    model_config = ConfigDict(extra="allow")

    reward: float
    """The rollout's reward; by convention 1.0 means the task was solved."""
    mask_sample: bool = False
    """True when the reward is not a valid measurement (left out of quality stats)."""


class JobState(str, enum.Enum):
    """A job's life: QUEUED -> RUNNING -> one of the three final states."""

    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def final(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
