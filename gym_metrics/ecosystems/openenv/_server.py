"""An OpenEnv `Environment` served unchanged as a gym-metrics environment that answers each turn.

Each session is one instance of the environment class, made and reset when the session opens
(`reset(**row["openenv"]["reset"])`, keyword arguments its `reset` does not take dropped, as
OpenEnv's server drops them), stepped once per action of each model turn (_turns.py), closed
with the session. As OpenEnv's server runs them: `step_async` / `reset_async` when the class
defines its own, else `step` / `reset` on a thread of the session's own (kept for a later
session once it closes; one thread shared by all sessions for a class that sets
REQUIRES_SINGLE_THREAD_EXECUTOR); a class without SUPPORTS_CONCURRENT_SESSIONS has one live
session at a time (the others wait to open).

A turn's reward is the sum of its actions' `observation.reward` (None counts 0), the episode's
the sum of its turns' (the collector adds them); `done` ends the episode (terminated): a step's,
or the reset's (a game already over when it opens: the first turn sends no action and ends it,
as OpenEnv's client stops at a done reset). Each turn's `info["openenv"]` lists what OpenEnv's
client would have received for its actions, and the turn that ends the episode adds the
environment's `state`. An action that does not fit the Action model is not sent: the model reads
why (the turn counts, its reward 0).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

import pydantic

from gym_metrics.ecosystems.openenv._kinds import action_type, is_mcp, is_openenv_environment, overrides
from gym_metrics.ecosystems.openenv._turns import Move, client_view, invalid, moves_of, observation_text
from gym_metrics.environments import ResetResult, Session, SimpleResourcesServer, StepResult
from gym_metrics.errors import FieldViolation, InvalidInputError

ROW_FIELD = "openenv"
ENDED = "the episode has ended"
IDLE_THREADS = 64


@dataclass
class _Live:
    """One session's environment instance and the thread its synchronous calls run on."""

    env: Any
    executor: ThreadPoolExecutor
    own_executor: bool
    tools: list[str] | None = None
    done: bool = False
    stuck: bool = False
    """A step of it ran past its deadline: its thread is still in it."""


