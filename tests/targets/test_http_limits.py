"""Every HTTP attempt is bounded in bytes and time (issue 23, defect 3), on both paths (httpx:
evaluate's targets, judges, remote scorers; the lean pool: collect's policy): an endless
body stops at `max_answer_bytes`, an announced one past it is refused unread, and a server
dripping one byte at a time is cut by `timeout_seconds` as a deadline for the whole attempt.
Raw loopback servers; every case bounded (a 200 MB body at most, a few seconds)."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from gym_metrics.targets import GenerationError, ModelTarget, ModelTargetConfig

pytestmark = [pytest.mark.every_python, pytest.mark.timeout(60)]

REQUEST = {"input": [{"role": "user", "content": "2+2?"}]}
Handler = Callable[[socket.socket, threading.Event], None]


@contextmanager
def raw_http(handler: Handler) -> Iterator[str]:
    """A loopback HTTP server whose every connection gets `handler(conn, stop)` once the
    request is read; the base URL to give a model target."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(65536)
                header, _, body = head.partition(b"\r\n\r\n")
                length = next(int(v) for k, _, v in (h.partition(b":") for h in header.split(b"\r\n")) if k.lower() == b"content-length")
                while len(body) < length:
                    body += conn.recv(65536)
                handler(conn, stop)
            except (OSError, StopIteration):
                pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def endless_chunked(conn: socket.socket, stop: threading.Event) -> None:
    """A 200 OK whose chunked body goes on (200 MB, unless the client hangs up first)."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"%x\r\n%s\r\n" % (1 << 20, b"x" * (1 << 20))
    for _ in range(200):
        if stop.is_set():
            return
        conn.sendall(piece)


def announces_a_gigabyte(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{")
    stop.wait(10)


def slow_drip(conn: socket.socket, stop: threading.Event) -> None:
    """A body of 100 bytes, one byte every 0.1 s: no single read waits long."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
    for _ in range(100):
        if stop.wait(0.1):
            return
        conn.sendall(b" ")


def target(url: str, lean: bool, **knobs: object) -> ModelTarget:
    settings = {"backoff_seconds": 0.01, "max_backoff_seconds": 0.05, "max_retries": 2, **knobs}
    return ModelTarget(ModelTargetConfig(url=url, model="m", **settings), lean_http=lean)  # type: ignore[arg-type]


@contextmanager
def rss_growth_mb() -> Iterator[list[float]]:
    """The block's peak growth of this process's resident memory, in MB (sampled every 5 ms;
    ru_maxrss cannot tell, an earlier test may have set a higher peak): `growth[0]` after it."""
    page_mb, stop, growth = os.sysconf("SC_PAGE_SIZE") / 2**20, threading.Event(), [0.0]

    def rss() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page_mb

    def sample(base: float) -> None:
        while not stop.wait(0.005):
            growth[0] = max(growth[0], rss() - base)

    sampler = threading.Thread(target=sample, args=(rss(),), daemon=True)
    sampler.start()
    try:
        yield growth
    finally:
        stop.set()
        sampler.join(5)


@pytest.mark.parametrize("lean", [False, True], ids=["httpx", "lean"])
async def test_an_endless_body_stops_at_max_answer_bytes_and_is_not_retried(lean: bool) -> None:
    with rss_growth_mb() as growth, raw_http(endless_chunked) as url:
        client = target(url, lean, max_answer_bytes=1 << 20, timeout_seconds=30)
        try:
            with pytest.raises(GenerationError, match=r"larger than max_answer_bytes \(1,048,576 bytes\)") as big:
                await client.generate(REQUEST)
        finally:
            await client.aclose()
    assert big.value.attempts == 1 and not big.value.retryable
    assert growth[0] < 100  # not the 200 MB the server had to send


@pytest.mark.parametrize("lean", [False, True], ids=["httpx", "lean"])
async def test_an_announced_answer_past_the_cap_is_refused_unread(lean: bool) -> None:
    with raw_http(announces_a_gigabyte) as url:
        client = target(url, lean, max_answer_bytes=1000, timeout_seconds=30)
        started = time.monotonic()
        try:
            with pytest.raises(GenerationError, match=r"max_answer_bytes \(1,000 bytes\): it announces 1,073,741,824 bytes"):
                await client.generate(REQUEST)
        finally:
            await client.aclose()
    assert time.monotonic() - started < 5  # refused on the header, not after waiting for the body


@pytest.mark.parametrize("lean", [False, True], ids=["httpx", "lean"])
async def test_a_slow_drip_is_cut_by_the_deadline_of_the_whole_attempt(lean: bool) -> None:
    with raw_http(slow_drip) as url:
        client = target(url, lean, timeout_seconds=1, max_retries=0)
        started = time.monotonic()
        try:
            with pytest.raises(GenerationError, match="timed out after 1.0 s"):
                await client.generate(REQUEST)
        finally:
            await client.aclose()
    assert time.monotonic() - started < 3.5  # the drip alone would take 10 s, each read 0.1 s


def test_one_default_for_both_paths() -> None:
    from gym_metrics._util.http import MAX_ANSWER_BYTES, HttpClientConfig
    from gym_metrics.scorers.judge import JudgeConfig

    assert MAX_ANSWER_BYTES == 64 << 20
    assert HttpClientConfig(url="http://h").max_answer_bytes == MAX_ANSWER_BYTES
    assert JudgeConfig(url="http://h", model="j").max_answer_bytes == MAX_ANSWER_BYTES
    lean = target("http://127.0.0.1:9/v1", True, max_answer_bytes=12345)
    assert lean._wire is not None and lean._wire.max_bytes == 12345


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "httpx"])
async def test_an_answer_read_until_close_cut_by_a_reset_is_retried_not_taken(lean: bool) -> None:
    """A body with no length ends at the server's close: a reset is not that end. The lean pool
    took the cut body (`{"choices": [`) as the whole answer: not JSON, never retried."""
    calls: list[int] = []
    whole = b'{"choices": [{"message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}]}'

    def cut_once(conn: socket.socket, stop: threading.Event) -> None:
        calls.append(1)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
        if len(calls) == 1:
            conn.sendall(b'{"choices": [')
            time.sleep(0.05)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        else:
            conn.sendall(whole)

    with raw_http(cut_once) as url:
        target = ModelTarget(ModelTargetConfig(url=url, model="m", api="chat", max_retries=2, backoff_seconds=0.01, timeout_seconds=10), lean_http=lean)
        try:
            generation = await target.generate(REQUEST)
        finally:
            await target.aclose()
    assert generation.text == "4" and generation.attempts == 2 and len(calls) == 2
