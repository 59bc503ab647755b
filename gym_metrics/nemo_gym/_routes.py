"""A NeMo Gym environment's sessions and tool routes on gym-metrics' sessions and tools.

Under NeMo Gym an agent seeds a session (`POST /seed_session` with the task row), calls tools
(`POST /<tool>` routes the environment adds in `setup_webserver`) and verifies, all in one
cookie session whose `request.session["session_id"]` keys the environment's own state. Here
the same methods run in a gym-metrics session, and every call of a session sees the same
`request.session`. A tool call is a POST through the environment's own app (_asgi.post), so
FastAPI routes it as under NeMo Gym; the routes without path parameters are listed as tools,
named by their path.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import typing
import uuid
from typing import Any

import pydantic

from gym_metrics.environments import Session, ToolSpec
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym.server_utils import SESSION_ID_KEY

log = logging.getLogger("gym_metrics.sessions")


class _Request:
    """What ported environments read from FastAPI's request: the session dict and headers."""

    def __init__(self, session: dict[str, Any], headers: dict[str, str]) -> None:
        self.session, self.headers = session, headers

    @classmethod
    def fresh(cls) -> _Request:
        return cls({SESSION_ID_KEY: uuid.uuid4().hex}, {})


def _request_of(session: Session) -> _Request:
    """The request object of a session's calls (one per session: what a route writes into
    `request.session` stays for the session's later calls, as NeMo Gym's cookie session does)."""
    request = session.state.get(_REQUEST_KEY)
    if request is None:
        request = session.state[_REQUEST_KEY] = _Request({SESSION_ID_KEY: session.id}, {})
    return request


_REQUEST_KEY = "_nemo_gym_request"
_EPISODE_KEY = "_nemo_gym_episode"
"""The episode an environment server's seed named: its close names it again."""
_ENVIRONMENT_SEED = frozenset({"resources_session_id", "episode_id", "task_id", "task_data"})


class _NoBody(pydantic.BaseModel):
    pass


BASE_ROUTES = frozenset({"/seed_session", "/close_session", "/verify", "/aggregate_metrics"})
"""NeMo Gym's own routes of every resources server: not tools."""


def app_of(server: Any) -> Any:
    """`server.setup_webserver()`, built once per server, with the liveness routes NeMo Gym's
    `run_webserver` adds after it (so a tool named `health` answers 405 there and here)."""
    app = server.__dict__.get("_gm_app")
    if app is None:
        app = server.__dict__["_gm_app"] = server.setup_webserver()  # not a field: pydantic leaves __dict__ extras alone
        for path in LIVENESS_ROUTES:
            app.get(path, include_in_schema=False)(_alive)
    return app


LIVENESS_ROUTES = ("/readyz", "/livez", "/healthz", "/health", "/")
"""NeMo Gym's GET routes of every server (`setup_liveness`)."""


async def _alive() -> dict[str, str]:
    return {"status": "ok"}


def _post_routes(server: Any) -> list[Any]:
    from fastapi.routing import APIRoute

    return [r for r in app_of(server).routes if isinstance(r, APIRoute) and "POST" in (r.methods or ())]


def route_tools(server: Any) -> dict[str, ToolSpec]:
    """The POST routes the environment adds, without path parameters, as tools (built once per
    server). A catch-all route (`/{path}`) answers names that are not listed."""
    found = server.__dict__.get("_gm_route_tools")
    if found is None:
        found = {}
        for route in _post_routes(server):
            if route.path not in BASE_ROUTES and not route.param_convertors:
                spec = _route_tool(route.path.strip("/"), route.endpoint)
                found.setdefault(spec.name, spec)  # the first route of a path answers it, as in FastAPI
        server.__dict__["_gm_route_tools"] = found
    return found


def verify_response_model(server: Any) -> Any:
    """What FastAPI filters verify's answer through at `/verify`: the route's response model
    (verify's return annotation, or the route's `response_model=`); None: the answer goes out
    whole (no annotation, or no such route)."""
    route = next((r for r in _post_routes(server) if r.path == "/verify"), None)
    return None if route is None else route.response_model


