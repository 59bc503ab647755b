"""Shared fixtures: a real grpc.aio server on 127.0.0.1:0 serving a given environment."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import grpc.aio
import pytest

from gym_metrics._transport._client import CHANNEL_OPTIONS, MAX_MESSAGE_BYTES
from gym_metrics._transport._handlers import add_resources_service
from gym_metrics._transport._servicer import ResourcesServicer
from gym_metrics.server import SimpleResourcesServer

from _transport_helpers import AnswerEnv


ServeEnv = Callable[..., Awaitable[tuple[int, grpc.aio.Channel]]]


@pytest.fixture
async def serve_env() -> AsyncIterator[ServeEnv]:
    """Factory: `port, channel = await serve_env(env, max_receive_message_length=..., **servicer_kwargs)`.

    Each call starts its own server on a fresh port; all are stopped at teardown.
    """
    servers: list[grpc.aio.Server] = []
    channels: list[grpc.aio.Channel] = []

    async def start(
        env: SimpleResourcesServer, *, max_receive_message_length: int = MAX_MESSAGE_BYTES, **servicer_kwargs: Any
    ) -> tuple[int, grpc.aio.Channel]:
        server = grpc.aio.server(
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", max_receive_message_length),
                ("grpc.so_reuseport", 0),
            ]
        )
        add_resources_service(ResourcesServicer(env, **servicer_kwargs), server)
        port = server.add_insecure_port("127.0.0.1:0")
        assert port > 0
        await server.start()
        servers.append(server)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)
        channels.append(channel)
        return port, channel

    yield start
    for channel in channels:
        await channel.close()
    for server in servers:
        await server.stop(None)


@pytest.fixture
def resources_env() -> SimpleResourcesServer:
    """The environment `grpc_server` serves; override this fixture in a test module."""
    return AnswerEnv()


@pytest.fixture
async def grpc_server(serve_env: ServeEnv, resources_env: SimpleResourcesServer) -> tuple[int, grpc.aio.Channel]:
    """(port, channel) of a server for `resources_env`."""
    return await serve_env(resources_env)
