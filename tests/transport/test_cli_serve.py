"""`gym-metrics serve` as a user types it: a registered name works from any directory, and the
other two target forms work too."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from pathlib import Path

import pytest

from gym_metrics._transport.client import ResourcesClient

APP = '''
from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer

class Echo(SimpleResourcesServer):
    name = "echo_from_file"

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(reward=0.25)
'''


async def serve_and_ask(target: str, cwd: Path) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gym_metrics.cli", "serve", target, "--port", "0",
        cwd=cwd, stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), timeout=30)).decode()
        address = re.search(r"listening on (\S+:\d+)", line)
        assert address, line
        async with ResourcesClient(address.group(1)) as client:
            name = (await client.server_info()).name
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=20) == 0
        return name
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize("form", ["registered name", "module:Class", "path/app.py:Class"])
async def test_serve_targets_from_an_unrelated_directory(form: str, tmp_path: Path) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "app.py").write_text(APP)
    target, expected = {
        "registered name": ("math_exact", "math_exact"),
        "module:Class": ("gym_metrics_servers.math_exact.app:MathExactServer", "math_exact"),
        "path/app.py:Class": ("envs/app.py:Echo", "echo_from_file"),
    }[form]
    assert await serve_and_ask(target, tmp_path) == expected


async def test_unknown_target_is_a_clear_error(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gym_metrics.cli", "serve", "nope", cwd=tmp_path, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 2 and b"unknown environment 'nope'" in err and b"math_exact" in err
    assert b"Traceback" not in err


async def test_a_port_in_use_is_one_line_without_grpc_core_logs(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gym_metrics.cli", "serve", "math_exact", "--port", str(port),
            cwd=tmp_path, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 2
    assert err.decode().splitlines() == [f"error: gym-metrics cannot listen on 127.0.0.1:{port}: the port is in use, or the address is not on this host"]


@pytest.mark.parametrize("flag", ["--max-rollouts-per-call", "--max-tasks-per-call", "--max-concurrent-aggregations", "--max-call-mb", "--max-rows-per-batch"])
async def test_limit_flags_refuse_nonsense(flag: str, tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gym_metrics.cli", "serve", "math_exact", "--port", "0", flag, "0",
        cwd=tmp_path, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 2 and flag.encode() in err and b"Traceback" not in err


def test_an_http_door_whose_port_is_taken_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """uvicorn's own bind failing exited the process from its task: two tracebacks."""
    import socket

    from gym_metrics import cli

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert cli.main(["serve", "math_exact", "--port", "0", "--http-port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"--http-port cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err
