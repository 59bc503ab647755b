"""NeMo Evaluator's Python SDK shape on gym-metrics: a script written for NeMo Evaluator runs
with only its imports and the `Evaluator` construction changed (docs/sdk.md).

Metric objects serialise into gym-metrics scorer names and configs; `Evaluator()` scores in
this process, `Evaluator("host:port")` submits durable jobs to `gym-metrics jobs serve`.
Importing this package loads no grpc: the job client is imported on first use of a server.
"""

from __future__ import annotations

from gym_metrics.sdk._evaluator import Dataset, Evaluator, load_dataset
from gym_metrics.sdk._jobs import Job, JobError, LocalJob, RemoteJob
from gym_metrics.sdk._metrics import (
    AgentGoalAccuracyMetric,
    AnswerAccuracyMetric,
    JSONScoreParser,
    Metric,
    NemoAgentToolkitRemoteMetric,
    RemoteMetric,
    RemoteScore,
    ToolCallAccuracyMetric,
    ToolCallingMetric,
    TopicAdherenceMetric,
)
from gym_metrics.sdk._models import (
    Agent,
    InferenceParams,
    Model,
    ReasoningParams,
    RunConfig,
    RunConfigOnline,
    RunConfigOnlineModel,
    SecretRef,
    secret_env,
)
from gym_metrics.sdk._result import AggregateScores, EvaluationResult, RowScore

__all__ = [
    "Agent",
    "AgentGoalAccuracyMetric",
    "AggregateScores",
    "AnswerAccuracyMetric",
    "Dataset",
    "EvaluationResult",
    "Evaluator",
    "InferenceParams",
    "JSONScoreParser",
    "Job",
    "JobError",
    "LocalJob",
    "Metric",
    "Model",
    "NemoAgentToolkitRemoteMetric",
    "ReasoningParams",
    "RemoteJob",
    "RemoteMetric",
    "RemoteScore",
    "RowScore",
    "RunConfig",
    "RunConfigOnline",
    "RunConfigOnlineModel",
    "SecretRef",
    "ToolCallAccuracyMetric",
    "ToolCallingMetric",
    "TopicAdherenceMetric",
    "load_dataset",
    "secret_env",
]
