"""The provider-neutral records of NeMo Gym's sandbox API (`nemo_gym.sandbox`): what an
environment asks a sandbox for and what a command answers, with the same fields, defaults and
checks, so a ported environment builds them as it does under NeMo Gym."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class SandboxStatus(str, Enum):
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"
    ERROR = "error"
    UNKNOWN = "unknown"


def _optional(value: Any, kind: type) -> Any:
    return None if value is None else kind(value)


@dataclass(frozen=True)
class SandboxResources:
    """What a sandbox may use (None: the provider's default)."""

    cpu: float | None = None
    memory_mib: int | None = None
    disk_gib: int | None = None
    gpu: int | None = None
    gpu_type: str | None = None

    @classmethod
    def from_mapping(cls, resources: Mapping[str, Any] | None) -> SandboxResources:
        """From a config mapping; a key that is not a field is a ValueError naming it and the fields."""
        if resources is None:
            return cls()
        fields = sorted(cls.__dataclass_fields__)
        unknown = sorted(set(resources) - set(fields))
        if unknown:
            raise ValueError(f"Unknown sandbox resource keys: {', '.join(unknown)}. Expected keys: {', '.join(fields)}")
        kinds = {"cpu": float, "memory_mib": int, "disk_gib": int, "gpu": int, "gpu_type": str}
        return cls(**{key: _optional(resources.get(key), kind) for key, kind in kinds.items()})


@dataclass(frozen=True)
class SandboxSpec:
    """A sandbox to create: its image, lifetime, working directory, environment, files
    (absolute or workdir-relative path -> text), labels, resources and ports."""

    image: str | None = None
    ttl_s: int | float | None = None
    ready_timeout_s: int | float | None = None
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    resources: SandboxResources | Mapping[str, Any] = field(default_factory=SandboxResources)
    entrypoint: list[str] | None = None
    provider_options: dict[str, Any] = field(default_factory=dict)
    ports: tuple[int, ...] | list[int] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not isinstance(self.resources, SandboxResources):
            object.__setattr__(self, "resources", SandboxResources.from_mapping(self.resources))
        if not isinstance(self.ports, (list, tuple)):
            raise TypeError("Sandbox ports must be a list or tuple of TCP port numbers")
        ports: list[int] = []
        for given in self.ports:
            if isinstance(given, bool) or not isinstance(given, (int, str)):
                raise ValueError(f"Invalid sandbox TCP port: {given!r}")
            try:
                port = int(given)
            except ValueError as exc:
                raise ValueError(f"Invalid sandbox TCP port: {given!r}") from exc
            if not 1 <= port <= 65535:
                raise ValueError(f"Sandbox TCP port must be between 1 and 65535, got {port}")
            if port in ports:
                raise ValueError(f"Duplicate sandbox TCP port: {port}")
            ports.append(port)
        object.__setattr__(self, "ports", tuple(ports))


@dataclass
class SandboxHandle:
    """A created sandbox: `raw` is its provider's own state, for that provider alone."""

    sandbox_id: str
    provider_name: str
    raw: Any


@dataclass(frozen=True)
class SandboxExecResult:
    """A command's outcome: `return_code` the process's exit code, or a provider's sentinel
    (125) with `error_type` set when the command did not run to an exit (`timeout`)."""

    stdout: str | None
    stderr: str | None
    return_code: int
    error_type: str | None = None


ExecResult = SandboxExecResult


class SandboxCreateError(RuntimeError):
    """A provider could not create the sandbox."""


class SandboxCreateVerificationError(SandboxCreateError):
    """A created sandbox failed its provider's readiness checks."""
