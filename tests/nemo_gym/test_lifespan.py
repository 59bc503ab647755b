"""A ported NeMo Gym environment's app lifespan runs as uvicorn runs it under NeMo Gym: its
startup before the server takes a call, its shutdown when the server stops. NeMo Gym 0.7.0's
environments wrap FastAPI's lifespan to start a reaper task (newton_bench), to free sidecars,
sandboxes and cohorts at exit (ns_tools, litmus_agent, workspace_bench, genrm_compare, whose
own `aclose` its lifespan calls) or to write files at exit (tavily_search); others register
`on_event("startup")` handlers (competitive_coding_challenges)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fastapi import FastAPI, Request

from gym_metrics import ResourcesClient
from gym_metrics.errors import InvalidInputError
from gym_metrics.nemo_gym import base_resources_server
from gym_metrics.nemo_gym.base_resources_server import BaseResourcesServerConfig, BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.nemo_gym.base_resources_server import SimpleResourcesServer as NeMoGymServer
from gym_metrics.testing import serve_environment

CONFIG = BaseResourcesServerConfig(name="lifecycled", host="127.0.0.1", port=0, entrypoint="app.py")
ROW = {"responses_create_params": {"input": "go"}}


class Lifecycled(NeMoGymServer):
    """Starts a ticking task and hands a greeting to requests in its lifespan; stops the task
    and calls its own `aclose` in the lifespan's exit."""

    events: list[str] = []
    fail_startup: bool = False
    hang_shutdown: bool = False

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/status")(self.status)
        app.router.on_startup.append(self._handler_ran)  # what `@app.on_event("startup")` registers
        parent = app.router.lifespan_context

        @asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
            if self.fail_startup:
                raise RuntimeError("no accelerator on this host")
            ticked = asyncio.Event()
            ticker = asyncio.create_task(self._tick(ticked))
            self.events.append("startup")
            async with parent(app):
                await ticked.wait()
                yield {"greeting": "hello from the lifespan"}
            if self.hang_shutdown:
                await asyncio.Event().wait()
            ticker.cancel()
            self.events.append("shutdown")
            await self.aclose()  # an environment method of the hook's name, as genrm_compare's

        app.router.lifespan_context = lifespan
        return app

    async def _handler_ran(self) -> None:
        self.events.append("startup handler")

    async def _tick(self, ticked: asyncio.Event) -> None:
        while True:
            if not ticked.is_set():
                self.events.append("tick")
                ticked.set()
            await asyncio.sleep(0.01)

    async def aclose(self) -> None:  # type: ignore[override]
        self.events.append("own aclose")

    async def status(self, request: Request) -> dict[str, Any]:
        return {"events": list(self.events), "greeting": request.state.greeting}

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward=1.0)


async def test_the_lifespan_starts_before_the_first_call_and_ends_with_the_server() -> None:
    env = Lifecycled(config=CONFIG, events=[])
    async with serve_environment(env) as running, ResourcesClient(running.address) as client:
        session = await client.seed_session(ROW)
        status = await client.call_tool(session, "status", "{}")
        assert not status.failed, status.output
        assert status.output == '{"events":["startup","startup handler","tick"],"greeting":"hello from the lifespan"}'
        assert "shutdown" not in env.events
    assert env.events[-2:] == ["shutdown", "own aclose"]  # once: the server's close is the lifespan's exit
    assert env.events.count("own aclose") == 1


async def test_a_failed_startup_stops_the_server_from_starting_and_says_why() -> None:
    env = Lifecycled(config=CONFIG, events=[], fail_startup=True)
    with pytest.raises(InvalidInputError, match="Lifecycled's startup .*failed: RuntimeError: no accelerator on this host"):
        async with serve_environment(env):
            raise AssertionError("served")  # pragma: no cover
    assert env.events == []


async def test_a_shutdown_that_hangs_is_cut_at_its_bound(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(base_resources_server, "LIFESPAN_STOP_S", 0.3)
    env = Lifecycled(config=CONFIG, events=[], hang_shutdown=True)
    caplog.set_level(logging.WARNING, "gym_metrics.serve")
    started = time.monotonic()
    async with serve_environment(env):
        pass
    assert time.monotonic() - started < 10
    assert "Lifecycled's shutdown (its app's lifespan) took over 0.3 s: cancelled" in caplog.text
    assert "shutdown" not in env.events
