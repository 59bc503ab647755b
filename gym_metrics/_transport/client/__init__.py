"""The client face of the transport: ResourcesClient (verify, aggregate, server info) and
JobClient (durable jobs), with the errors a failed call raises."""

from gym_metrics._transport.client._jobs import JobClient, JobInfo, JobNotFinishedError, JobWaitTimeout
from gym_metrics._transport.client._resources import (
    CHANNEL_OPTIONS,
    KEEPALIVE_OPTIONS,
    MAX_MESSAGE_BYTES,
    ResourcesClient,
    ServerInfo,
    for_agent,
    is_transient,
)
from gym_metrics._transport.client._groups import GroupRewards, encoded_group
from gym_metrics._transport.client._verify_requests import VerifyInput
from gym_metrics._transport.client._sessions import SessionLostError, ToolOutput, tool_caller
from gym_metrics._transport.client._session_stream import SessionStream
from gym_metrics._transport.client._status import DeadlineExceededError, RemoteCallError, ServerBusyError, ServerUnavailableError, ServerUnreachableError
from gym_metrics._transport._verified import VerifiedBatch, VerifiedPart, VerifyOutcome

__all__ = [
    "CHANNEL_OPTIONS",
    "KEEPALIVE_OPTIONS",
    "MAX_MESSAGE_BYTES",
    "DeadlineExceededError",
    "GroupRewards",
    "encoded_group",
    "JobClient",
    "JobInfo",
    "JobNotFinishedError",
    "JobWaitTimeout",
    "RemoteCallError",
    "ResourcesClient",
    "ServerInfo",
    "ServerBusyError",
    "ServerUnavailableError",
    "SessionStream",
    "ServerUnreachableError",
    "SessionLostError",
    "ToolOutput",
    "tool_caller",
    "VerifiedBatch",
    "VerifiedPart",
    "VerifyInput",
    "VerifyOutcome",
    "is_transient",
    "for_agent",
]
