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


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from gym_metrics._transport import _client

        return getattr(_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RunningServer", "ServerConfig", "serve", "start_server", *_CLIENT_NAMES]
