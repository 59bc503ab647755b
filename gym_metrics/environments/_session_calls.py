"""What the session and tool calls of one served environment do, with no transport: seed a
rollout's session from its task row, call a tool in it, verify in it (which ends it), close it.

Failures, as NeMo Gym's agent sees them: a tool that raises or runs past `tool_timeout_s`
answers its error as the tool's output (`failed` set, counted), so the model reads it and the
episode goes on; an unknown tool is NotFoundError, arguments that do not fit the tool's model
InvalidInputError naming the field (the agent loop turns both into outputs for the model too).
Sessions idle past their TTL are closed by a sweep (the client went away), so the count of live
sessions returns to 0 by itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Mapping
from typing import Any

import orjson

from gym_metrics._util.jsonbounds import checked_items, parse_bounded
from gym_metrics._util.limits import TOOL_TIMEOUT_S
from gym_metrics.environments._hooks import hook
from gym_metrics.environments._server import SimpleResourcesServer
from gym_metrics.environments._sessions import Session, SessionStore
from gym_metrics.environments._steps import StepResult, action_of
from gym_metrics.environments._tools import find_tool
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError, UserCodeError, code_failed, contained

log = logging.getLogger("gym_metrics.sessions")

MAX_ROW_BYTES = 16 << 20
"""Bytes of task row a session keeps while it is live (its JSON text; its items are bounded by
MAX_JSON_CONTAINERS and MAX_JSON_VALUES, so the parsed row stays within a small multiple of this)."""


def row_too_large(size: str) -> InvalidInputError:
    """The error for a session's row of `size` (its bytes, said in words) past MAX_ROW_BYTES."""
    return InvalidInputError(
        "the session's row is too large to keep",
        [FieldViolation("body_json", f"{size}; a session keeps at most {MAX_ROW_BYTES:,} (MAX_ROW_BYTES)")],
    )


