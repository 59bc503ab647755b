"""A NeMo Gym environment written in NeMo Gym's own form (its imports are `nemo_gym`; the tests
port it by the import rule) whose routes exercise what FastAPI decides: a catch-all tool route
with a path parameter, an HTTPException, a body that does not fit, a bare `str` answer, an
exception, a route's `response_model=`, a verify annotated with the base response class that
returns a subclass, a close_resources_session that frees per-session state, and a lifespan
wrapped around FastAPI's (as newton_bench and ns_tools wrap theirs) with a startup handler, whose
state a route reads. scripts/make_nemo_routes_reference.py records what NeMo Gym answers."""

import math
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    SimpleResourcesServer,
)
from nemo_gym.server_utils import SESSION_ID_KEY


class RoutesConfig(BaseResourcesServerConfig):
    pass


class Angle(BaseModel):
    x: float


class Key(BaseModel):
    key: str


class Small(BaseModel):
    shown: int


class RoutesVerifyResponse(BaseVerifyResponse):
    calls_seen: int
    secret_detail: str


class RoutesServer(SimpleResourcesServer):
    config: RoutesConfig
    closed: list[tuple[str, str]] = []

    def model_post_init(self, context: object) -> None:
        self._calls: dict[str, int] = {}

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/lookup")(self.lookup)
        app.post("/greet")(self.greet)
        app.post("/explode")(self.explode)
        app.post("/small", response_model=Small)(self.small)
        app.post("/lifespan")(self.lifespan)
        app.router.on_startup.append(self._started)
        parent = app.router.lifespan_context

        @asynccontextmanager
        async def wrapped(app: FastAPI):
            async with parent(app):
                yield {"greeting": "from the lifespan"}

        app.router.lifespan_context = wrapped
        app.post("/{function_name}")(self.math_function)  # catch-all: last, as NeMo Gym envs register it
        return app

    def _count(self, request: Request) -> None:
        sid = request.session[SESSION_ID_KEY]
        self._calls[sid] = self._calls.get(sid, 0) + 1

    async def math_function(self, function_name: str, body: Angle, request: Request) -> dict:
        """A math function of x by its name (sin, cos, ...)."""
        self._count(request)
        fn = getattr(math, function_name, None)
        if fn is None:
            raise HTTPException(status_code=404, detail=f"no function {function_name}")
        return {"function": function_name, "value": round(fn(body.x), 6)}

    async def lookup(self, body: Key, request: Request) -> dict:
        """A value by key."""
        self._count(request)
        if body.key != "a":
            raise HTTPException(status_code=404, detail=f"no key {body.key!r}")
        return {"a": 1}

    async def greet(self, request: Request) -> str:
        """A greeting, as a bare string."""
        self._count(request)
        return "hello, \"world\" \u00e9"

    async def explode(self, request: Request) -> dict:
        """Always raises."""
        self._count(request)
        raise ValueError("boom")

    async def _started(self) -> None:
        self._startups = getattr(self, "_startups", 0) + 1

    async def lifespan(self, request: Request) -> dict:
        """What the app's lifespan set up: its state, and whether its startup handler ran."""
        return {"greeting": request.state.greeting, "started": getattr(self, "_startups", 0) > 0}

    async def small(self, request: Request) -> dict:
        """More fields than its response model shows."""
        self._count(request)
        return {"shown": 1, "hidden": 2}

    async def close_resources_session(
        self, request: Request, body: ResourcesCloseSessionRequest
    ) -> ResourcesCloseSessionResponse:
        self.closed.append((body.resources_session_id, request.session[SESSION_ID_KEY]))
        return ResourcesCloseSessionResponse(resources_session_id=body.resources_session_id)

    async def verify(self, request: Request, body: BaseVerifyRequest) -> BaseVerifyResponse:
        calls = self._calls.pop(request.session[SESSION_ID_KEY], 0)
        return RoutesVerifyResponse(**body.model_dump(), reward=float(calls), calls_seen=calls, secret_detail="not sent")
