"""Tools and per-rollout sessions over a real gRPC server: seeding from the task row, tool calls
that share the session's state, verify in the session (which ends it), and every failure the
model or the client can cause: unknown session or tool, bad arguments, a tool that raises or
hangs, too many sessions, sessions abandoned by a client that went away."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from gym_metrics import ResourcesClient, Session, tool
from gym_metrics._transport.client import RemoteCallError, ServerUnavailableError, SessionLostError
from gym_metrics.environments import SessionStore
from gym_metrics.errors import InvalidInputError, NotFoundError, OverloadedError
from gym_metrics.testing import serve_environment

sys.path.insert(0, str(Path(__file__).parents[1]))
import _tool_envs as tool_envs  # noqa: E402


class Counter(tool_envs.Counter):
    """The shared counter, with its closed sessions noted and a tool that hangs."""

    closed: list[str] = []

    async def close_session(self, session: Session) -> None:
        Counter.closed.append(session.id)

    @tool(name="wait")
    async def slow(self) -> str:
        await asyncio.sleep(30)
        return "late"

    @tool
    async def history(self) -> dict[str, object]:
        return {"steps": [tool_envs.Add(count=1)], "done": asyncio.Event()}


ROW = {"initial_count": 3, "expected_count": 6}
BODY = {"responses_create_params": {"input": "add 1 then 2"}, "response": {"output": []}, "expected_count": 6}


async def test_a_session_carries_state_from_seed_through_tools_to_verify() -> None:
    async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
        info = await client.server_info()
        assert [t["name"] for t in info.tools] == ["increment_counter", "get_counter_value", "explode", "wait", "history"]
        assert info.tools[0]["description"] == "Add `count` to the counter."
        assert info.tools[0]["parameters"]["properties"]["count"]["type"] == "integer"
        session = await client.seed_session(ROW)
        assert (await client.call_tool(session, "increment_counter", {"count": 1})).output == '{"success":true}'
        await asyncio.gather(*(client.call_tool(session, "increment_counter", '{"count": 1}') for _ in range(2)))
        assert (await client.call_tool(session, "get_counter_value", "{}")).output == '{"count":6}'
        other = await client.seed_session({"initial_count": 0})
        assert (await client.call_tool(other, "get_counter_value", {})).output == '{"count":0}'  # its own state
        verified = await client.verify(BODY, session_id=session)
        assert verified["reward"] == 1.0
        assert session in Counter.closed and len(server.handler.sessions.store) == 1  # verify ended it
        with pytest.raises(SessionLostError, match="no live session"):  # the episode must start again
            await client.call_tool(session, "get_counter_value", {})
        assert await client.close_session(other) is True and await client.close_session(other) is False


async def test_a_verify_body_refused_before_verify_ran_leaves_the_session_open() -> None:
    """The episode's state is not spent on a request that never reached verify: the corrected
    body verifies in the same session."""
    async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
        session = await client.seed_session(ROW)
        await client.call_tool(session, "increment_counter", {"count": 3})
        with pytest.raises(InvalidInputError, match="expected_count"):
            await client.verify({**BODY, "expected_count": "six"}, session_id=session)
        assert session in server.handler.sessions.store and session not in Counter.closed
        assert (await client.verify(BODY, session_id=session))["reward"] == 1.0
        assert session in Counter.closed


async def test_what_the_model_gets_wrong_is_named() -> None:
    async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
        session = await client.seed_session(ROW)
        with pytest.raises(RemoteCallError) as unknown:
            await client.call_tool(session, "decrement_counter", {})
        assert unknown.value.code == "NOT_FOUND" and "increment_counter" in unknown.value.details  # lists the tools
        with pytest.raises(InvalidInputError) as bad:
            await client.call_tool(session, "increment_counter", {"count": "many"})
        assert "arguments_json.count" in str(bad.value)  # the gRPC field that carries them
        with pytest.raises(InvalidInputError):
            await client.call_tool(session, "increment_counter", "{not json")
        with pytest.raises(InvalidInputError) as misspelt:  # was dropped, the call running with the default: a wrong call scored right
            await client.call_tool(session, "increment_counter", {"count": 1, "cuont": 2})
        assert "arguments_json.cuont" in str(misspelt.value) and "Extra inputs are not permitted" in str(misspelt.value)
        info = await client.server_info()
        assert info.tools[0]["parameters"]["additionalProperties"] is False  # the model is told
        with pytest.raises(InvalidInputError) as seed:
            await client.seed_session({"initial_count": "three"})
        assert "initial_count" in str(seed.value)


async def test_a_tool_that_raises_or_hangs_answers_its_error_to_the_model() -> None:
    async with serve_environment(Counter(), tool_timeout_s=0.2) as server, ResourcesClient(server.address) as client:
        session = await client.seed_session(ROW)
        broke = await client.call_tool(session, "explode", {})
        assert broke.failed and "RuntimeError: the tool broke" in broke.output
        late = await client.call_tool(session, "wait", {})
        assert late.failed and "deadline" in late.output
        assert (await client.call_tool(session, "get_counter_value", {})).output == '{"count":3}'  # the session goes on
        assert server.handler.sessions.tool_calls == {"error": 1, "timeout": 1, "ok": 1}


async def test_a_tools_answer_reaches_the_model_as_json_or_fails_naming_what_json_cannot_hold() -> None:
    class Plain(Counter):
        @tool
        async def history(self) -> dict[str, object]:  # models in a list, a set, bytes: as FastAPI answers them
            return {"steps": [tool_envs.Add(count=1), tool_envs.Add(count=2)], "seen": {3}, "raw": b"ok"}

    async with serve_environment(Plain()) as server, ResourcesClient(server.address) as client:
        assert (await client.call_tool(await client.seed_session(ROW), "history", {})).output == '{"steps":[{"count":1},{"count":2}],"seen":[3],"raw":"ok"}'
    async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
        held = await client.call_tool(await client.seed_session(ROW), "history", {})  # an Event is no JSON: not its repr
        assert held.failed and "TypeError: the tool returned what JSON cannot hold" in held.output and "Event" in held.output


async def test_sessions_are_bounded_and_abandoned_ones_are_freed() -> None:
    async with serve_environment(Counter(), max_sessions=3, session_ttl_s=0.3) as server, ResourcesClient(server.address) as client:
        ids = [await client.seed_session(ROW) for _ in range(3)]
        with pytest.raises(ServerUnavailableError, match="RESOURCE_EXHAUSTED.*max_sessions"):  # retry later
            await client.seed_session(ROW)
        store = server.handler.sessions.store
        for _ in range(40):  # the client went away: the sweep closes them after the TTL
            if len(store) == 0:
                break
            await asyncio.sleep(0.05)
        assert len(store) == 0 and set(ids) <= set(Counter.closed)
        await client.seed_session(ROW)  # room again


def test_ten_thousand_abandoned_sessions_stay_bounded() -> None:
    now = [0.0]
    store = SessionStore(max_sessions=1_000, idle_ttl_s=100.0, clock=lambda: now[0])
    opened = 0
    for _ in range(10_000):
        now[0] += 1
        store.sweep()
        try:
            store.open({"initial_count": 1})
            opened += 1
        except OverloadedError:
            pass
        assert len(store) <= 1_000
    assert opened == 10_000 and len(store) == 101  # the last TTL's worth are still live
    now[0] += 101
    assert len(store.sweep()) == 101 and len(store) == 0
    with pytest.raises(NotFoundError):
        store.get("nope")


def test_a_session_held_by_its_stream_never_idles_out() -> None:
    """A stream's episode may wait on a slow policy longer than the TTL: its session expired and
    the episode was read as a lost server (restarted, then the run failed). Its stream closes it."""
    now = [0.0]
    store = SessionStore(max_sessions=10, idle_ttl_s=1.0, clock=lambda: now[0])
    held, loose, later = store.open({"n": 1}), store.open({"n": 2}), store.open({"n": 3})
    held.held = True
    now[0] += 0.5
    store.get(later.id)
    now[0] += 5.0
    assert [s.id for s in store.sweep()] == [loose.id, later.id]
    assert store.get(held.id) is held and held.id in store and len(store) == 1
    with pytest.raises(NotFoundError):
        store.get(loose.id)


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_ten_thousand_sessions_of_clients_that_went_away_are_freed() -> None:
    """10,000 sessions seeded over gRPC and abandoned: none is lost track of, the sweep frees
    them all after the TTL, and the server's memory stays bounded meanwhile."""
    import resource

    async with serve_environment(Counter(), max_sessions=10_000, session_ttl_s=1.0) as server:
        store = server.handler.sessions.store
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        async with ResourcesClient(server.address) as client:
            for start in range(0, 10_000, 500):  # bounded concurrency: 500 calls at a time
                await asyncio.gather(*(client.seed_session({"initial_count": i}) for i in range(start, start + 500)))
        assert store.opened == 10_000
        grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        for _ in range(100):
            if len(store) == 0:
                break
            await asyncio.sleep(0.1)
        assert len(store) == 0 and store.expired == 10_000
    assert grown_kib < 200 * 1024, f"{grown_kib} KiB for 10,000 sessions"


