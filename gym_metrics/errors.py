"""Domain errors. The transport maps each class to one gRPC status (see _transport/_errors.py)."""

from __future__ import annotations

from dataclasses import dataclass


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
