"""NeMo Gym's `nemo_gym.sandbox.providers.base`: the sandbox records, and the capability an
environment checks with `isinstance` before it hands a sandbox to another process
(`ConnectableProvider`: a handle serialised and rebuilt elsewhere). gym-metrics' `local`
provider has no such capability (its sandboxes live in the serving process), as NeMo Gym's
`local` provider has none."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from gym_metrics.nemo_gym.sandbox._types import (
    SandboxCreateError,
    SandboxCreateVerificationError,
    SandboxExecResult,
    SandboxHandle,
    SandboxResources,
    SandboxSpec,
    SandboxStatus,
)


@runtime_checkable
class ConnectableProvider(Protocol):
    async def serialize_handle(self, handle: SandboxHandle, *, scope: str | None = None) -> dict[str, Any]: ...

    async def connect(self, descriptor: Mapping[str, Any]) -> SandboxHandle: ...


__all__ = [
    "ConnectableProvider", "SandboxCreateError", "SandboxCreateVerificationError", "SandboxExecResult", "SandboxHandle",
    "SandboxResources", "SandboxSpec", "SandboxStatus",
]  # fmt: skip
