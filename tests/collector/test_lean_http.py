"""The lean HTTP/1.1 pool collect sends generations over (`ModelTarget(..., lean_http=True)`,
gym_metrics/targets/_wire.py): the same answers, retries, errors and key handling as the
httpx path, plus the framing cases a real server may use (chunked, close-delimited,
`Connection: close`, an idle connection the server closed)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest

from gym_metrics.targets import GenerationError, ModelTarget, ModelTargetConfig
from gym_metrics.testing import ScriptedPolicyServer

pytestmark = pytest.mark.timeout(30)

REQUEST = {"input": [{"role": "user", "content": "2+2?"}]}


def lean(url: str, **knobs: object) -> ModelTarget:
    settings = {"backoff_seconds": 0.01, "max_backoff_seconds": 0.05, **knobs}
    return ModelTarget(ModelTargetConfig(url=url, model="m", **settings), lean_http=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_answers_usage_and_keep_alive(api: str) -> None:
    with ScriptedPolicyServer({"2+2?": "4"}) as policy:
        target = lean(policy.url, api=api, max_concurrency=4)
        try:
            results = await asyncio.gather(*(target.generate(REQUEST) for _ in range(40)))
        finally:
            await target.aclose()
        assert policy.calls["2+2?"] == 40 and policy.max_in_flight <= 4
        paths = {r.path for r in policy.requests}
    assert all(g.text == "4" and g.usage.output_tokens == 1 and g.attempts == 1 for g in results)
    assert paths == {"/v1/chat/completions" if api == "chat" else "/v1/responses"}


async def test_503s_with_retry_after_and_timeouts_are_retried() -> None:
    with ScriptedPolicyServer({"2+2?": "4"}, fail_first=2, retry_after="0", stall_first=1, stall_s=1.0) as policy:
        target = lean(policy.url, timeout_seconds=0.3, max_retries=3)
        try:
            generation = await target.generate(REQUEST)
        finally:
            await target.aclose()
    assert generation.text == "4" and generation.attempts == 4


async def test_failures_are_typed_and_never_show_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GM_LEAN_KEY", "sk-secret-123")
    with ScriptedPolicyServer({"2+2?": "4"}, fail_first=10**6) as policy:
        target = lean(policy.url, max_retries=1, api_key_env="GM_LEAN_KEY")
        try:
            with pytest.raises(GenerationError) as down:
                await target.generate(REQUEST)
        finally:
            await target.aclose()
        assert all(r.headers.get("Authorization") == "Bearer sk-secret-123" for r in policy.requests)
    assert down.value.status == 503 and down.value.attempts == 2 and "gave up after 2 attempts" in str(down.value)
    with ScriptedPolicyServer({}) as policy:  # an unknown prompt is a 400: not retried
        target = lean(policy.url, max_retries=3)
        try:
            with pytest.raises(GenerationError, match="HTTP 400") as bad:
                await target.generate(REQUEST)
        finally:
            await target.aclose()
    assert bad.value.attempts == 1 and "sk-secret" not in str(bad.value)


async def test_an_unreachable_policy_fails_typed() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = lean(f"http://127.0.0.1:{port}/v1", max_retries=1)
    with pytest.raises(GenerationError, match="cannot reach the model") as down:
        await target.generate(REQUEST)
    await target.aclose()
    assert down.value.attempts == 2


Handler = Callable[[bytes], bytes]


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[Handler, bool], asyncio.Future[str]]]:
    """A raw HTTP/1.1 server: `start(answer, close_after, piece=0)` -> its base URL;
    `answer(body)` gives the whole raw reply; `close_after` closes each connection after one
    reply (without saying so), as a server whose keep-alive timed out does; `piece`: the reply
    is sent in pieces of that many bytes, each on its own."""
    servers: list[asyncio.AbstractServer] = []
    counts = {"connections": 0}

    async def start(answer: Handler, close_after: bool, piece: int = 0) -> str:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            counts["connections"] += 1
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
                    reply = answer(await reader.readexactly(length))
                    for at in range(0, len(reply), piece or len(reply)):
                        writer.write(reply[at : at + (piece or len(reply))])
                        await writer.drain()
                        if piece:
                            await asyncio.sleep(0.001)
                    if close_after:
                        break
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"

    start.counts = counts  # type: ignore[attr-defined]
    yield start  # type: ignore[misc]
    for server in servers:
        server.close()


def completion_bytes(text: str) -> bytes:
    return json.dumps({"id": "c1", "choices": [{"message": {"role": "assistant", "content": text}}], "usage": {"prompt_tokens": 2, "completion_tokens": 1}}).encode()


def chunked(body: bytes) -> bytes:
    half = len(body) // 2
    parts = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:half], body[half:]))
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + parts + b"0\r\n\r\n"


def close_delimited(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + body


def sized(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


@pytest.mark.parametrize("frame", [chunked, close_delimited, sized])
async def test_framings_and_closed_idle_connections(frame: Callable[[bytes], bytes], raw_server: Callable[..., asyncio.Future[str]]) -> None:
    close_after = frame is not chunked  # a sized answer on a connection closed afterwards: the stale reuse case
    url = await raw_server(lambda body: frame(completion_bytes("42")), close_after)
    target = lean(url, max_concurrency=1, max_retries=0)  # a stale connection must not need a retry
    try:
        texts = [(await target.generate(REQUEST)).text for _ in range(5)]
    finally:
        await target.aclose()
    assert texts == ["42"] * 5
    assert raw_server.counts["connections"] == (1 if not close_after else 5)  # type: ignore[attr-defined]


async def test_interim_answers_are_skipped_and_a_bodiless_answer_does_not_wait(raw_server: Callable[..., asyncio.Future[str]]) -> None:
    """1xx answers (100 Continue, 103 Early Hints) come before the real one and have no body;
    a 204 has none either: neither may be read as the answer, nor the body awaited till close."""
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n"
    url = await raw_server(lambda body: interim + sized(completion_bytes("42")), False, 7)
    target = lean(url, max_concurrency=1, max_retries=0)
    try:
        texts = [(await target.generate(REQUEST)).text for _ in range(3)]
    finally:
        await target.aclose()
    assert texts == ["42"] * 3 and raw_server.counts["connections"] == 1  # type: ignore[attr-defined]

    url = await raw_server(lambda body: b"HTTP/1.1 204 No Content\r\n\r\n", False)
    target = lean(url, max_concurrency=1, max_retries=0, timeout_seconds=20)
    started = asyncio.get_running_loop().time()
    try:
        with pytest.raises(GenerationError, match="is not JSON"):
            await target.generate(REQUEST)
    finally:
        await target.aclose()
    assert asyncio.get_running_loop().time() - started < 5


@pytest.mark.parametrize("frame", [chunked, close_delimited, sized])
async def test_an_answer_past_the_bound_is_refused_not_read(frame: Callable[[bytes], bytes], raw_server: Callable[..., asyncio.Future[str]]) -> None:
    url = await raw_server(lambda body: frame(completion_bytes("x" * 2000)), True)
    target = lean(url, max_concurrency=1, max_retries=3, max_answer_bytes=1000)
    try:
        with pytest.raises(GenerationError, match=r"larger than max_answer_bytes \(1,000 bytes\)") as big:
            await target.generate(REQUEST)
    finally:
        await target.aclose()
    assert big.value.attempts == 1  # not retried: the same request gets the same answer


@pytest.mark.parametrize("frame", [chunked, close_delimited, sized])
async def test_answers_wait_for_room_in_the_byte_budget_and_come_whole_in_any_pieces(
    frame: Callable[[bytes], bytes], raw_server: Callable[..., asyncio.Future[str]]
) -> None:
    """A budget smaller than one answer, four requests in flight, answers sent in pieces of
    7 bytes (heads, chunk lines and bodies cut anywhere): sized bodies are read one at a time
    (a read waits, its connection paused, until the answer before gave its bytes back); one of
    unknown length waits only while the budget is over (it is counted as it comes). Every
    answer comes whole, in every framing, and the budget ends empty."""
    from gym_metrics.targets import ByteBudget

    texts = [f"answer {i} " + "y" * 300 for i in range(4)]
    by_prompt = {f"q{i}": t for i, t in enumerate(texts)}
    url = await raw_server(lambda body: frame(completion_bytes(by_prompt[json.loads(body)["messages"][-1]["content"]])), frame is not chunked, 7)
    budget = ByteBudget(100)
    config = ModelTargetConfig(url=url, model="m", api="chat", max_concurrency=4, max_retries=0)
    target = ModelTarget(config, lean_http=True, budget=budget)
    try:
        answers = await asyncio.gather(*(target.generate({"input": [{"role": "user", "content": f"q{i}"}]}) for i in range(4)))
    finally:
        await target.aclose()
    assert [a.text for a in answers] == texts
    one = len(completion_bytes(texts[0]))
    assert one <= budget.peak <= 4 * one
    if frame is sized:
        assert budget.peak < 2 * one  # one at a time
    assert budget.held == 0


async def test_an_answer_waiting_for_room_is_whole_when_its_server_closed_meanwhile() -> None:
    """The budget holds a slow sized answer; the next answer, read until close, comes whole and
    its server closes it while it waits for room (its reading paused): once there is room it
    is read to its end, the close ending its body, not failing it."""
    from gym_metrics.targets import ByteBudget

    slow_text, quick_text = "slow " + "s" * 300, "quick " + "q" * 300

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        prompt = json.loads(await reader.readexactly(length))["messages"][-1]["content"]
        if prompt == "slow":
            reply = sized(completion_bytes(slow_text))
            writer.write(reply[:-50])  # the head and most of the body: counted, held
            await writer.drain()
            await asyncio.sleep(0.4)
            writer.write(reply[-50:])
        else:
            await asyncio.sleep(0.1)  # after the slow one's head
            writer.write(close_delimited(completion_bytes(quick_text)))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    budget = ByteBudget(100)
    target = ModelTarget(ModelTargetConfig(url=url, model="m", api="chat", max_concurrency=2, max_retries=0), lean_http=True, budget=budget)
    try:
        slow, quick = await asyncio.gather(*(target.generate({"input": [{"role": "user", "content": c}]}) for c in ("slow", "quick")))
    finally:
        await target.aclose()
        server.close()
    assert (slow.text, quick.text) == (slow_text, quick_text)
    assert budget.held == 0


async def test_each_request_carries_its_own_path_headers_and_length() -> None:
    """The pool makes a request head once per URL and headers: requests to other paths, with
    other headers or bodies, each still say theirs."""
    from gym_metrics.targets._wire import WirePool

    seen: list[tuple[bytes, bytes]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
                seen.append((head, await reader.readexactly(length)))
                writer.write(sized(b"{}"))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    pool = WirePool(base + "/v1", 1, 10.0)
    sent = [("/v1/responses", {"X-A": "1"}, b'{"a":1}'), ("/v1/chat/completions?x=2", {"X-A": "1"}, b"{}"),
            ("/v1/responses", {"X-A": "2", "X-B": "3"}, b'{"bb":22}'), ("/v1/responses", {"X-A": "1"}, b"[]")]  # fmt: skip
    try:
        for path, headers, body in sent:
            assert (await pool.post(base + path, body, headers))[0] == 200
    finally:
        await pool.aclose()
        server.close()
    assert len(seen) == len(sent)
    for (head, body), (path, headers, payload) in zip(seen, sent):
        lines = head.decode().split("\r\n")
        assert lines[0] == f"POST {path} HTTP/1.1" and body == payload
        assert {line.split(": ")[0] for line in lines[1:] if line} == {"Host", "Content-Length", *headers}
        assert all(f"{k}: {v}" in lines for k, v in headers.items()) and f"Content-Length: {len(payload)}" in lines
