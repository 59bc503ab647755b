"""Eager starts keep task identity for code that needs it (httpx / anyio cancel scopes)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from gym_metrics._util.eager import start_eagerly

pytestmark = pytest.mark.every_python  # (see pyproject: what differs between CPython versions)


async def needs_own_task() -> str:
    """Like an anyio cancel scope: the task that entered must be the task that leaves."""
    entered = asyncio.current_task()
    await asyncio.sleep(0)
    assert asyncio.current_task() is entered, "resumed in a different task"
    return "ok"


async def pure() -> int:
    return 7


@pytest.mark.parametrize("trusted", [False, True] if sys.version_info >= (3, 12) else [False])
async def test_untrusted_or_modern_eager_start_keeps_task_identity(trusted: bool) -> None:
    done, value = start_eagerly(needs_own_task(), trusted=trusted)
    assert not done
    assert await value == "ok"  # type: ignore[misc]


async def test_a_coroutine_that_never_suspends_needs_no_task_when_trusted() -> None:
    done, value = start_eagerly(pure(), trusted=True)
    assert done and value == 7


async def test_verify_with_a_cancel_scope_survives_the_stream(serve_env) -> None:  # type: ignore[no-untyped-def]
    """An environment whose verify uses asyncio.timeout-like task checks works over VerifyStream."""
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
    from gym_metrics.environments import SimpleResourcesServer

    class TaskBound(SimpleResourcesServer):
        async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
            await needs_own_task()
            return BaseVerifyResponse(reward=1.0)

    _, channel = await serve_env(TaskBound())
    client = ResourcesClient(channel)
    outcomes = [o async for o in client.verify_stream([(i, 0, {}) for i in range(20)], batch_size=8)]
    assert [o.error_kind for o in outcomes] == [None] * 20 and all(o.reward == 1.0 for o in outcomes)
