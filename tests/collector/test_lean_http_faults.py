"""The lean HTTP pool (gym_metrics/targets/_wire.py) against policies that answer badly: a
malformed answer fails its attempt naming what is wrong (retried like a cut connection, then
given up), bytes past an answer close its connection instead of leaving it open, trailers are
read past, and every connection the pool opened is closed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest

from gym_metrics.targets import ByteBudget, GenerationError, ModelTarget, ModelTargetConfig

pytestmark = pytest.mark.timeout(60)

REQUEST = {"input": [{"role": "user", "content": "2+2?"}]}
BODY = json.dumps({"id": "c1", "choices": [{"message": {"role": "assistant", "content": "42"}}], "usage": {"prompt_tokens": 2, "completion_tokens": 1}}).encode()
CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
ONE_CHUNK = b"%x\r\n%s\r\n" % (len(BODY), BODY)
MB = 1 << 20


class Policy:
    """A raw keep-alive HTTP/1.1 server answering every request with `reply(n)` (n: the
    request's number), then `after` (bytes nobody asked for) a moment later; counts the
    connections made and still open."""

    def __init__(self, reply: Callable[[int], bytes], after: bytes = b"") -> None:
        self.reply, self.after = reply, after
        self.made = self.open = self.requests = 0
        self.url = ""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.made += 1
        self.open += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
                await reader.readexactly(length)
                self.requests += 1
                writer.write(self.reply(self.requests))
                await writer.drain()
                if self.after:
                    await asyncio.sleep(0.05)
                    writer.write(self.after)
                    await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, StopIteration):
            pass
        finally:
            self.open -= 1
            writer.close()


@pytest.fixture
async def policies() -> AsyncIterator[Callable[..., asyncio.Future[Policy]]]:
    servers: list[asyncio.AbstractServer] = []

    async def start(reply: Callable[[int], bytes], after: bytes = b"") -> Policy:
        policy = Policy(reply, after)
        server = await asyncio.start_server(policy.serve, "127.0.0.1", 0)
        servers.append(server)
        policy.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
        return policy

    yield start  # type: ignore[misc]
    for server in servers:
        server.close()


def lean(url: str, **knobs: object) -> ModelTarget:
    settings = {"api": "chat", "backoff_seconds": 0.01, "max_backoff_seconds": 0.02, "timeout_seconds": 10, **knobs}
    return ModelTarget(ModelTargetConfig(url=url, model="m", **settings), lean_http=True)  # type: ignore[arg-type]


async def all_closed(policy: Policy) -> bool:
    for _ in range(100):  # bounded: 2 s for the server to see the closes
        if not policy.open:
            return True
        await asyncio.sleep(0.02)
    return False


MALFORMED = {
    "a head past 1 MB": (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (MB + 10), "an answer head of more than 1,048,576 bytes"),
    "101 unasked": (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "101 Switching Protocols to a request that asked for none"),
    "a chunk size line past 1 MB": (CHUNKED + b"1" * (MB + 10), "a chunk size line too long"),
    "a negative chunk size": (CHUNKED + b"-5\r\n", "chunk size -5"),
    "a chunk not ended by CRLF": (CHUNKED + b"%x\r\n%sXX0\r\n\r\n" % (len(BODY), BODY), "a chunk not ended by CRLF"),
    "trailers past 1 MB": (CHUNKED + ONE_CHUNK + b"0\r\nX-T: " + b"t" * (MB + 10), "trailers too long"),
    "not HTTP": (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP/1.x answer: 'SSH-2.0-OpenSSH_9.6'"),
    "no status code": (b"HTTP/1.1 OK\r\nContent-Length: 2\r\n\r\n{}", "not an HTTP/1.x answer: 'HTTP/1.1 OK'"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_malformed_answer_fails_naming_what_is_wrong_and_leaves_no_connection(case: str, policies: Callable[..., asyncio.Future[Policy]]) -> None:
    reply, why = MALFORMED[case]
    policy = await policies(lambda n: reply)
    target = lean(policy.url, max_retries=1)
    try:
        with pytest.raises(GenerationError) as failed:
            await target.generate(REQUEST)
    finally:
        await target.aclose()
    assert str(failed.value) == f"cannot reach the model: ValueError: {why} (gave up after 2 attempts)"
    assert failed.value.attempts == 2 and policy.requests == 2 and policy.made == 2
    assert await all_closed(policy)


async def test_trailers_are_read_past_and_the_connection_kept(policies: Callable[..., asyncio.Future[Policy]]) -> None:
    policy = await policies(lambda n: CHUNKED + ONE_CHUNK + b"0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n")
    target = lean(policy.url, max_concurrency=1, max_retries=0)
    try:
        texts = [(await target.generate(REQUEST)).text for _ in range(3)]
        made = policy.made
    finally:
        await target.aclose()
    assert texts == ["42"] * 3 and made == 1
    assert await all_closed(policy)


@pytest.mark.parametrize("where", ["after the body", "later, while idle"])
async def test_bytes_past_an_answer_close_its_connection(where: str, policies: Callable[..., asyncio.Future[Policy]]) -> None:
    """A server that sends more than its Content-Length (in the answer, or on the idle
    connection later): the answer is what was announced; the connection cannot carry another
    request and is closed at once, not left open (a file descriptor per request)."""
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
    if where == "after the body":
        policy = await policies(lambda n: sized + b"\r\nGARBAGE")
    else:
        policy = await policies(lambda n: sized, after=b"\r\n")
    target = lean(policy.url, max_concurrency=1, max_retries=0)
    try:
        texts = []
        for _ in range(4):
            texts.append((await target.generate(REQUEST)).text)
            await asyncio.sleep(0.1)  # (the idle case: the stray bytes come meanwhile)
        assert await all_closed(policy) if where == "after the body" else True
        open_before_close = policy.open
    finally:
        await target.aclose()
    assert texts == ["42"] * 4 and policy.made == 4
    assert open_before_close <= 1  # at most the last one, idle in the pool
    assert await all_closed(policy)


async def test_a_malformed_body_met_after_waiting_for_budget_room_fails_that_request_only() -> None:
    """The budget holds a slow answer; the next (chunked, its size line garbage) waits for room
    with its reading paused; when it goes on, its error fails it (named), the slow one comes
    whole and the budget ends empty."""
    slow_body = json.dumps({"id": "c1", "choices": [{"message": {"role": "assistant", "content": "s" * 300}}]}).encode()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        prompt = json.loads(await reader.readexactly(length))["messages"][-1]["content"]
        if prompt == "slow":
            reply = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(slow_body), slow_body)
            writer.write(reply[:-50])
            await writer.drain()
            await asyncio.sleep(0.4)
            writer.write(reply[-50:])
        else:
            await asyncio.sleep(0.1)
            writer.write(CHUNKED + b"zz\r\n")
        await writer.drain()
        try:
            await reader.read()  # kept open until the client closes it
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    budget = ByteBudget(100)
    target = ModelTarget(ModelTargetConfig(url=url, model="m", api="chat", max_concurrency=2, max_retries=0, timeout_seconds=10), lean_http=True, budget=budget)
    try:
        slow, bad = await asyncio.gather(*(target.generate({"input": [{"role": "user", "content": c}]}) for c in ("slow", "bad")), return_exceptions=True)
    finally:
        await target.aclose()
        server.close()
    assert not isinstance(slow, BaseException) and slow.text == "s" * 300
    assert isinstance(bad, GenerationError) and bad.attempts == 1
    assert str(bad) == "cannot reach the model: ValueError: invalid literal for int() with base 16: b'zz'"
    assert budget.held == 0


async def test_https_to_a_plain_http_server_fails_typed() -> None:
    """An https:// URL of a plain HTTP server (which answers the TLS hello with a 400): the
    handshake's error, typed, not retried as a timeout."""
    closed = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()
        closed.set()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    target = lean(f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", max_retries=0)
    try:
        with pytest.raises(GenerationError, match=r"^cannot reach the model: SSLError: .*WRONG_VERSION_NUMBER") as failed:
            await target.generate(REQUEST)
    finally:
        await target.aclose()
        server.close()
    assert failed.value.attempts == 1 and closed.is_set()
