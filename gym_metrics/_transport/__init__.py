"""The only package that imports grpc: servicers, client, interceptors and server bootstrap.

Other packages use what this file exports, never its private modules. The client side is
imported on first use, so serving never loads it (and the server side is grpc too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gym_metrics._transport._server import RunningServer, ServerConfig, start_server
from gym_metrics._transport._serving import serve

if TYPE_CHECKING:
    from gym_metrics._transport._client import (
        RemoteCallError,
        ResourcesClient,
        ServerInfo,
        ServerUnavailableError,
        ServerUnreachableError,
        VerifiedBatch,
        VerifyInput,
        VerifyOutcome,
    )
    from gym_metrics._transport._jobs_client import JobClient, JobInfo, JobNotFinishedError, JobWaitTimeout
    from gym_metrics._transport._jobs_serving import JobServerOptions, RunningJobServer, serve_jobs, start_job_server

_CLIENT_NAMES = (
    "RemoteCallError",
    "ResourcesClient",
    "ServerInfo",
    "ServerUnavailableError",
    "ServerUnreachableError",
    "VerifiedBatch",
    "VerifyInput",
    "VerifyOutcome",
)
_JOB_CLIENT_NAMES = ("JobClient", "JobInfo", "JobNotFinishedError", "JobWaitTimeout")
_JOB_SERVER_NAMES = ("JobServerOptions", "RunningJobServer", "serve_jobs", "start_job_server")


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from gym_metrics._transport import _client

        return getattr(_client, name)
    if name in _JOB_CLIENT_NAMES:  # jobs load gym_metrics.jobs (and its scorers) on first use only
        from gym_metrics._transport import _jobs_client

        return getattr(_jobs_client, name)
    if name in _JOB_SERVER_NAMES:
        from gym_metrics._transport import _jobs_serving

        return getattr(_jobs_serving, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RunningServer", "ServerConfig", "serve", "start_server", *_CLIENT_NAMES, *_JOB_CLIENT_NAMES, *_JOB_SERVER_NAMES]
