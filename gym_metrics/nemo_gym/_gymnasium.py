"""NeMo Gym's gymnasium servers (`resources_servers.gymnasium.GymnasiumServer`, ported by their
imports) as environments that answer each turn: their app's `POST /reset` and `POST /step`
called in the rollout's session with the bodies NeMo Gym's `gymnasium_agent` sends (the task row;
the task row with the model's turn as `response`), their answers read as it reads them.

A route that answers an error status fails the call as the agent's `raise_for_status` fails
the rollout: a 4xx (the row or the turn does not fit the route's model) is bad input naming
the route, anything else the environment's error. The optional contract NeMo Gym's agent
honours is honoured too: `info.supports_step_idempotency` (each step carries a fresh
`_ng_step_request_id`) and `info.supports_explicit_close` (`POST /close` when the episode ends).
"""

from __future__ import annotations

import inspect
import json
import uuid
from typing import Any

from gym_metrics.environments import ResetResult, Session, SimpleResourcesServer, StepResult
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym._routes import _post_routes, _request_of, app_of
from gym_metrics.nemo_gym.server_utils import SESSION_ID_KEY

ROUTES = frozenset({"/reset", "/step"})
_CLOSE_KEY = "_gm_gymnasium_close"
_IDEMPOTENT_KEY = "_gm_gymnasium_step_ids"
_ENDED_KEY = "_gm_gymnasium_ended"


def is_gymnasium(server: Any) -> bool:
    """True when the server's app answers `POST /reset` and `POST /step`."""
    found = server.__dict__.get("_gm_gymnasium")
    if found is None:
        found = server.__dict__["_gm_gymnasium"] = ROUTES <= {r.path for r in _post_routes(server)}
    return bool(found)


async def _post(server: Any, session: Session, path: str, body: dict[str, Any]) -> dict[str, Any]:
    from gym_metrics.nemo_gym._asgi import post

    status, text = await post(app_of(server), path, json.dumps(body).encode(), _request_of(session).session)
    if 400 <= status < 500:
        raise InvalidInputError(f"{path} answered {status}", [FieldViolation("body_json" if path == "/reset" else "response_json", text[:2000])])
    if status >= 400:
        raise RuntimeError(f"{path} answered {status}: {text[:2000]}")
    answer = json.loads(text)
    if not isinstance(answer, dict):
        raise RuntimeError(f"{path} answered {type(answer).__name__}, not an object")
    return answer


async def reset_route(server: Any, session: Session) -> ResetResult:
    answer = await _post(server, session, "/reset", dict(session.row))
    info = _info(answer)
    session.state[_CLOSE_KEY] = info.get("supports_explicit_close") is True
    session.state[_IDEMPOTENT_KEY] = info.get("supports_step_idempotency") is True
    return ResetResult(answer.get("observation"), info)


async def step_route(server: Any, session: Session, response: dict[str, Any]) -> StepResult:
    body = {**session.row, "response": response}
    if session.state.get(_IDEMPOTENT_KEY):
        body["_ng_step_request_id"] = uuid.uuid4().hex
    answer = await _post(server, session, "/step", body)
    result = StepResult(answer.get("observation"), answer.get("reward", 0.0), bool(answer.get("terminated")), bool(answer.get("truncated")), _info(answer))
    session.state[_ENDED_KEY] = result.terminated or result.truncated  # its /step closed it
    return result


def _info(answer: dict[str, Any]) -> dict[str, Any]:
    info = answer.get("info")
    return info if isinstance(info, dict) else {}


async def close_route(server: Any, session: Session) -> None:
    """`POST /close` for a server that asked for it at reset (its errors are the caller's to log).
    An episode the environment did not end itself (abandoned, closed by its client, cut at
    max steps) gets GymnasiumServer's own `close_session(session_id)`, which its `/step` calls
    when an episode ends: NeMo Gym's agent leaves that state behind for good."""
    if session.state.get(_CLOSE_KEY):
        await _post(server, session, "/close", {})
    elif not session.state.get(_ENDED_KEY) and _own_close(server):
        await server.close_session(_request_of(session).session.get(SESSION_ID_KEY))


def _own_close(server: Any) -> bool:
    """True when the server's class has a `close_session` of its own (GymnasiumServer's), not
    the framework's hook of that name."""
    own = getattr(type(server), "close_session", None)
    return own is not SimpleResourcesServer.close_session and inspect.iscoroutinefunction(own)
