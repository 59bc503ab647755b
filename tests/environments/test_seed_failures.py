"""A seed that fails or is cancelled ends its session as any other end does (issue 36, item 4):
close_session frees what seed_session took before it stopped, and the session is gone."""

from __future__ import annotations

import asyncio

import pytest

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer
from gym_metrics.environments import Sessions, Session
from gym_metrics.errors import UserCodeError

pytestmark = pytest.mark.timeout(30)


class Leaky(SimpleResourcesServer):
    """Takes a resource in seed_session, then fails (or waits); close_session gives it back."""

    def __init__(self, then: str) -> None:
        self.then, self.held, self.seeding = then, set[str](), asyncio.Event()

    async def seed_session(self, session: Session) -> None:
        self.held.add(session.id)
        self.seeding.set()
        if self.then == "raise":
            raise RuntimeError("the row's sandbox would not start")
        await asyncio.sleep(3600)

    async def close_session(self, session: Session) -> None:
        self.held.discard(session.id)

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward=0.0)


async def test_a_seed_that_raises_frees_what_it_took() -> None:
    env = Leaky("raise")
    sessions = Sessions(env)
    with pytest.raises(UserCodeError, match="seed_session"):
        await sessions.seed(b"{}")
    assert env.held == set() and len(sessions.store) == 0


async def test_a_cancelled_seed_frees_what_it_took() -> None:
    env = Leaky("wait")
    sessions = Sessions(env)
    seeding = asyncio.ensure_future(sessions.seed(b"{}"))
    await env.seeding.wait()
    seeding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await seeding
    assert env.held == set() and len(sessions.store) == 0
    await sessions.aclose()
