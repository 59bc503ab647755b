"""SessionCalls: the session calls of many episodes multiplexed on one stream per connection.
Answers by id in any order, a call's failure is its answer and the stream goes on, and the
sessions of a stream that ends (the client went away) are closed at once."""

from __future__ import annotations

import asyncio
from typing import Any
import sys
from pathlib import Path

import pytest

from gym_metrics import ResourcesClient, tool
from gym_metrics._transport.client import RemoteCallError, ServerBusyError, SessionLostError
from gym_metrics.errors import InvalidInputError
from gym_metrics.testing import serve_environment

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import Counter  # noqa: E402

pytestmark = pytest.mark.timeout(60)
BODY = {"responses_create_params": {"input": "count"}, "response": {"output": []}}


async def test_many_episodes_share_one_stream() -> None:
    async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
        calls = client.session_stream()

        async def episode(n: int) -> float:
            session = await calls.seed_session({"initial_count": n})
            await asyncio.gather(*(calls.call_tool(session, "increment_counter", {"count": 1}) for _ in range(3)))
            value = await calls.call_tool(session, "get_counter_value", {})
            assert value.output == f'{{"count":{n + 3}}}'
            reward, response_json = await calls.verify_text({**BODY, "expected_count": n + 3}, session)
            assert '"final_count":' in response_json
            return reward

        assert await asyncio.gather(*(episode(n) for n in range(200))) == [1.0] * 200
        assert len(server.handler.sessions.store) == 0 and server.handler.sessions.store.opened == 200


async def test_more_calls_at_once_than_a_message_takes_go_in_several() -> None:
    """10,000 episodes seeded at once on one stream: more than a server takes in one message
    (MAX_CALLS_PER_MESSAGE, 4,096), so the client sends them in several (16,000 episodes in
    flight once failed every episode here)."""
    async with serve_environment(Counter(), max_sessions=20_000) as server, ResourcesClient(server.address) as client:
        calls = client.session_stream()
        sessions = await asyncio.gather(*(calls.seed_session({"initial_count": n}) for n in range(10_000)))
        assert len(set(sessions)) == 10_000 and len(server.handler.sessions.store) == 10_000
        assert all(await asyncio.gather(*(calls.close_session(s) for s in sessions)))


async def test_a_calls_failure_is_its_answer_and_the_stream_goes_on() -> None:
    async with serve_environment(Counter(), max_sessions=2) as server, ResourcesClient(server.address) as client:
        calls = client.session_stream()
        session = await calls.seed_session({"initial_count": 1})
        with pytest.raises(RemoteCallError) as unknown:
            await calls.call_tool(session, "nope", {})
        assert unknown.value.code == "NOT_FOUND" and "increment_counter" in unknown.value.details
        with pytest.raises(InvalidInputError, match="arguments.count"):
            await calls.call_tool(session, "increment_counter", {"count": "x"})
        broke = await calls.call_tool(session, "explode", {})
        assert broke.failed and "RuntimeError" in broke.output
        with pytest.raises(SessionLostError, match="no live session"):
            await calls.call_tool("not-a-session", "get_counter_value", {})
        await calls.seed_session({})
        with pytest.raises(ServerBusyError, match="max_sessions"):  # retry later, not a lost server
            await calls.seed_session({})
        assert (await calls.call_tool(session, "get_counter_value", {})).output == '{"count":1}'
        assert await calls.close_session(session) is True


async def test_the_sessions_of_a_stream_that_ends_are_closed_at_once() -> None:
    async with serve_environment(Counter()) as server:
        async with ResourcesClient(server.address) as client:
            calls = client.session_stream()
            for n in range(5):
                await calls.seed_session({"initial_count": n})
            assert len(server.handler.sessions.store) == 5
        for _ in range(100):  # the client closed: the server closes the stream's sessions
            if len(server.handler.sessions.store) == 0:
                break
            await asyncio.sleep(0.02)
        assert len(server.handler.sessions.store) == 0 and server.handler.sessions.store.expired == 0  # closed, not expired


async def test_a_session_whose_verify_was_refused_is_closed_with_its_stream() -> None:
    """A refused verify body leaves its session open (sent again, or closed): the stream had
    already let go of it, and, held from the idle TTL, it outlived the stream for good, until
    `max_sessions` of them refused every seed."""
    async with serve_environment(Counter(), max_sessions=3) as server:
        for _ in range(2):  # past max_sessions, were they kept
            async with ResourcesClient(server.address) as client:
                calls = client.session_stream()
                sessions = [await calls.seed_session({"initial_count": n}) for n in range(3)]
                for session in sessions:
                    with pytest.raises(InvalidInputError, match="expected_count"):
                        await calls.verify_text({"responses_create_params": {"input": []}, "response": {}, "expected_count": "x"}, session)
                assert (await calls.call_tool(sessions[0], "get_counter_value", {})).output == '{"count":0}'  # still open
            for _ in range(100):
                if len(server.handler.sessions.store) == 0:
                    break
                await asyncio.sleep(0.02)
            assert len(server.handler.sessions.store) == 0


