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

pytestmark = pytest.mark.every_python  # (see pyproject: what differs between CPython versions)

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
        async def interrupt(self, args: Nothing, session: Session) -> str:
            """Model code that raises KeyboardInterrupt."""
            raise KeyboardInterrupt("from the code")

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
            if body.how == "interrupt":  # a stray KeyboardInterrupt ended the server (asyncio raises it out of the loop)
                raise KeyboardInterrupt("from the code")
            if body.how == "generator_exit":  # left the stream unanswered for good
                raise GeneratorExit()
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


RAISED = {"exit": "SystemExit", "exit_in_task": "SystemExit", "interrupt": "KeyboardInterrupt", "generator_exit": "GeneratorExit",
          "cancelled": "CancelledError"}  # fmt: skip


@pytest.mark.parametrize("how", ["exit", "exit_in_task", "interrupt", "generator_exit"] + (["cancelled"] if sys.version_info >= (3, 11) else []))
async def test_a_verify_that_exits_or_cancels_itself_fails_alone(address: str, how: str) -> None:
    async with ResourcesClient(address) as client:
        with pytest.raises(RemoteCallError) as raised:
            await client.verify_text(_body(how))
        assert raised.value.code == "INTERNAL" and f"verify raised {RAISED[how]}" in raised.value.details

        async def batches():  # type: ignore[no-untyped-def]
            yield "b", [(0, 0, _body(how)), (0, 1, _body("")), (1, 0, _body(""))]

        answers = [outcomes async for _, outcomes in client.verify_batches(batches())]
        assert [o.reward for o in answers[0]] == [0.0, 1.0, 1.0] and answers[0][0].error_kind == "verify_failed", answers
        reward, _ = await client.verify_text(_body(""))  # the server serves on
        assert reward == 1.0


@pytest.mark.parametrize("name", ["run_code", "run_code_in_task", "interrupt"])
async def test_a_tool_that_exits_is_an_error_the_model_reads(address: str, name: str) -> None:
    async with ResourcesClient(address) as client:
        session = await client.seed_session({})
        answer = await client.call_tool(session, name, {})
        assert answer.failed and ("KeyboardInterrupt" if name == "interrupt" else "SystemExit") in answer.output
        await client.close_session(session)
        reward, _ = await client.verify_text(_body(""))
        assert reward == 1.0


STUCK = textwrap.dedent(
    '''
    import asyncio
    import time

    from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer


    class Stuck(SimpleResourcesServer):
        async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
            await asyncio.to_thread(time.sleep, 1000)  # blocking work in a thread, as the timeout's message advises
            return BaseVerifyResponse(**body.model_dump(), reward=1.0)
    '''
)


async def test_a_sigtermed_server_ends_though_a_verifys_thread_is_stuck(tmp_path: Path) -> None:
    """It said "stopped" and never ended: Python joins every thread at exit."""
    import re
    import signal
    import subprocess
    import time

    (tmp_path / "stuck.py").write_text(STUCK)
    args = ["serve", f"{tmp_path / 'stuck.py'}:Stuck", "--port", "0", "--verify-timeout", "0.5", "--grace", "1"]
    proc = subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", *args], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        line = ""
        while not (found := re.search(r"listening on (\S+:\d+)", line)):
            line = proc.stderr.readline()
            assert line, "serve did not start"
        async with ResourcesClient(found.group(1)) as client:
            with pytest.raises(RemoteCallError):
                await client.verify_text(_body(""))
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert proc.wait(timeout=30) == 0 and time.monotonic() - started < 10
        assert "1 thread(s) of the environment's code still running (asyncio_0): exiting without them" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
