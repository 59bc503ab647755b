"""Durable evaluation jobs: a job spec, a SQLite store that outlives the process, and an
executor that runs jobs off the caller's event loop and resumes them after a restart.
Domain code only (no grpc): `JobService` is what each JobService RPC does; the transport only
converts its messages."""

from __future__ import annotations

from gym_metrics._util.deprecated import old_names
from gym_metrics.jobs._executor import JobExecutor
from gym_metrics.jobs._run import JobProgress, ProgressCallback
from gym_metrics.jobs._service import JobService, ProgressHub
from gym_metrics.jobs._secrets import SecretStore, parse_allow_env
from gym_metrics.jobs._spec import DatasetSpec, JobSpec, JobRunConfig, RowTexts, parse_spec
from gym_metrics.jobs._store import JobRecord, JobStore, StoreFullError
from gym_metrics.models import JobState
from gym_metrics.jobs._result import job_result

__all__ = [
    "DatasetSpec",
    "JobExecutor",
    "JobRecord",
    "JobService",
    "ProgressHub",
    "JobSpec",
    "JobState",
    "JobStore",
    "JobProgress",
    "ProgressCallback",
    "RowTexts",
    "JobRunConfig",
    "SecretStore",
    "StoreFullError",
    "job_result",
    "parse_allow_env",
    "parse_spec",
]


__getattr__ = old_names(__name__)
