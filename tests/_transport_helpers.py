"""Helpers of the transport tests: a tiny environment, a BadRequest reader, a server in a
thread of its own, and `gym-metrics serve` in a process of its own."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc.aio
from google.rpc import error_details_pb2, status_pb2

from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.environments import SimpleResourcesServer


class AnswerRequest(BaseVerifyRequest):
    answer: str = ""
    expected: str = ""


class AnswerEnv(SimpleResourcesServer):
    """Reward 1.0 when `answer` equals `expected`; counts its verify calls."""

    name = "answer_env"

    def __init__(self) -> None:
        self.calls = 0

    async def verify(self, body: AnswerRequest) -> BaseVerifyResponse:
        self.calls += 1
        if body.answer == "boom":
            raise ValueError("boom in verify")
        return BaseVerifyResponse(reward=1.0 if body.answer == body.expected else 0.0, answer_len=len(body.answer))


def bad_request(exc: grpc.aio.AioRpcError) -> list[tuple[str, str]]:
    """(field, description) of every BadRequest violation in a failed call's status details."""
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            assert status.code == exc.code().value[0]
            out = []
            for detail in status.details:
                br = error_details_pb2.BadRequest()
                if detail.Unpack(br):
                    out.extend((v.field, v.description) for v in br.field_violations)
            return out
    return []


async def aggregate_call(stub: Any, requests: list[Any]) -> Any:
    """Run AggregateMetrics (a streamed answer) on small data: exactly one part, the last."""
    parts = [part async for part in stub.AggregateMetrics(iter(requests))]
    assert len(parts) == 1 and parts[0].last, f"expected one part, got {len(parts)}"
    return parts[0]


@contextmanager
def server_in_thread(env: SimpleResourcesServer) -> Iterator[str]:
    """`env` served on 127.0.0.1:0 from a thread with its own event loop (so the test's thread
    can run `cli.main`, which runs a loop of its own); yields the address, stops on exit."""
    from gym_metrics._transport.server import ServerConfig, start_server

    loop = asyncio.new_event_loop()
    started: dict[str, Any] = {}
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        started["server"] = loop.run_until_complete(start_server(env, ServerConfig(port=0, log_requests=False)))
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(30), "the server did not start within 30 s"
    try:
        yield started["server"].address
    finally:
        asyncio.run_coroutine_threadsafe(started["server"].stop(0), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


@contextmanager
def serve_process(
    target: str = "math_exact", *args: str, env: Mapping[str, str] | None = None, prefix: Sequence[str] = (),
    said: list[str] | None = None, cwd: str | Path | None = None,
) -> Iterator[str]:
    """`gym-metrics serve TARGET --port 0 ARGS` in a subprocess (after `prefix`, e.g. setpriv);
    its address while it runs. What it printed before "listening on" goes to `said`."""
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-m", "gym_metrics.cli", "serve", target, "--port", "0", *args],
        stderr=subprocess.PIPE, text=True, env=None if env is None else dict(env), cwd=cwd,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        while True:
            line = proc.stderr.readline()
            if said is not None:
                said.append(line)
            found = re.search(r"listening on (\S+:\d+)", line)
            if found or not line:
                break
        assert found, f"serve did not start: {line}"
        # the rest of its stderr drained: a full pipe would block the server's next log line (and the test with it)
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield found.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
