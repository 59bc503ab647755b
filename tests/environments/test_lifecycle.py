"""An environment's whole-life hooks: `astart` runs on the server's loop before its first call
(a task or client made there lives as long as the server), `aclose` when it stops; an `astart`
that raises stops the start with the reason."""

from __future__ import annotations

import asyncio

import pytest

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, ResourcesClient, SimpleResourcesServer
from gym_metrics.errors import InvalidInputError
from gym_metrics.testing import serve_environment


class Beating(SimpleResourcesServer):
    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail, self.beats, self.task, self.loop = fail, 0, None, None
        self.closed = 0

    async def astart(self) -> None:
        if self.fail:
            raise OSError("the model cache is not mounted")
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.create_task(self._beat())

    async def _beat(self) -> None:
        while True:
            self.beats += 1
            await asyncio.sleep(0.01)

    async def aclose(self) -> None:
        self.closed += 1
        assert self.task is not None
        self.task.cancel()

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(reward=float(self.beats > 0))


async def test_astart_runs_on_the_servers_loop_before_a_call_and_aclose_ends_what_it_started() -> None:
    env = Beating()
    async with serve_environment(env) as running, ResourcesClient(running.address) as client:
        assert env.loop is asyncio.get_running_loop() and env.task is not None and not env.task.done()
        answer = await client.verify({"responses_create_params": {"input": "x"}, "response": {"output": []}})
        assert answer["reward"] == 1.0
    await asyncio.sleep(0)
    assert env.closed == 1 and env.task.cancelled()


async def test_an_astart_that_raises_stops_the_start_and_names_the_reason() -> None:
    env = Beating(fail=True)
    with pytest.raises(InvalidInputError, match=r"cannot start the environment: Beating.astart\(\) failed: OSError: the model cache is not mounted"):
        async with serve_environment(env):
            raise AssertionError("served")  # pragma: no cover
    assert env.closed == 0


async def test_a_start_that_fails_after_astart_closes_the_environment() -> None:
    """The Prometheus port taken: the start fails, and what `astart` made is freed (the
    environment's `aclose`, with the doors and sessions: the server's whole stop)."""
    import socket

    from gym_metrics._transport.server import ServerConfig, start_server

    env = Beating()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        config = ServerConfig(host="127.0.0.1", port=0, log_requests=False, prometheus_port=taken.getsockname()[1])
        with pytest.raises(OSError):
            await start_server(env, config)
    await asyncio.sleep(0)
    assert env.closed == 1 and env.task is not None and env.task.cancelled()
