"""Serve an environment on 127.0.0.1:0 for the length of a test, and stop it after."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gym_metrics._transport.server import RunningServer
    from gym_metrics.environments import SimpleResourcesServer


@asynccontextmanager
async def serve_environment(
    env: SimpleResourcesServer | type[SimpleResourcesServer] | str,
    *,
    reducers: Sequence[str] | None = None,
    servicer_options: Mapping[str, Any] | None = None,
    **config: Any,
) -> AsyncIterator[RunningServer]:
    """Serve `env` (an instance, a class or a registered name) over a real gRPC server.

    A real server on a port the OS picks (a fixed port is silently shared: SO_REUSEPORT),
    bound to loopback, without access logs; `config` overrides any ServerConfig field
    (`auth_token`, `limits`, `max_message_bytes`, ...). `reducers` replaces the environment's
    reward reducers; `servicer_options` sets servicer knobs that have no CLI flag
    (`max_concurrent_verifies`, `verify_timeout_s`, `max_response_part_bytes`). Yields the
    RunningServer (`.address`, `.port`, `.env`); stops it, with no grace, on exit.

        async with serve_environment(MyEnv()) as server:
            async with gym_metrics.ResourcesClient(server.address) as client:
                ...
    """
    from gym_metrics._transport.server import ServerConfig, start_server  # grpc only when serving

    settings: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "log_requests": False, **config}
    server = await start_server(
        env, ServerConfig(**settings), reducers=reducers, servicer_options=servicer_options
    )
    try:
        yield server
    finally:
        await server.stop(0)
