"""A stateful tool environment for the tests of tools, sessions and the agent loop, importable by
path (`gym-metrics serve tests/_tool_envs.py:Counter`)."""

from __future__ import annotations

import asyncio

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

    async def seed_session(self, session: Session) -> None:
        session.state["count"] = session.row_as(Seed).initial_count

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


class Write(pydantic.BaseModel):
    x: int


class Register(SimpleResourcesServer):
    """One value per session; `write` takes a while, so a `read` running beside it (not after
    it) sees the old value."""

    async def seed_session(self, session: Session) -> None:
        session.state["x"] = 0

    @tool
    async def write(self, args: Write, session: Session) -> dict[str, bool]:
        """Set x (slowly)."""
        await asyncio.sleep(0.5)  # a read running beside it answers long before (a loaded CI machine included)
        session.state["x"] = args.x
        return {"ok": True}

    @tool
    async def read(self, session: Session) -> dict[str, int]:
        """The value of x."""
        return {"x": session.state["x"]}

    async def verify(self, body: BaseVerifyRequest, session: Session | None = None) -> BaseVerifyResponse:  # type: ignore[override]
        return BaseVerifyResponse(**body.model_dump(), reward=float(session is not None and session.state["x"] == 5))


class Code(pydantic.BaseModel):
    code: str


class PythonTool(SimpleResourcesServer):
    """A Python interpreter per session, in the sandbox: the model's code keeps its variables
    from call to call; the session's end stops the interpreter."""

    def __init__(self) -> None:
        self.sandbox()  # now: a host that cannot isolate refuses to start

    async def seed_session(self, session: Session) -> None:
        from gym_metrics.sandbox import PythonInterpreter

        session.state["python"] = await PythonInterpreter.start(self.sandbox(), client=session.client)

    async def close_session(self, session: Session) -> None:
        await session.state["python"].close()

    @tool
    async def run_python(self, args: Code, session: Session) -> dict[str, object]:
        """Run Python code; variables are kept between calls. Answers what it printed and its error."""
        cell = await session.state["python"].execute(args.code, timeout_s=5)
        return {"stdout": cell.stdout, "stderr": cell.stderr, "error": cell.error}

    async def verify(self, body: BaseVerifyRequest, session: Session | None = None) -> BaseVerifyResponse:  # type: ignore[override]
        return BaseVerifyResponse(**body.model_dump(), reward=0.0)


class Padded(pydantic.BaseModel):
    count: int
    pad: list[dict[str, object]] = []
    """Room for a large document in a tool's arguments (tests/transport/test_adversarial_requests.py)."""


class PaddedCounter(Counter):
    """The counter with a tool whose arguments may carry a large list."""

    @tool
    async def add_padded(self, args: Padded, session: Session) -> dict[str, bool]:
        session.state["count"] += args.count
        return {"success": True}
