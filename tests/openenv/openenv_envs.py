"""OpenEnv environments written here against OpenEnv's own API (openenv 0.10.0), for the OpenEnv
tests: each is what an OpenEnv author writes, served by gym-metrics unchanged and by OpenEnv's
own server for the reference.

- LockEnvironment: typed actions (`dial`, `value`), a combination drawn from reset's seed,
  0.25 per dial newly right, -0.05 per wrong try, done when open or after MAX_TRIES; reset with
  `open=True`, done at once (a game over before its first move).
- NotesEnvironment: an MCP environment (FastMCP tools `add_note`, `count_notes`).
- SoloEnvironment: no concurrent sessions; counts how many instances are live at once.
- AsyncCounter: its own `reset_async` / `step_async`, as OpenEnv's server prefers them.
"""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any, Optional

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

MAX_TRIES = 6


class LockAction(Action):
    dial: int = Field(..., ge=0, le=2, description="which dial to turn (0-2)")
    value: int = Field(..., ge=0, le=9, description="the digit to set it to")


class LockObservation(Observation):
    opened: list[bool] = Field(default_factory=list)
    message: str = ""


class LockState(State):
    combination: list[int] = Field(default_factory=list)
    tries: int = 0


class LockEnvironment(Environment[LockAction, LockObservation, LockState]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = LockState()

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> LockObservation:
        rng = random.Random(seed)
        self._state = LockState(episode_id=episode_id or "lock", combination=[rng.randrange(10) for _ in range(3)])
        self._opened = [bool(kwargs.get("open"))] * 3
        return LockObservation(opened=list(self._opened), message=f"Three dials, digits 0-9. {kwargs.get('hint', '')}".strip(),
                               done=all(self._opened))  # fmt: skip

    def step(self, action: LockAction, timeout_s: Optional[float] = None, **kwargs: Any) -> LockObservation:
        self._state.step_count += 1
        self._state.tries += 1
        right = self._state.combination[action.dial] == action.value
        reward = 0.25 if right and not self._opened[action.dial] else (0.0 if right else -0.05)
        self._opened[action.dial] = self._opened[action.dial] or right
        done = all(self._opened) or self._state.tries >= MAX_TRIES
        message = "click" if right else ("too low" if action.value < self._state.combination[action.dial] else "too high")
        return LockObservation(opened=list(self._opened), message=message, reward=reward, done=done,
                               metadata={"tries": self._state.tries})  # fmt: skip

    @property
    def state(self) -> LockState:
        return self._state


class SoloEnvironment(LockEnvironment):
    """One session at a time (OpenEnv's default): counts live instances."""

    SUPPORTS_CONCURRENT_SESSIONS = False
    live = 0
    most = 0
    lock = threading.Lock()

    def __init__(self) -> None:
        super().__init__()
        with SoloEnvironment.lock:
            SoloEnvironment.live += 1
            SoloEnvironment.most = max(SoloEnvironment.most, SoloEnvironment.live)

    def close(self) -> None:
        with SoloEnvironment.lock:
            SoloEnvironment.live -= 1


class CountAction(Action):
    add: int = 1


class CountObservation(Observation):
    total: int = 0


class AsyncCounter(Environment):
    """Async reset and step; reward is the new total, done at 3 or more."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()
        self.total = 0

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> CountObservation:
        raise AssertionError("the async reset must be used")

    async def reset_async(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> CountObservation:
        await asyncio.sleep(0)
        self.total = 0
        return CountObservation(total=0)

    def step(self, action: CountAction, timeout_s: Optional[float] = None, **kwargs: Any) -> CountObservation:
        raise AssertionError("the async step must be used")

    async def step_async(self, action: CountAction, timeout_s: Optional[float] = None, **kwargs: Any) -> CountObservation:
        await asyncio.sleep(0)
        self.total += action.add
        self._state.step_count += 1
        return CountObservation(total=self.total, reward=float(self.total), done=self.total >= 3)

    @property
    def state(self) -> State:
        return self._state


def notes_environment() -> type:
    """An MCP environment (needs fastmcp, which openenv brings), made on first use."""
    from fastmcp import FastMCP
    from openenv.core.env_server.mcp_environment import MCPEnvironment

    class NotesEnvironment(MCPEnvironment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            mcp = FastMCP("notes")
            notes: list[str] = []

            @mcp.tool
            def add_note(text: str) -> str:
                """Keep a note."""
                notes.append(text)
                return f"noted ({len(notes)})"

            @mcp.tool
            def count_notes() -> dict:
                """How many notes are kept."""
                return {"count": len(notes)}

            super().__init__(mcp)
            self._state = State()

        def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> Observation:
            self._state = State(episode_id=episode_id)
            return Observation(done=False, reward=0.0, metadata={"status": "ready"})

        def _step_impl(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
            return Observation(done=False, reward=0.0, metadata={"error": f"unknown action {type(action).__name__}"})

        @property
        def state(self) -> State:
            return self._state

    return NotesEnvironment


class BaseActionLock(Environment):
    """A lock whose step names only OpenEnv's base Action (as coding_env's does), and no typed
    Environment base: the Action class has to be given (`serve --openenv-action`)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self.lock = LockEnvironment()

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> LockObservation:
        return self.lock.reset(seed, episode_id, **kwargs)

    def step(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> LockObservation:
        return self.lock.step(action, timeout_s, **kwargs)  # type: ignore[arg-type]

    @property
    def state(self) -> LockState:
        return self.lock.state
