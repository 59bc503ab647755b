"""NeMo Gym's description of a borrowed sandbox (`nemo_gym.sandbox.access`): how another process
reconnects to a sandbox its owner keeps (a provider config named in the global config and the
handle's descriptor), and the working directory there. Records only: gym-metrics' `local`
provider cannot be reconnected to (providers/base.ConnectableProvider)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue


class DirectSandboxConnection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["direct"] = "direct"
    provider_config_ref: str
    descriptor: dict[str, JsonValue]


class SandboxAccess(BaseModel):
    model_config = ConfigDict(extra="forbid")

    connection: DirectSandboxConnection
    workdir: str


__all__ = ["DirectSandboxConnection", "SandboxAccess"]
