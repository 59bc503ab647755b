"""Rewards over HTTP (`serve --http-port`, the `http` extra: uvicorn with httptools), for trainers
that do not speak gRPC, on the same environment and verify as the gRPC server.

- `POST /get_reward`: OpenRLHF's remote reward model, answered by its adaptor
  (`gym_metrics.integrations.openrlhf`, which says what goes in and out); the label fills
  `--http-label-field`.
- `POST /score_groups`: the plain JSON group form, `{"groups": [{"row": {...}, "completions":
  [...]}], "omit_responses": false}` in; per group `rewards`, `failed`, `error_kind`,
  `error_message`, `responses` out (the gRPC ScoreGroups, in JSON).
- `GET /health`: 200 while serving.
On its own port (`serve --agent-http-port`), the same machinery serves NeMo Gym's agent
`POST /run` (integrations/agent_run.py), NeMo RL's door.
Bodies are bounded (`--max-message-mb`, and in objects and values: BODY_BOUNDS); a server started with an auth token wants
`Authorization: Bearer <token>` here too. Errors answer JSON `{"error": ...}` naming the field.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from gym_metrics._transport.server._bearer import authorized, browser_refusal
from gym_metrics._transport.server._uvicorn import Served, start_uvicorn
from gym_metrics._util.failure_log import FailureLog
from gym_metrics._util.jsonbounds import JsonBounds, parse_bounded
from gym_metrics.environments import EnvironmentHandler, Group, score_groups
from gym_metrics.errors import GymMetricsError, InvalidInputError, UserCodeError
from gym_metrics.integrations import openrlhf
from gym_metrics.integrations.agent_run import AgentRun

BODY_BOUNDS = JsonBounds(1_000_000, 4_000_000, ("MAX_BODY_CONTAINERS", "MAX_BODY_VALUES"))
"""A body is a trainer's whole step (4,096 groups of Responses objects hold a few hundred
thousand objects); the longest parse it allows is about 200 ms on a slow core."""

log = logging.getLogger("gym_metrics.http")

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class _HttpRefusal(Exception):
    """An answer other than 200: its HTTP status and the message of its `{"error": ...}` body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


Route = Callable[[Mapping[str, Any]], Awaitable[Any]]
"""A POST route: the JSON body in, the JSON answer out (InvalidInputError: 400 naming the field)."""


class JsonHttpApp:
    """The ASGI app of an HTTP door: JSON POST routes, `GET /health`, the bearer token, bounded
    bodies, and a loopback door refusing what looks like a web page's request."""

    def __init__(self, routes: Mapping[str, Route], *, token: str | None, max_body_bytes: int, host: str = "127.0.0.1") -> None:
        self.routes, self.token, self.max_body_bytes, self.host = dict(routes), token, max_body_bytes, host

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        try:
            status, answer = await self._route(scope, receive)
        except _HttpRefusal as exc:
            status, answer = exc.status, {"error": str(exc)}
        except InvalidInputError as exc:
            status, answer = 400, {"error": str(exc)}
        except GymMetricsError as exc:
            status, answer = 503, {"error": str(exc)}
        except UserCodeError as exc:  # the environment's code raised: the call's failure, as at gRPC's INTERNAL
            status, answer = 500, {"error": str(exc)}
        except asyncio.TimeoutError as exc:  # --verify-timeout
            status, answer = 504, {"error": str(exc) or "timed out"}
        except Exception as exc:  # a bug of ours: logged whole, answered in JSON like the rest
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            status, answer = 500, {"error": f"internal error ({type(exc).__name__}); the server's log has the details"}
        body = orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _route(self, scope: dict[str, Any], receive: Receive) -> tuple[int, Any]:
        method, path = scope["method"], scope["path"].rstrip("/")
        if path == "/health" and method == "GET":
            return 200, {"status": "serving"}
        route = self.routes.get(path)
        if route is None:
            listed = ", ".join(f"POST {p}" for p in self.routes)
            raise _HttpRefusal(404, f"no route {method} {path}: {listed}, GET /health")
        if method != "POST":
            raise _HttpRefusal(405, f"{path} takes POST")
        self._check_token(scope)
        refusal = browser_refusal(scope, self.host)
        if refusal is not None:
            raise _HttpRefusal(403, refusal)
        kind = dict(scope.get("headers") or ()).get(b"content-type", b"").split(b";")[0].strip().lower()
        if kind != b"application/json":  # a page's form or text/plain POST needs no CORS preflight; JSON does
            raise _HttpRefusal(415, f"{path} takes Content-Type: application/json (got {kind.decode('latin-1') or 'none'})")
        data = await self._body(receive)
        if not isinstance(data, Mapping):
            raise InvalidInputError("the body must be a JSON object")
        return 200, await _until_gone(route(data), receive)

    def _check_token(self, scope: dict[str, Any]) -> None:
        if not authorized(scope, self.token):
            raise _HttpRefusal(401, "missing or wrong bearer token")

    async def _body(self, receive: Receive) -> Any:
        body = bytearray()  # grown as chunks come (no join at the end: 45 MB joined held the loop 30 ms)
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _HttpRefusal(499, "the client went away")
            chunk = message.get("body", b"")
            if len(body) + len(chunk) > self.max_body_bytes:
                raise _HttpRefusal(413, f"the body is larger than {self.max_body_bytes:,} bytes (serve --max-message-mb)")
            body += chunk
            if not message.get("more_body"):
                break
        try:
            return await parse_bounded(orjson.loads, body, "body", bounds=BODY_BOUNDS)
        except orjson.JSONDecodeError as exc:
            raise InvalidInputError(f"the body is not JSON: {exc}") from None

