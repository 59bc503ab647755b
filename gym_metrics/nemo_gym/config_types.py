"""NeMo Gym's config records: server references (`judge_model_server: {type: responses_api_models,
name: ...}`), domains, the fields every server config has, its dataset blocks (_datasets.py), and
the aggregate-metrics records."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, Field

from gym_metrics.nemo_gym._datasets import (
    DatasetConfig,
    DatasetSource,
    DatasetType,
    GitlabDatasetSource,
    HuggingFaceDatasetSource,
    JsonlDatasetGitlabIdentifer,
    JsonlDatasetHuggingFaceIdentifer,
)


class ModelServerRef(BaseModel):
    type: Literal["responses_api_models"]
    name: str


class ResourcesServerRef(BaseModel):
    type: Literal["resources_servers"]
    name: str


class AgentServerRef(BaseModel):
    type: Literal["responses_api_agents"]
    name: str


class EnvironmentServerRef(BaseModel):
    type: Literal["environment_servers"]
    name: str


ServerRef = Union[ModelServerRef, ResourcesServerRef, AgentServerRef, EnvironmentServerRef]


class Domain(str, Enum):
    """What an environment's tasks are about (one per resources server)."""

    MATH = "math"
    CODING = "coding"
    AGENT = "agent"
    KNOWLEDGE = "knowledge"
    INSTRUCTION_FOLLOWING = "instruction_following"
    LONG_CONTEXT = "long_context"
    SAFETY = "safety"
    GAMES = "games"
    TRANSLATION = "translation"
    E2E = "e2e"
    RLHF = "rlhf"
    OTHER = "other"


class BaseServerConfig(BaseModel):
    host: str
    port: int
    num_workers: Optional[int] = None


class BaseRunServerConfig(BaseServerConfig):
    entrypoint: str
    domain: Optional[Domain] = None


class BaseRunServerInstanceConfig(BaseRunServerConfig):
    name: str
    """The server's instance name: the top-level key of its block in the YAML."""


class AggregateMetricsRequest(BaseModel):
    verify_responses: list[dict[str, Any]]


class AggregateMetrics(BaseModel):
    group_level_metrics: list[dict[str, Any]] = Field(default_factory=list)
    agent_metrics: dict[str, Any] = Field(default_factory=dict)
    key_metrics: dict[str, Any] = Field(default_factory=dict)
    perf_summary: Optional[dict[str, Any]] = None
    """The rollouts' `ng_perf` summary; None when no rollout carried one."""
    repeat_level_metrics: list[dict[str, Any]] = Field(default_factory=list)


__all__ = [
    "AgentServerRef",
    "AggregateMetrics",
    "AggregateMetricsRequest",
    "BaseRunServerConfig",
    "BaseRunServerInstanceConfig",
    "BaseServerConfig",
    "DatasetConfig",
    "DatasetSource",
    "DatasetType",
    "Domain",
    "EnvironmentServerRef",
    "GitlabDatasetSource",
    "HuggingFaceDatasetSource",
    "JsonlDatasetGitlabIdentifer",
    "JsonlDatasetHuggingFaceIdentifer",
    "ModelServerRef",
    "ResourcesServerRef",
    "ServerRef",
]
