"""Shared fixtures: a real grpc.aio server on 127.0.0.1:0 serving a given environment
(gym_metrics.testing.serve_environment), with a raw channel to it."""

from __future__ import annotations

import signal
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import grpc
import grpc.aio
import pytest

from gym_metrics._transport.client import CHANNEL_OPTIONS
from gym_metrics.environments import SimpleResourcesServer
from gym_metrics.testing import serve_environment

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Started in the background by a shell without job control (`cmd &` in a script), which
    # ignores SIGINT: the processes the Ctrl-C tests start would inherit that and never stop.
    # A handler here is reset to the default in every program this process starts.
    signal.signal(signal.SIGINT, signal.default_int_handler)

from _ci import need_sandbox
from _transport_helpers import AnswerEnv


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--python-share", metavar="K/N", default=None,
        help="run share K of N of the test files (a stable hash of each file's path), and every test marked "
        "every_python: .ci/run's extra Pythons split the suite this way (each file on the default Python and one other)",
    )  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    share = config.getoption("--python-share")
    if share is None:
        return
    try:
        k, n = (int(part) for part in share.split("/"))
        assert 0 <= k < n
    except (ValueError, AssertionError):
        raise pytest.UsageError(f"--python-share {share!r}: expected K/N with 0 <= K < N") from None
    keep, drop = [], []
    for item in items:
        mine = zlib.crc32(item.nodeid.split("::")[0].encode()) % n == k
        (keep if mine or item.get_closest_marker("every_python") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


ServeEnv = Callable[..., Awaitable[tuple[int, grpc.aio.Channel]]]


@pytest.fixture
def sandbox() -> None:
    """The sandbox's strict isolation is here (bubblewrap, root), else the test skips (fails
    under CI=true): `pytestmark = pytest.mark.usefixtures("sandbox")`."""
    need_sandbox()


@pytest.fixture
async def serve_env() -> AsyncIterator[ServeEnv]:
    """Factory: `port, channel = await serve_env(env, max_receive_message_length=..., **servicer_kwargs)`.

    Each call starts its own server (gym_metrics.testing.serve_environment) on a fresh port;
    all are stopped at teardown.
    """
    async with AsyncExitStack() as stack:

        async def start(
            env: SimpleResourcesServer, *, max_receive_message_length: int | None = None, **servicer_kwargs: Any
        ) -> tuple[int, grpc.aio.Channel]:
            limit = {} if max_receive_message_length is None else {"max_message_bytes": max_receive_message_length}
            server = await stack.enter_async_context(serve_environment(env, servicer_options=servicer_kwargs, **limit))
            channel = grpc.aio.insecure_channel(server.address, options=CHANNEL_OPTIONS)
            stack.push_async_callback(channel.close)
            return server.port, channel

        yield start


@pytest.fixture
def resources_env() -> SimpleResourcesServer:
    """The environment `grpc_server` serves; override this fixture in a test module."""
    return AnswerEnv()


@pytest.fixture
async def grpc_server(serve_env: ServeEnv, resources_env: SimpleResourcesServer) -> tuple[int, grpc.aio.Channel]:
    """(port, channel) of a server for `resources_env`."""
    return await serve_env(resources_env)