class RewardRoutes:
    """The reward routes (see the module docstring) over one environment's handler."""

    def __init__(self, handler: EnvironmentHandler, label_field: str) -> None:
        self.handler, self.label_field = handler, label_field
        self.failures = FailureLog("POST /get_reward")

    def routes(self) -> dict[str, Route]:
        return {"/get_reward": self._get_reward, "/score_groups": self._score_groups}

    async def _get_reward(self, data: Mapping[str, Any]) -> dict[str, Any]:
        answer = await openrlhf.get_reward(data, lambda groups: score_groups(self.handler, groups, omit_responses=True), label_field=self.label_field)
        reasons = [e for e in answer["gm_errors"] if e is not None]
        self.failures.note(len(reasons), len(answer["rewards"]), reasons[0] if reasons else "")
        return answer

    async def _score_groups(self, data: Mapping[str, Any]) -> dict[str, Any]:
        given = data.get("groups")
        if not isinstance(given, list):
            raise InvalidInputError("`groups` must be a list of {row, completions}")
        groups = []
        for i, g in enumerate(given):
            if not isinstance(g, Mapping) or not isinstance(g.get("completions"), list):
                raise InvalidInputError(f"groups[{i}] must be an object with `row` and a `completions` list")
            other = sorted(set(g) - {"row", "completions"})
            if other or not isinstance(g.get("row", {}), Mapping):  # (`rows`: every completion failed on the row's missing fields)
                why = f"has {', '.join(map(repr, other))}" if other else "has a `row` that is not an object"
                raise InvalidInputError(f"groups[{i}] {why}: a group is {{row, completions}}")
            groups.append(Group(g.get("row") or {}, g["completions"]))
        scored = await score_groups(self.handler, groups, omit_responses=bool(data.get("omit_responses")))
        return {"groups": [
            {"rewards": s.rewards, "failed": s.failed, "error_kind": s.error_kind, "error_message": s.error_message,
             "responses": [orjson.loads(t) if t else None for t in s.response_json]}
            for s in scored
        ]}  # fmt: skip


async def _until_gone(work: Awaitable[Any], receive: Receive) -> Any:
    """`work`'s answer; cancelled when the client goes away first (its work stops with it: a
    /run episode's session is closed, its policy calls dropped)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait([task, gone], return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise _HttpRefusal(499, "the client went away")
    return task.result()


async def _disconnected(receive: Receive) -> None:
    """Returns once the client has disconnected (the body was read whole before)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def serve_http_rewards(handler: EnvironmentHandler, config: Any) -> Served:
    """Start the HTTP reward endpoint of `config` (its host, http_port, label field, token and
    message limit) on the running loop."""
    routes = RewardRoutes(handler, config.http_label_field).routes()
    app = JsonHttpApp(routes, token=config.auth_token, max_body_bytes=config.max_message_bytes, host=config.host)
    return await start_uvicorn(app, config.host, config.http_port, "--http-port", "http")


async def serve_agent_http(agent: AgentRun, config: Any) -> Served:
    """Start NeMo Gym's agent door (`POST /run`, integrations.agent_run) of `config` (its
    host, agent_http_port, token and message limit) on the running loop."""
    app = JsonHttpApp({"/run": agent.run}, token=config.auth_token, max_body_bytes=config.max_message_bytes, host=config.host)
    return await start_uvicorn(app, config.host, config.agent_http_port, "--agent-http-port", "http")