def test_a_bad_tool_or_constructor_is_refused_before_the_server_binds() -> None:
    """A tool whose signature cannot be served passed `serve` and failed every client's first
    GetServerInfo; two methods of a class named alike kept one without a word; a name policy
    APIs refuse was published; a constructor that raised was an internal error. Each is now one
    InvalidInputError naming the class and what is wrong, before the port is bound."""
    import pydantic

    from gym_metrics import SimpleResourcesServer
    from gym_metrics._transport.server import load_env

    class Numbers(pydantic.BaseModel):
        a: int

    class TwoModels(SimpleResourcesServer):
        @tool
        async def add(self, a: Numbers, b: Numbers) -> int:
            return 0

    class SameName(SimpleResourcesServer):
        @tool(name="same")
        async def first(self) -> str:
            return "a"

        @tool(name="same")
        async def second(self) -> str:
            return "b"

    class Spaced(SimpleResourcesServer):
        @tool(name="has space/and-slash")
        async def spaced(self) -> str:
            return ""

    class Raises(SimpleResourcesServer):
        def __init__(self) -> None:
            raise RuntimeError("no database")

    for cls, words in (
        (TwoModels, "tool TwoModels.add: one arguments model and `session` at most"),
        (SameName, "tool SameName: first and second are both named 'same'"),
        (Spaced, "name 'has space/and-slash' must be 1-64 letters, digits, _ or -"),
        (Raises, "Raises(): RuntimeError: no database"),
    ):
        with pytest.raises(InvalidInputError) as caught:
            load_env(cls)
        assert words in str(caught.value), str(caught.value)


def test_registering_another_class_under_a_taken_name_warns() -> None:
    from gym_metrics import SimpleResourcesServer
    from gym_metrics.environments import register_server, resolve_server

    @register_server("test-taken-name")
    class First(SimpleResourcesServer):
        pass

    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        register_server("test-taken-name")(First)  # the same class again (a module imported twice): quiet
    assert not seen
    with pytest.warns(UserWarning, match=r"@register_server\('test-taken-name'\): .*Second replaces .*First"):

        @register_server("test-taken-name")
        class Second(SimpleResourcesServer):
            pass

    assert resolve_server("test-taken-name") is Second
