"""NeMo Gym's sandbox API (`nemo_gym.sandbox`) for ported environments: `AsyncSandbox`, the
spec and result records, provider configs and helpers, with its `local` provider run in
gym-metrics' own isolated sandbox (_local.py says what differs). NeMo Gym's container and
service providers are not ported; its PTY sessions, endpoints, pause/resume, serialisation and
the blocking `Sandbox` neither (docs/nemo-gym.md, "Sandboxed tools"). `access` and
`providers.base` hold the records and protocol environments import."""

from gym_metrics.nemo_gym.sandbox._api import AsyncSandbox
from gym_metrics.nemo_gym.sandbox._local import LocalProvider
from gym_metrics.nemo_gym.sandbox._registry import create_provider, get_provider_class, list_providers, register_provider
from gym_metrics.nemo_gym.sandbox._types import (
    ExecResult,
    SandboxCreateError,
    SandboxCreateVerificationError,
    SandboxExecResult,
    SandboxHandle,
    SandboxResources,
    SandboxSpec,
    SandboxStatus,
)
from gym_metrics.nemo_gym.sandbox.config import resolve_provider_config, resolve_provider_metadata
from gym_metrics.nemo_gym.sandbox.utils import rewrite_image

__all__ = [
    "AsyncSandbox", "ExecResult", "LocalProvider", "SandboxCreateError", "SandboxCreateVerificationError", "SandboxExecResult",
    "SandboxHandle", "SandboxResources", "SandboxSpec", "SandboxStatus", "create_provider", "get_provider_class", "list_providers",
    "register_provider", "resolve_provider_config", "resolve_provider_metadata", "rewrite_image",
]  # fmt: skip
