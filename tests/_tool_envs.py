"""A stateful tool environment for the tests of tools, sessions and the agent loop, importable by
path (`gym-metrics serve tests/_tool_envs.py:Counter`)."""

from __future__ import annotations

import pydantic

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, Session, SimpleResourcesServer, tool


class Add(pydantic.BaseModel):
    count: int


class Seed(pydantic.BaseModel):
    initial_count: int = 0


class CounterRequest(BaseVerifyRequest):
    expected_count: int


class CounterResponse(BaseVerifyResponse):
    final_count: int


class Counter(SimpleResourcesServer):
    """A counter per session: seeded from the row, changed by tools, checked by verify."""

    reducers = ["pass@1"]

    async def seed_session(self, session: Session, body: Seed) -> None:  # type: ignore[override]
        session.state["count"] = body.initial_count

    @tool
    async def increment_counter(self, args: Add, session: Session) -> dict[str, bool]:
        """Add `count` to the counter.

        (Not part of the description.)"""
        session.state["count"] += args.count
        return {"success": True}

    @tool
    async def get_counter_value(self, session: Session) -> dict[str, int]:
        """The counter's value."""
        return {"count": session.state["count"]}

    @tool
    async def explode(self) -> str:
        """A tool that always fails."""
        raise RuntimeError("the tool broke")

    async def verify(self, body: CounterRequest, session: Session | None = None) -> CounterResponse:  # type: ignore[override]
        count = session.state["count"] if session is not None else -1
        return CounterResponse(**body.model_dump(), reward=float(count == body.expected_count), final_count=count)
