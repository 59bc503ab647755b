"""Environment code that raises SystemExit or a CancelledError of its own is that call's failure:
the server answers it (a rollout's VERIFY_FAILED, a tool's error output, INTERNAL for a unary
verify) and serves every other call on. Before, `sys.exit()` in a verify or a tool ended the
whole server (exit code 0 for `SystemExit(0)`), and a CancelledError left its call unanswered
until the client's deadline, losing the other rollouts of its stream."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from gym_metrics import ResourcesClient
from gym_metrics._transport.client import RemoteCallError

from _transport_helpers import serve_process

ENV = textwrap.dedent(
    '''
    import asyncio
    import sys

    import pydantic

    from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, Session, SimpleResourcesServer, tool


    class Request(BaseVerifyRequest):
        how: str = ""


    class Nothing(pydantic.BaseModel):
        pass


    async def _exits() -> None:
        sys.exit(4)


    class Exits(SimpleResourcesServer):
        @tool
        async def run_code(self, args: Nothing, session: Session) -> str:
            """Model code run in-process that calls exit()."""
            sys.exit(0)

        @tool
        async def run_code_in_task(self, args: Nothing, session: Session) -> str:
            """The same, in a task of its own."""
            await asyncio.ensure_future(_exits())
            return "unreachable"

        async def verify(self, body: Request) -> BaseVerifyResponse:
            if body.how == "exit":
                sys.exit(3)
            if body.how == "exit_in_task":  # asyncio raises a task's SystemExit out of the loop
                await asyncio.ensure_future(_exits())
            if body.how == "cancelled":  # a future cancelled elsewhere (a shared client's request)
                raise asyncio.CancelledError("a library's own task was cancelled")
            return BaseVerifyResponse(**body.model_dump(), reward=1.0)
    '''
)


@pytest.fixture
def address(tmp_path: Path) -> object:
    (tmp_path / "exits.py").write_text(ENV)
    with serve_process(f"{tmp_path / 'exits.py'}:Exits") as served:
        yield served


def _body(how: str) -> dict[str, object]:
    return {"responses_create_params": {"input": "q"}, "response": {"output": []}, "how": how}


@pytest.mark.parametrize("how", ["exit", "exit_in_task"] + (["cancelled"] if sys.version_info >= (3, 11) else []))
async def test_a_verify_that_exits_or_cancels_itself_fails_alone(address: str, how: str) -> None:
    async with ResourcesClient(address) as client:
        with pytest.raises(RemoteCallError) as raised:
            await client.verify_text(_body(how))
        assert raised.value.code == "INTERNAL" and f"verify raised {'SystemExit' if 'exit' in how else 'CancelledError'}" in raised.value.details

        async def batches():  # type: ignore[no-untyped-def]
            yield "b", [(0, 0, _body(how)), (0, 1, _body("")), (1, 0, _body(""))]

        answers = [outcomes async for _, outcomes in client.verify_batches(batches())]
        assert [o.reward for o in answers[0]] == [0.0, 1.0, 1.0] and answers[0][0].error_kind == "verify_failed", answers
        reward, _ = await client.verify_text(_body(""))  # the server serves on
        assert reward == 1.0


@pytest.mark.parametrize("name", ["run_code", "run_code_in_task"])
async def test_a_tool_that_exits_is_an_error_the_model_reads(address: str, name: str) -> None:
    async with ResourcesClient(address) as client:
        session = await client.seed_session({})
        answer = await client.call_tool(session, name, {})
        assert answer.failed and "SystemExit" in answer.output
        await client.close_session(session)
        reward, _ = await client.verify_text(_body(""))
        assert reward == 1.0