def verify_route_replaced(server: Any) -> bool:
    """The app's `/verify` is another endpoint than the server's own `verify` (litmus_agent's
    wrapper that frees a session's sandbox after scoring): verify then goes through the app,
    as NeMo Gym's agent posts it."""
    found = server.__dict__.get("_gm_verify_replaced")
    if found is None:
        route = next((r for r in _post_routes(server) if r.path == "/verify"), None)
        found = server.__dict__["_gm_verify_replaced"] = route is not None and route.endpoint != server.verify
    return bool(found)


async def verify_through_route(server: Any, body: bytes, session: Session | None) -> tuple[int, str]:
    """(status, body text) of `POST /verify` with `body`, in the rollout's session (a fresh one without)."""
    from gym_metrics.nemo_gym._asgi import post

    request = _Request.fresh() if session is None else _request_of(session)
    return await post(app_of(server), "/verify", body, request.session)


async def call_route(server: Any, session: Session, name: str, arguments_json: str | bytes) -> tuple[str, bool, int]:
    """(the body the model reads, whether the status is an error, the status) of `POST /<name>`
    in the session, through the environment's app."""
    from gym_metrics.nemo_gym._asgi import post

    body = arguments_json.encode() if isinstance(arguments_json, str) else bytes(arguments_json)
    status, text = await post(app_of(server), "/" + name, body, _request_of(session).session)
    return text, status >= 400, status


def _route_tool(name: str, endpoint: Any) -> ToolSpec:
    """A route as the model is shown it: its path, its docstring's first paragraph and its body
    model (the endpoint takes a request, a body model, both or neither). Calls never go through
    the spec: `call_route` posts them to the app."""
    hints = _hints(endpoint)
    params = inspect.signature(endpoint).parameters.values()
    body = next((hints.get(p.name) for p in params if not _is_request(p, hints)), None)
    model = body if isinstance(body, type) and issubclass(body, pydantic.BaseModel) else _NoBody
    doc = inspect.getdoc(endpoint) or ""
    return ToolSpec(name, doc.split("\n\n")[0].strip(), model, _through_the_app)


async def _through_the_app(env: Any, arguments: pydantic.BaseModel, session: Session) -> Any:
    raise NotImplementedError("a ported environment's tool is called through its app (call_route)")


def _is_request(param: inspect.Parameter, hints: dict[str, Any]) -> bool:
    hint = hints.get(param.name)
    return param.name == "request" or getattr(hint, "__name__", "") == "Request"


def _hints(func: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except Exception:
        return {}


async def close_route(server: Any, session: Session) -> None:
    """`POST /close_session` for the session, as NeMo Gym's session contract makes it; an
    error status is logged."""
    from gym_metrics.nemo_gym._asgi import post

    episode = session.state.get(_EPISODE_KEY) or {"rollout_id": session.id, "attempt": 0}
    body = json.dumps({"resources_session_id": session.id, "episode_id": episode}).encode()
    status, text = await post(app_of(server), "/close_session", body, _request_of(session).session)
    if status >= 400:
        log.warning("close_session answered %d for session %s: %s", status, session.id, text[:500])


async def seed_nemo_session(server: Any, session: Session, request: _Request) -> None:
    """seed_session(request, body) or seed_session(body), the body validated from the row by
    its annotation, as NeMo Gym's /seed_session route validates it."""
    seed = server.seed_session
    adapter, takes_request = _seed_signature(type(server).seed_session)
    row = dict(session.row)
    if _ENVIRONMENT_SEED <= row.keys():  # an environment server's seed (ResourcesSeedSessionRequest): the session is this one,
        row["resources_session_id"] = session.id  # its id the one its close names, as the server that seeds it assigned it
        session.state[_EPISODE_KEY] = row["episode_id"]
    try:
        body = adapter.validate_python(row)
    except pydantic.ValidationError as exc:
        violations = [FieldViolation(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors()[:20]]
        raise InvalidInputError("the row does not fit the environment's seed_session body", violations) from None
    await (seed(request, body) if takes_request else seed(body))


@functools.lru_cache(maxsize=None)
def _seed_signature(seed: Any) -> tuple[pydantic.TypeAdapter[Any], bool]:
    params = [p for p in inspect.signature(seed).parameters.values() if p.name != "self"]
    hints = _hints(seed)
    body = [p for p in params if not _is_request(p, hints)]
    hint = hints.get(body[0].name, Any) if body else Any
    return pydantic.TypeAdapter(hint), len(params) >= 2
