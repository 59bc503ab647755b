"""How a failed call reads on the client: gym-metrics errors, and which failures are
transient (worth a retry) as opposed to a status the server's handler sent."""

from __future__ import annotations

import grpc
import grpc.aio
from google.rpc import error_details_pb2, status_pb2

from gym_metrics.errors import ExitCode, GymMetricsError, InvalidInputError


class ServerUnavailableError(GymMetricsError):
    """The connection to the server broke or the server did not answer in time: worth
    retrying (see `is_transient`). Exit code 4 on the command line once retries ran out."""

    exit_code = ExitCode.UNAVAILABLE


class ServerBusyError(ServerUnavailableError):
    """The server is up but busy (RESOURCE_EXHAUSTED with a RetryInfo: its sessions or
    aggregations are all taken): retry the same server later."""


class DeadlineExceededError(ServerUnavailableError):
    """The call's deadline passed before the server answered (DEADLINE_EXCEEDED): transient for
    most callers, but a caller whose work is slower than its deadline retries in vain."""


class ServerUnreachableError(GymMetricsError):
    """The first connection failed within the connect timeout: a wrong address, a server not
    started, a TLS mismatch. Not retried: retries are for a server that was there and went
    away. Exit code 4 on the command line."""

    exit_code = ExitCode.UNAVAILABLE


class RemoteCallError(GymMetricsError):
    """The server refused or failed a call; carries the gRPC status name and details."""

    def __init__(self, code: str, details: str) -> None:
        super().__init__(f"server answered {code}: {details}")
        self.code, self.details = code, details
        self.exit_code = ExitCode.FAILED if code == "INTERNAL" else ExitCode.BAD_INPUT
        """INTERNAL (the environment's own code raised: a hook, compute_metrics) is exit 1, as
        the same failure in-process; a refusal (bad input, not allowed) exit 2."""


_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""The trailer our servicers' errors carry (google.rpc.Status, see _errors.to_status)."""
_BROKEN_CONNECTION = (
    "internal error from core",  # a write on a call whose connection died (grpc.aio)
    "stream removed",
    "socket closed",
    "rst_stream",
    "connection reset",
    "broken pipe",
    "goaway",
    "cancelling all calls",  # a server shutting down with no grace left
)
"""Details of INTERNAL / UNKNOWN / CANCELLED statuses that grpc itself makes up when the
connection breaks (lower case)."""
_LOCAL_CANCEL = "locally cancelled by application"


def is_transient(exc: grpc.aio.AioRpcError) -> bool:
    """Whether a failed call is worth retrying: UNAVAILABLE and DEADLINE_EXCEEDED, a
    RESOURCE_EXHAUSTED that carries a RetryInfo (a busy server, not a call past a limit), and
    the INTERNAL / UNKNOWN / CANCELLED that the channel reports for a broken connection or a
    server shutting down. A status sent by the server's handler is final: ours carry the
    `grpc-status-details-bin` trailer, and an uncaught exception there reads "Unexpected ..."."""
    code, details = exc.code(), (exc.details() or "").lower()
    if code in _RETRYABLE:
        return True
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return _asks_to_retry(exc)  # a busy server says so with a RetryInfo; a limit does not
    if code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED):
        return False
    if _from_handler(exc) or details.startswith("unexpected ") or _LOCAL_CANCEL in details:
        return False
    return code is grpc.StatusCode.CANCELLED or any(marker in details for marker in _BROKEN_CONNECTION)


def _asks_to_retry(exc: grpc.aio.AioRpcError) -> bool:
    """True when the status details hold a google.rpc.RetryInfo."""
    try:
        for key, value in exc.trailing_metadata() or ():
            if key == _STATUS_DETAILS_KEY and isinstance(value, bytes):
                status = status_pb2.Status.FromString(value)
                retry_info = error_details_pb2.RetryInfo.DESCRIPTOR.full_name
                return any(d.TypeName() == retry_info for d in status.details)
    except Exception:  # absent or undecodable details: not a request to retry
        return False
    return False


def _from_handler(exc: grpc.aio.AioRpcError) -> bool:
    """True when the status came with our rich-status trailer, i.e. from a servicer."""
    try:
        return any(key == _STATUS_DETAILS_KEY for key, _ in exc.trailing_metadata() or ())
    except Exception:  # metadata of a call that never reached the server may be absent
        return False


REJECTED = "the server rejected the request: "
"""How an INVALID_ARGUMENT's message starts (its details follow)."""


def translate(exc: grpc.aio.AioRpcError) -> Exception:
    """gRPC failures as gym-metrics errors: transient ones as ServerUnavailableError, a
    rejected request as InvalidInputError, anything else as RemoteCallError."""
    code, details = exc.code(), exc.details() or ""
    if is_transient(exc):
        kind = {grpc.StatusCode.RESOURCE_EXHAUSTED: ServerBusyError, grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError}.get(code, ServerUnavailableError)
        return kind(f"{code.name}: {details}")
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidInputError(f"{REJECTED}{details}")
    return RemoteCallError(code.name, details)


__all__ = ["DeadlineExceededError", "RemoteCallError", "ServerBusyError", "ServerUnavailableError", "ServerUnreachableError", "is_transient", "translate"]
