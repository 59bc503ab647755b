"""A server that stops answering without closing its connections (a frozen process, a host or
network gone without a reset) ends the client's open calls as unavailable, by the client's
keepalive pings, instead of leaving `collect` waiting forever with nothing said (it waited until
killed). The real pings are every 30 s; here every second, the server accepting them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gym_metrics import ResourcesClient
from gym_metrics._transport.client import KEEPALIVE_OPTIONS, ServerUnavailableError

pytestmark = pytest.mark.timeout(90)

SERVER = """
import asyncio, sys
from gym_metrics import BaseVerifyRequest, SimpleResourcesServer
from gym_metrics._transport.server import ServerConfig, start_server

class Slow(SimpleResourcesServer):
    async def verify(self, body: BaseVerifyRequest):
        await asyncio.sleep(2.0)
        return {**body.model_dump(), "reward": 1.0}

async def main():
    config = ServerConfig(host="127.0.0.1", port=0, grpc_options=[("grpc.http2.min_recv_ping_interval_without_data_ms", 500)])
    running = await start_server(Slow(), config)
    print(running.port, flush=True)
    await running.server.wait_for_termination()

asyncio.run(main())
"""


def test_a_frozen_server_ends_the_calls_as_unavailable(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())  # type: ignore[union-attr]
        fast = tuple((key, 1000 if key == "grpc.keepalive_time_ms" else 2000 if key.endswith("timeout_ms") else value) for key, value in KEEPALIVE_OPTIONS)
        row = {"responses_create_params": {"input": "q"}, "response": {"output": []}}

        async def verify_while_frozen() -> float:
            async with ResourcesClient(f"127.0.0.1:{port}", _options=fast) as client:
                await client.verify(row)  # the connection is up
                call = client.verify(json.loads(json.dumps(row)))
                os.kill(proc.pid, signal.SIGSTOP)  # mid-call: the answer never comes, the socket stays open
                started = time.monotonic()
                with pytest.raises(ServerUnavailableError):
                    await call
                return time.monotonic() - started

        import asyncio

        assert asyncio.run(verify_while_frozen()) < 20
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(10)
