"""Domain errors, and the command line's exit codes. The transport maps each error class to one
gRPC status (see _transport/_errors.py); an error that ends a command with a particular code
says which in its `exit_code` (an `ExitCode`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

T = TypeVar("T")


class ExitCode(IntEnum):
    """The one exit-code table of every `gym-metrics` command (DESIGN "Command-line
    conventions", docs/commands.md "Exit codes"). An int, so a command returns it as is."""

    OK = 0
    FAILED = 1
    """A job FAILED or a verdict FAIL (and an unexpected internal error)."""
    BAD_INPUT = 2
    """A usage error or bad input (argparse's own usage errors exit 2 too)."""
    ALL_FAILED = 3
    """Every rollout of an agent failed, or a verdict INCONCLUSIVE."""
    INCONCLUSIVE = 3
    """The same code (an alias of ALL_FAILED), as a comparison's verdict reads it."""
    UNAVAILABLE = 4
    """The server is unreachable, a job was cancelled, or a wait timed out."""


@dataclass(frozen=True)
class FieldViolation:
    """One bad input: which field, and where (row or line) when known."""

    field: str
    description: str
    row: int | None = None
    row_name: str = "row"
    """What `row` counts: "row" (position in a batch) or "line" (in a file)."""

    def __str__(self) -> str:
        where = f"{self.row_name} {self.row}: " if self.row is not None else ""
        return f"{where}{self.field}: {self.description}"


def json_path(root: str, loc: Iterable[str | int]) -> str:
    """A path into a JSON document, the way BadRequest paths go on (docs/grpc.md#errors): keys
    after a dot, list positions in brackets (`body_json.input[0].content`)."""
    path = root
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


class GymMetricsError(Exception):
    """Base class of every error gym-metrics raises on purpose."""


class InvalidInputError(GymMetricsError, ValueError):
    """The caller sent something malformed; carries the field violations."""

    def __init__(self, message: str, violations: list[FieldViolation] | None = None) -> None:
        self.violations = list(violations or [])
        detail = "; ".join(str(v) for v in self.violations[:5])
        more = f" (+{len(self.violations) - 5} more)" if len(self.violations) > 5 else ""
        super().__init__(f"{message}: {detail}{more}" if detail else message)
        self.message = message


def rerooted(exc: InvalidInputError, root: str, new_root: str) -> InvalidInputError:
    """The same error with its paths under `root` moved under `new_root` (a transport's name
    for the same document)."""

    def moved(field: str) -> str:
        return new_root + field[len(root) :] if field == root or field.startswith((root + ".", root + "[")) else field

    return InvalidInputError(exc.message, [FieldViolation(moved(v.field), v.description, v.row, v.row_name) for v in exc.violations])


class NotFoundError(GymMetricsError, LookupError):
    """An unknown agent, environment or metric was named."""


class OverloadedError(GymMetricsError):
    """The server refuses work it cannot take on (a limit, or overload).

    `retry_after_s` is set when the same call may succeed later (the server is busy, not the
    call too big); the transport sends it as a google.rpc.RetryInfo, which clients retry on.
    """

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class NotReadyError(GymMetricsError):
    """What was asked for exists but is not ready yet (a running job's result); the transport
    answers FAILED_PRECONDITION."""


class UnavailableError(GymMetricsError):
    """The server is going away (shutting down); the transport answers UNAVAILABLE, so the
    caller retries later or elsewhere."""

    exit_code = ExitCode.UNAVAILABLE


class UserCodeError(Exception):
    """An exception raised inside the environment's own code (e.g. its verify): the transport
    answers INTERNAL naming it, and a batch records it on the rollout."""

    def __init__(self, where: str, cause: BaseException) -> None:
        super().__init__(f"{where} raised {type(cause).__name__}: {cause}")
        self.cause = cause


_CODE_ENDINGS = (Exception, SystemExit, KeyboardInterrupt, GeneratorExit)
"""What environment code raising ends only its own call: a library's `sys.exit()` or a stray
`KeyboardInterrupt` would end the server and every other call (a server's own Ctrl-C and
SIGTERM are signal handlers that stop it gracefully, never an exception in a call), and a
`GeneratorExit` left the call unanswered for good."""


def code_failed(exc: BaseException) -> bool:
    """Whether `exc`, raised out of the environment's code, is that code's failure: one of
    `_CODE_ENDINGS`, or a `CancelledError` while the task running it is not being cancelled (a
    future the code awaited was cancelled elsewhere: passed on, the call would never be
    answered). Python 3.10 cannot tell the last from the call's own cancellation (no
    `Task.cancelling`)."""
    if isinstance(exc, _CODE_ENDINGS):
        return True
    if isinstance(exc, asyncio.CancelledError):
        cancelling = getattr(asyncio.current_task(), "cancelling", None)
        return cancelling is not None and cancelling() == 0
    return False


async def contained(where: str, call: Awaitable[T]) -> T:
    """`await call`, a `SystemExit` or `KeyboardInterrupt` it raises made UserCodeError inside
    the coroutine a task runs: a task that ends in either has asyncio raise it out of the event
    loop, which ends the server whatever its caller catches."""
    try:
        return await call
    except (SystemExit, KeyboardInterrupt) as exc:
        raise UserCodeError(where, exc) from exc

