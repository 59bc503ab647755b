"""The HTTP and MCP doors resist slow clients (issue 36, item 3): a request whose head or body
does not arrive within the read deadline is cut off, connections past the door's bound are
answered 503 at once, gRPC clients are served all along, and `serve` raises its soft limit on
open files to the hard one. The deadline and the bound are made small here (1 s, 20)."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

import httpx
import pytest

from gym_metrics import ResourcesClient
from gym_metrics._transport.server import _uvicorn
from gym_metrics.testing import serve_environment

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import Counter  # noqa: E402
from _transport_helpers import serve_process  # noqa: E402

pytestmark = pytest.mark.timeout(60)
ROW = {"responses_create_params": {"input": "What is 2+2?"}, "expected_answer": "4"}
PARTIAL_HEAD = b"POST /get_reward HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """What the server sent before it closed the connection (fails if it is still open)."""
    return await asyncio.wait_for(reader.read(), seconds)


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_uvicorn, "READ_TIMEOUT_S", 1.0)
    monkeypatch.setattr(_uvicorn, "MAX_CONNECTIONS", 20)


@pytest.mark.parametrize("door", ["http", "mcp"])
async def test_partial_requests_are_cut_off_and_connections_bounded(door: str, small_bounds: None) -> None:
    async with serve_environment("math_exact", http_port=0, mcp_port=0) as server, ResourcesClient(server.address) as client:
        port = server.http_port if door == "http" else server.mcp_port
        lorises = [await asyncio.open_connection("127.0.0.1", port) for _ in range(30)]
        for _, writer in lorises:
            writer.write(PARTIAL_HEAD)
        started = time.monotonic()
        busy = [await closed_within(reader, 0.5) for reader, _ in lorises[20:]]  # past the bound: at once
        assert all(b" 503 " in answer for answer in busy), busy[:1]
        assert (await client.verify({**ROW, "response": {"output": []}}))["reward"] == 0.0  # gRPC is served meanwhile
        cut = await asyncio.gather(*(closed_within(reader, 5) for reader, _ in lorises[:20]))
        assert cut == [b""] * 20 and 0.9 < time.monotonic() - started < 5  # the read deadline, not sooner
        async with httpx.AsyncClient() as http:  # the door serves again
            answer = await http.get(f"http://127.0.0.1:{port}/health" if door == "http" else f"http://127.0.0.1:{port}/mcp")
        assert answer.status_code in ((200,) if door == "http" else (200, 400, 405, 406))
        for _, writer in lorises:
            writer.close()


async def test_a_stalled_body_and_a_stalled_second_request_are_cut_off(small_bounds: None) -> None:
    async with serve_environment("math_exact", http_port=0) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http_port)
        writer.write(PARTIAL_HEAD + b"Content-Length: 1000\r\n\r\n" + b'{"query": [')  # 11 of 1,000 bytes
        assert await closed_within(reader, 5) == b""
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http_port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # one whole request on a kept-alive connection
        assert (await reader.readuntil(b"serving\"}")).startswith(b"HTTP/1.1 200")
        writer.write(PARTIAL_HEAD)  # then a second that never ends
        started = time.monotonic()
        assert await closed_within(reader, 5) == b""
        assert 0.9 < time.monotonic() - started


class SlowCounter(Counter):
    async def verify(self, body, session=None):  # type: ignore[no-untyped-def, override]
        await asyncio.sleep(1.5)
        return await super().verify(body, session)


async def test_answering_is_not_reading(small_bounds: None) -> None:
    """A request that arrived whole is answered however long its verify takes (the deadline
    bounds reading only): a 1 s deadline and a verify of 1.5 s."""
    async with serve_environment(SlowCounter(), http_port=0) as server, httpx.AsyncClient(timeout=30) as http:
        row = {"responses_create_params": {"input": "count"}, "expected_count": -1}
        answer = await http.post(f"http://127.0.0.1:{server.http_port}/score_groups", json={"groups": [{"row": row, "completions": ["done"]}]})
    assert answer.status_code == 200 and answer.json()["groups"][0]["rewards"] == [1.0]


def test_serve_raises_its_soft_open_file_limit() -> None:
    said: list[str] = []
    lowered = ["sh", "-c", 'ulimit -Sn 256 && exec "$@"', "sh"]
    with serve_process("math_exact", prefix=lowered, said=said):
        pid = re.search(r"\(pid (\d+)", said[-1])
        assert pid, said
        limits = Path(f"/proc/{pid[1]}/limits").read_text()
        soft, hard = re.search(r"Max open files\s+(\S+)\s+(\S+)", limits).groups()  # type: ignore[union-attr]
        assert soft == hard != "256", limits
