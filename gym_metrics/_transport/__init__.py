"""The only package that imports grpc: servicer, interceptors and server bootstrap."""

from __future__ import annotations

from typing import Any

from gym_metrics._transport._server import RunningServer, ServerConfig, serve, start_server


def __getattr__(name: str) -> Any:
    # The client is imported on first use so serving never loads it.
    if name == "ResourcesClient":
        from gym_metrics._transport._client import ResourcesClient

        return ResourcesClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ResourcesClient", "RunningServer", "ServerConfig", "serve", "start_server"]