class Sessions:
    """The session and tool calls of one environment; see the module docstring."""

    def __init__(self, env: SimpleResourcesServer, store: SessionStore | None = None, tool_timeout_s: float = TOOL_TIMEOUT_S) -> None:
        self.env, self.tool_timeout_s = env, tool_timeout_s
        self.store = store if store is not None else SessionStore()  # (an empty store is falsy)
        self.tool_calls: Counter[str] = Counter()
        """Tool calls by outcome: ok, error (the tool raised), timeout."""
        self._sweeper: asyncio.Task[None] | None = None

    async def seed(self, row_json: str | bytes, client: str = "") -> Session:
        """A new session for the task row `row_json`, opened by `client` (Session.client), set
        up by the environment's seed_session."""
        if len(row_json) > MAX_ROW_BYTES:
            raise row_too_large(f"{len(row_json):,} bytes")
        row = await parse_bounded(_row, row_json, "body_json")
        await self.sweep()
        session = self.store.open(row, client)
        self._start_sweeper()
        stage = "seed_session"
        try:
            with self.store.working(session):  # not idle while it waits (for a slot, say)
                await hook(self.env, "open_session")(session)
                if hook(self.env, "answers_turns")():
                    stage = "reset"
                    session.reset = await hook(self.env, "run_reset")(session)
        except BaseException as exc:  # failed or cancelled: the session ends as any other does
            self.store.close(session.id)
            await asyncio.shield(self._closed(session))  # close_session frees what seed_session got before it failed
            if code_failed(exc) and not isinstance(exc, GymMetricsError):
                raise UserCodeError(stage, exc) from exc
            raise
        return session

    async def call_tool(self, session_id: str, name: str, arguments_json: str | bytes) -> tuple[str, bool, int]:
        """(the text the model reads, whether the tool failed, the HTTP status its route answered:
        0 for a tool that is not a route) of one tool call in a session."""
        session = self.store.get(session_id)
        if self.env.routes_tool_calls:  # the environment routes every name itself (a NeMo Gym app)
            await checked_items(arguments_json, "arguments_json")
            call = hook(self.env, "route_tool_call")(name, arguments_json, session)
        else:
            spec = find_tool(hook(self.env, "tools")(), name)
            arguments = await parse_bounded(spec.parse, arguments_json, "arguments_json")
            call = _ok(spec.run(self.env, arguments, session))
        try:
            with self.store.working(session):
                answer = await asyncio.wait_for(contained(f"tool {name!r}", call), self.tool_timeout_s)
        except asyncio.TimeoutError:
            self.tool_calls["timeout"] += 1
            return _error(f"tool {name!r} exceeded its {self.tool_timeout_s:g} s deadline"), True, 0
        except BaseException as exc:  # the model reads the error, as under NeMo Gym
            if not code_failed(exc):  # (the call's own cancellation)
                raise
            self.tool_calls["error"] += 1
            log.debug("tool %s raised in session %s", name, session_id, exc_info=exc)
            cause = exc.cause if isinstance(exc, UserCodeError) else exc
            return _error(f"{type(cause).__name__}: {cause}"), True, 0
        output, failed = answer[0], answer[1]
        self.tool_calls["error" if failed else "ok"] += 1
        return output, failed, answer[2] if len(answer) > 2 else 0

    async def step(self, session_id: str, response_json: str | bytes) -> StepResult:
        """One step of an environment that answers turns (_steps.py): the model's turn in, the
        environment's answer out; a step that ends the episode closes the session. The
        environment's own error is UserCodeError (the episode failed, as a verify that raises)."""
        session = self.store.get(session_id)
        if not hook(self.env, "answers_turns")():
            raise InvalidInputError(f"{self.env.server_name()} does not answer turns", [FieldViolation("session_id", "Step is for environments with `steps` (GetServerInfo)")])
        response = await parse_bounded(_action, response_json, "response_json")
        try:
            with self.store.working(session):
                result = await asyncio.wait_for(hook(self.env, "run_step")(session, response), self.tool_timeout_s)
        except asyncio.TimeoutError:  # a step that never answers held its session (and a one-at-a-time environment) for good
            await self.close(session_id)
            raise UserCodeError("step", TimeoutError(f"no answer within {self.tool_timeout_s:g} s (--tool-timeout)")) from None
        except GymMetricsError:
            raise
        except BaseException as exc:
            if not code_failed(exc):
                raise
            await self.close(session_id)
            raise UserCodeError("step", exc) from exc
        if result.terminated or result.truncated:
            await self.close(session_id)
        return result

    async def verify(self, session_id: str, body_json: Mapping[str, Any] | str | bytes) -> tuple[float, str]:
        """Verify the rollout in its session, then close the session (the episode is over). A
        body refused (InvalidInputError) leaves it open: the episode's state is not spent on a
        request that never reached verify; the client sends it again or closes the session."""
        session = self.store.get(session_id)
        try:
            with self.store.working(session):
                answer = await self.env.verify_json(body_json, session=session)
        except InvalidInputError:
            raise
        except BaseException:
            await self.close(session_id)
            raise
        await self.close(session_id)
        return answer

    async def close(self, session_id: str) -> bool:
        """Close a session (False: it was not live); the environment frees what it holds."""
        session = self.store.close(session_id)
        if session is None:
            return False
        await self._closed(session)
        return True

    async def sweep(self) -> int:
        """Close the sessions idle past the TTL; how many."""
        gone = self.store.sweep()
        for session in gone:
            await self._closed(session)
        return len(gone)

    async def _closed(self, session: Session) -> None:
        try:
            await hook(self.env, "end_session")(session)
        except BaseException as exc:  # one environment's teardown error is logged, never the caller's
            if not code_failed(exc):
                raise
            log.warning("close_session raised for session %s", session.id, exc_info=exc)
        session.state.clear()

    def _start_sweeper(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_while_live())

    async def _sweep_while_live(self) -> None:
        interval = max(0.05, min(self.store.idle_ttl_s / 2, 30.0))
        while len(self.store):
            await asyncio.sleep(interval)
            await self.sweep()

    async def aclose(self) -> None:
        """Close every live session (the server is stopping)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        for session_id in list(self.store.live_ids()):
            await self.close(session_id)


async def _ok(output: Awaitable[str]) -> tuple[str, bool]:
    return await output, False


def _row(row_json: str | bytes) -> Mapping[str, Any]:
    try:
        row = orjson.loads(row_json or b"{}")
    except orjson.JSONDecodeError as exc:
        raise InvalidInputError("the session's row is not valid JSON", [FieldViolation("body_json", str(exc))]) from None
    if not isinstance(row, dict):
        raise InvalidInputError("the session's row must be a JSON object", [FieldViolation("body_json", f"got {type(row).__name__}")])
    return row


def _action(response_json: str | bytes) -> dict[str, Any]:
    try:
        response = orjson.loads(response_json or b"null")
    except orjson.JSONDecodeError as exc:
        raise InvalidInputError("the step's action is not valid JSON", [FieldViolation("response_json", str(exc))]) from None
    return action_of(response)


def _error(message: str) -> str:
    return orjson.dumps({"error": message}).decode()
