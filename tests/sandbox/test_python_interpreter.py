"""A sandboxed Python interpreter kept between a session's tool calls: its namespace lasts from
call to call, a timeout or a limit stops it (and later calls say so), and the session's end
(CloseSession, verify, or the idle sweep) kills it and removes its directory."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.environments import close_sandbox
from gym_metrics.sandbox import Limits, Pool, Program, PythonInterpreter
from gym_metrics.testing import serve_environment

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import PythonTool  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("sandbox")]


async def test_the_namespace_is_kept_and_output_comes_in_order() -> None:
    pool = Pool(size=2)
    session = await PythonInterpreter.start(pool)
    try:
        assert (await session.execute("x = 41")).error is None
        cell = await session.execute(
            "print(x + 1)\nimport subprocess, sys\nsubprocess.run([sys.executable, '-c', 'print(\"child\")'])\nprint('after')"
        )
        assert (cell.stdout, cell.error) == ("42\nchild\nafter\n", None)
        broken = await session.execute("def f():\n    return 1 / 0\nf()")
        assert broken.error is not None and "ZeroDivisionError" in broken.error and "_DRIVER" not in broken.error
        assert "EOFError" in str((await session.execute("input()")).error)  # stdin is not the driver's requests
        assert (await session.execute("print(x)")).stdout == "41\n"  # still alive after errors
        flood = await session.execute("print('y' * 200_000)")
        assert flood.truncated and len(flood.stdout) == 65_536
    finally:
        await session.close()
        await pool.aclose()
    assert not session._run.work.exists()


async def test_a_timeout_or_a_limit_stops_the_interpreter() -> None:
    pool = Pool(size=2)
    slow = await PythonInterpreter.start(pool)
    greedy = await PythonInterpreter.start(pool, Limits(wall_s=60, cpu_s=60, memory_mb=256))
    try:
        stopped = await slow.execute("import time\ntime.sleep(30)", timeout_s=0.5)
        assert stopped.stopped and "stopped after 0.5 s" in str(stopped.error)
        after = await slow.execute("print(1)")
        assert after.stopped and "its state is gone" in str(after.error)
        assert not slow.alive and not slow._run.work.exists()
        await greedy.execute("import os\nkeep = []")
        hog = await greedy.execute("keep.append(bytearray(1 << 30))")
        assert "MemoryError" in str(hog.error)  # a Python MemoryError is the cell's error: the process lives on
        assert (await greedy.execute("print(len(keep))")).stdout == "0\n"
        killed = await greedy.execute("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
        assert killed.stopped and "ended by" in str(killed.error)
    finally:
        await slow.close()
        await greedy.close()
        await pool.aclose()


async def test_each_session_has_its_interpreter_until_it_ends() -> None:
    env = PythonTool()
    pool = env.sandbox()
    assert isinstance(pool, Pool)  # the default provider, made once
    try:
        async with serve_environment(env, session_ttl_s=1.0) as server, ResourcesClient(server.address) as client:
            first, second = await client.seed_session({}), await client.seed_session({})
            await client.call_tool(first, "run_python", {"code": "x = 41"})
            out = json.loads((await client.call_tool(first, "run_python", {"code": "print(x + 1)"})).output)
            assert out == {"stdout": "42\n", "stderr": "", "error": None}
            other = json.loads((await client.call_tool(second, "run_python", {"code": "print(x)"})).output)
            assert "NameError" in other["error"]  # a namespace per session
            store = server.handler.sessions.store
            works = {sid: store.get(sid).state["python"]._run.work for sid in (first, second)}
            assert all(w.exists() for w in works.values())
            assert await client.close_session(first)
            assert not works[first].exists()
            for _ in range(60):  # the idle sweep (TTL 1 s) closes the other
                if not works[second].exists():
                    break
                await asyncio.sleep(0.1)
            assert not works[second].exists()
            launchers = [launcher for launcher in pool._launchers if launcher is not None]
            assert launchers and all(launcher.alive for launcher in launchers)
        # the server stopped: the provider sandbox() made is closed with it, its launchers gone
        with pytest.raises(RuntimeError, match="the sandbox pool is closed"):
            await pool.run(Program(python="print(1)"))
        assert not any(launcher.alive for launcher in launchers)
        assert env.sandbox() is not pool  # a later use makes a new one
    finally:
        await close_sandbox(env)


async def test_a_cell_cannot_answer_for_another_call() -> None:
    """A cell writes a whole reply of its own onto the driver's reply pipe: skipped (its nonce
    is not the call's), so this call and the next each get their own output."""
    pool = Pool(size=2)
    session = await PythonInterpreter.start(pool)
    forged = json.dumps({"stdout": "forged\n", "stderr": "", "error": None, "truncated": False}).encode()
    try:
        first = await session.execute(f"import os\nos.write(4, b'0123456789abcdef {len(forged)}\\n' + {forged!r})\nprint('first')")
        second = await session.execute("print('second')")
        assert (first.stdout, second.stdout) == ("first\n", "second\n")
        assert not second.stopped
    finally:
        await session.close()
        await pool.aclose()


async def test_a_cancelled_call_ends_the_session() -> None:
    """Its reply would otherwise wait in the pipe and be read as the next call's."""
    pool = Pool(size=2)
    session = await PythonInterpreter.start(pool)
    try:
        call = asyncio.ensure_future(session.execute("import time\ntime.sleep(1)\nprint('late')"))
        await asyncio.sleep(0.3)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        after = await session.execute("print('next')")
        assert after.stdout != "late\n" and after.stopped and "cancelled" in str(after.error)
        assert not session.alive
    finally:
        await session.close()
        await pool.aclose()


async def test_one_client_cannot_take_every_sandboxed_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeds over gRPC from one client, past its share of the pool's kept programs: refused
    with RESOURCE_EXHAUSTED naming the limit (a caller may retry), never a crash; a session
    closed frees its place. The pool's bounds come as the provider's options (what
    `serve --sandbox-option` sets)."""
    from gym_metrics._transport.client import ServerBusyError
    from gym_metrics.sandbox import OPTIONS_ENV

    monkeypatch.setenv(OPTIONS_ENV, json.dumps({"size": 2, "max_open": 4, "max_open_per_client": 2}))
    env = PythonTool()
    try:
        async with serve_environment(env) as server, ResourcesClient(server.address) as client:
            first, second = await client.seed_session({}), await client.seed_session({})
            with pytest.raises(ServerBusyError, match="RESOURCE_EXHAUSTED: 2 sandboxed programs kept running for client 127.0.0.1"):
                await client.seed_session({})
            assert {s.client for s in (server.handler.sessions.store.get(first), server.handler.sessions.store.get(second))} == {"127.0.0.1"}
            assert await client.close_session(first)
            third = await client.seed_session({})
            out = json.loads((await client.call_tool(third, "run_python", {"code": "print(6 * 7)"})).output)
            assert out["stdout"] == "42\n"
    finally:
        await close_sandbox(env)