class OpenEnvServer(SimpleResourcesServer):
    """Serves `environment` (an OpenEnv Environment class); see the module docstring. Made by
    `openenv_server(EnvClass)`, which `gym-metrics serve module:EnvClass` calls."""

    environment: ClassVar[type]
    action: ClassVar[type[pydantic.BaseModel]]

    def __init__(self) -> None:
        cls = self.environment
        self._mcp = is_mcp(cls)
        self._async_reset, self._async_step = overrides(cls, "reset_async"), overrides(cls, "step_async")
        self._shared = ThreadPoolExecutor(1, "openenv") if getattr(cls, "REQUIRES_SINGLE_THREAD_EXECUTOR", False) else None
        self._one_at_a_time = None if getattr(cls, "SUPPORTS_CONCURRENT_SESSIONS", False) else asyncio.Semaphore(1)
        self._idle: list[ThreadPoolExecutor] = []
        """Threads of closed sessions, kept for the next ones (starting a thread costs more than a step)."""

    async def reset(self, session: Session) -> ResetResult:
        kwargs = _reset_kwargs(session.row)
        if self._one_at_a_time is not None:
            await self._one_at_a_time.acquire()
        own = self._shared is None
        executor = self._shared or (self._idle.pop() if self._idle else ThreadPoolExecutor(1, "openenv-session"))
        live = _Live(None, executor, own_executor=own)
        session.state[ROW_FIELD] = live
        try:
            if self._async_reset:
                live.env = await self._on_thread(live, self.environment)
                observation = await live.env.reset_async(**_accepted(live.env.reset_async, kwargs))
            else:
                live.env, observation = await self._on_thread(live, functools.partial(_made_and_reset, self.environment, kwargs))
            live.done = bool(getattr(observation, "done", False))
            if self._mcp:
                live.tools = await self._tool_names(live)
        except BaseException:
            await asyncio.shield(self.close_session(session))  # (its slot and thread are freed either way)
            raise
        view = client_view(observation)
        return ResetResult(observation_text(observation, view), {ROW_FIELD: view})

    async def step(self, session: Session, response: dict[str, Any]) -> StepResult:
        live: _Live = session.state[ROW_FIELD]
        observation: str | None = None
        records: list[dict[str, Any]] = []
        outputs: list[dict[str, Any]] = []
        for move in moves_of(response, self.action, live.tools):
            answer = ENDED if live.done else await self._act(live, move, records)
            if move.call_id is not None:
                outputs.append({"call_id": move.call_id, "output": answer})
            else:
                observation = answer
        reward = sum((float(r["reward"] or 0.0) for r in records), 0.0)
        info: dict[str, Any] = {ROW_FIELD: records}
        if outputs:
            info["tool_outputs"] = outputs
        if live.done:
            info["state"] = _dumped(getattr(live.env, "state", None))
        return StepResult(observation, reward, live.done, False, info)

    async def _act(self, live: _Live, move: Move, records: list[dict[str, Any]]) -> str:
        if move.payload is None:
            return f"Invalid action: {move.error}"
        try:
            action = self.action.model_validate(move.payload)  # (an MCP environment's: CallToolAction)
        except pydantic.ValidationError as exc:
            return f"Invalid action: {invalid(exc, self.action)}"
        if self._async_step:
            result = await live.env.step_async(action)
        else:
            try:
                result = await self._on_thread(live, functools.partial(live.env.step, action))
            except asyncio.CancelledError:  # (past --tool-timeout) its thread runs on: nothing more goes to that thread
                live.stuck = True
                raise
        live.done = bool(result.done)
        view = client_view(result)
        records.append(view)
        return observation_text(result, view)

    async def _tool_names(self, live: _Live) -> list[str]:
        """An MCP environment's tools, as its ListToolsAction lists them."""
        from openenv.core.env_server.mcp_types import ListToolsAction

        listed = await (live.env.step_async(ListToolsAction()) if self._async_step else self._on_thread(live, functools.partial(live.env.step, ListToolsAction())))
        return [tool.name for tool in listed.tools]

    async def _on_thread(self, live: _Live, call: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(live.executor, call)

    async def close_session(self, session: Session) -> None:
        live = session.state.pop(ROW_FIELD, None)
        if not isinstance(live, _Live):
            return
        try:
            if live.env is not None and callable(getattr(live.env, "close", None)) and not live.stuck:
                await self._on_thread(live, live.env.close)
        finally:
            if live.stuck and not live.own_executor:  # the shared thread is held by a step that never ended: a new one
                self._shared = ThreadPoolExecutor(1, "openenv")
            if live.own_executor and not live.stuck and len(self._idle) < IDLE_THREADS:
                self._idle.append(live.executor)
            elif live.own_executor:
                live.executor.shutdown(wait=False)
            if self._one_at_a_time is not None:
                self._one_at_a_time.release()

    async def aclose(self) -> None:
        for executor in [*self._idle, *([self._shared] if self._shared else [])]:
            executor.shutdown(wait=False)
        self._idle.clear()


def _made_and_reset(environment: type, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """A new instance and its reset's observation, in one trip to the session's thread."""
    env = environment()
    return env, env.reset(**_accepted(env.reset, kwargs))


def openenv_server(environment: type, action: type[pydantic.BaseModel] | None = None) -> type[OpenEnvServer]:
    """The gym-metrics environment class serving OpenEnv's `environment` (its Action model read
    from the class unless given)."""
    chosen = action
    if chosen is None and not is_mcp(environment):
        chosen = action_type(environment)
    if chosen is None:
        from openenv.core.env_server.mcp_types import CallToolAction

        chosen = CallToolAction
    attrs = {"environment": environment, "action": chosen, "name": environment.__name__, "__module__": environment.__module__}
    return type(f"OpenEnv{environment.__name__}", (OpenEnvServer,), attrs)


def _reset_kwargs(row: Any) -> dict[str, Any]:
    given = row.get(ROW_FIELD) if hasattr(row, "get") else None
    if given is None:
        return {}
    if not isinstance(given, dict) or not isinstance(given.get("reset", {}), dict):
        raise InvalidInputError("bad OpenEnv settings", [FieldViolation(f"{ROW_FIELD}.reset", "expected an object of reset()'s keyword arguments")])
    return dict(given.get("reset", {}))


def _accepted(method: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments `method` takes (all of them when it takes **kwargs)."""
    params = inspect.signature(method).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return kwargs
    names = {p.name for p in params}
    return {k: v for k, v in kwargs.items() if k in names}


def _dumped(state: Any) -> Any:
    if isinstance(state, pydantic.BaseModel):
        return state.model_dump(mode="json", fallback=str)
    return state if isinstance(state, (dict, list, str, int, float, bool)) or state is None else str(state)


__all__ = ["ENDED", "ROW_FIELD", "OpenEnvServer", "adapt", "openenv_server"]


def adapt(obj: object) -> type[OpenEnvServer] | None:
    """`openenv_server(obj)` when `obj` is an OpenEnv Environment class, else None (what
    `resolve_server` asks of a `module:Name` that is not an environment class)."""
    return openenv_server(obj) if isinstance(obj, type) and is_openenv_environment(obj) else None