class SlowCounter(Counter):
    @tool
    async def wait(self) -> str:
        """Never answers in time."""
        await asyncio.sleep(30)
        return "late"


async def test_a_server_gone_fails_the_waiting_calls_as_lost_sessions() -> None:
    async with serve_environment(SlowCounter()) as server:
        client = ResourcesClient(server.address)
        calls = client.session_stream()
        session = await calls.seed_session({})
        hanging = asyncio.ensure_future(calls.call_tool(session, "wait", {}))
        await asyncio.sleep(0.1)
        await server.stop(0)
        with pytest.raises(SessionLostError, match="session stream"):  # the episode must start again
            await asyncio.wait_for(hanging, 10)
        with pytest.raises(SessionLostError):  # a new stream is opened, and fails the same way
            await asyncio.wait_for(calls.call_tool(session, "get_counter_value", {}), 10)
        await client.close()


async def test_a_client_that_reads_no_answers_holds_bounded_memory() -> None:
    """Calls stop being started once MAX_UNSENT_BYTES of answers wait to be sent: a client
    that sends calls and reads nothing made every 80-byte call pin its 1 MiB answer (calls
    already running when the budget fills still answer: at most MAX_IN_FLIGHT of them)."""
    from gym_metrics._transport.server import _session_calls as stream
    from gym_metrics.v1 import resources_pb2 as pb

    class Big(Counter):
        answered = 0

        @tool
        async def big(self) -> str:
            Big.answered += 1
            return "y" * (1 << 20)

    async with serve_environment(Big()) as server:
        handler = server.handler
        session = (await handler.sessions.seed(b'{"initial_count": 0}')).id

        async def requests():  # type: ignore[no-untyped-def]  (a call every 5 ms, as episodes send them)
            for n in range(200):
                yield pb.SessionCallsRequest(calls=[pb.SessionCall(id=n, call_tool=pb.CallToolRequest(session_id=session, name="big", arguments_json="{}"))])
                await asyncio.sleep(0.005)

        answers = stream.session_calls(handler, requests())
        first = await answers.__anext__()  # the first answers out; then nothing read
        await asyncio.sleep(1.5)
        limit = stream.MAX_UNSENT_BYTES // (1 << 20) + len(first.answers) + 2
        assert Big.answered <= limit, f"{Big.answered} calls answered while unread (at most {limit})"
        await answers.aclose()


async def test_calls_are_packed_by_bytes_and_one_no_message_carries_fails_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls that fit each went into one message past the limit (two tool calls of 35 MB: 73 MB),
    which broke the stream and every episode on it; and a call past the limit alone (a 78 MB
    trajectory to verify) broke it the same way, again on each retry. Now each message stays
    under the limit, and a call no message carries fails alone, naming its size; the stream and
    its other calls go on. (Scaled down: a 1 MiB server and client limit.)"""
    from gym_metrics._transport.client import _session_stream

    monkeypatch.setattr(_session_stream, "MESSAGE_BYTES", (1 << 20) - (64 << 10))
    pad = "x" * (600 << 10)
    async with serve_environment(Counter(), max_message_bytes=1 << 20) as server, ResourcesClient(server.address) as client:
        calls = client.session_stream()
        sessions = await asyncio.gather(*(calls.seed_session({"initial_count": n}) for n in range(3)))
        outputs = await asyncio.gather(*(calls.call_tool(s, "increment_counter", {"count": 1, "pad": pad}) for s in sessions), return_exceptions=True)
        assert all(isinstance(o, InvalidInputError) and "pad: Extra inputs" in str(o) for o in outputs), outputs  # each reached the tool
        with pytest.raises(InvalidInputError, match=r"the rollout to verify is 1\.2 MB of JSON, past the"):
            await calls.verify_text({**BODY, "expected_count": 0, "pad": pad * 2}, sessions[0])
        assert (await calls.verify_text({**BODY, "expected_count": 1}, sessions[1]))[0] == 1.0
        assert await calls.close_session(sessions[0]) and await calls.close_session(sessions[2])


class SlowVerify(Counter):
    async def verify(self, body: Any, session: Any = None) -> Any:  # type: ignore[override]
        await asyncio.sleep(30)
        return await super().verify(body, session)


async def test_closing_a_stream_waits_for_a_slow_call_only_so_long() -> None:
    """The server ends a stream once the calls it runs are answered: closing one with a 30 s
    verify in flight waited for it (Ctrl-C on collect hung until the verify ended). It waits
    CLOSE_WAIT_S, then cancels; the waiting call fails as a lost session."""
    from gym_metrics._transport.client._session_stream import CLOSE_WAIT_S

    async with serve_environment(SlowVerify()) as server, ResourcesClient(server.address) as client:
        calls = client.session_stream()
        session = await calls.seed_session({"initial_count": 0})
        verifying = asyncio.ensure_future(calls.verify_text({**BODY, "expected_count": 0}, session))
        await asyncio.sleep(0.3)
        started = asyncio.get_running_loop().time()
        await calls.aclose()
        took = asyncio.get_running_loop().time() - started
        with pytest.raises(SessionLostError):
            await verifying
    assert CLOSE_WAIT_S - 0.5 < took < CLOSE_WAIT_S + 3
