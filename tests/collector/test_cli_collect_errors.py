"""`gym-metrics collect` against a server that refuses it: a clear error, never a traceback."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics import BaseVerifyRequest, SimpleResourcesServer
from gym_metrics.cli import main as cli_main
from gym_metrics_servers.math_exact import SAMPLE_PATH, MathExactServer


async def run_cli(*args: str, env_extra: dict[str, str] | None = None) -> tuple[int, str]:
    import os

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gym_metrics.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env_extra or {})},
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return proc.returncode or 0, err.decode()


async def test_unauthenticated_collect_is_a_clear_error_and_the_token_works(tmp_path: Path) -> None:
    server = await start_server(MathExactServer(), ServerConfig(port=0, auth_token="s3cret", log_requests=False))
    try:
        out = tmp_path / "out.jsonl"
        code, err = await run_cli("collect", "--server", server.address, "--input", str(SAMPLE_PATH), "--output", str(out))
        assert code == 2 and "UNAUTHENTICATED" in err and "Traceback" not in err
        code, err = await run_cli(
            "collect", "--server", server.address, "--input", str(SAMPLE_PATH), "--output", str(tmp_path / "ok.jsonl"),
            "--auth-token-env", "GM_TOKEN", env_extra={"GM_TOKEN": "s3cret"},
        )
        assert code == 0, err
        assert "s3cret" not in err
        assert len((tmp_path / "ok.jsonl").read_text().splitlines()) == 144
    finally:
        await server.stop(0)


async def test_unreachable_server_gives_up_clearly(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, err = await run_cli(
        "collect", "--server", f"127.0.0.1:{port}", "--input", str(SAMPLE_PATH),
        "--output", str(tmp_path / "o.jsonl"), "--connect-timeout", "1",
    )
    assert code == 4, err
    assert f"cannot reach the server at 127.0.0.1:{port}: UNAVAILABLE" in err and "Traceback" not in err  # refused: not waited for


async def test_a_rollout_the_server_refuses_names_its_input_line(tmp_path: Path) -> None:
    """The server numbers nothing (it answers per rollout); the collector names the line."""
    rows = [json.loads(line) for line in SAMPLE_PATH.read_text().splitlines()[:3]]
    for row in rows:
        row.pop("_ng_task_index"), row.pop("_ng_rollout_index")
    del rows[1]["expected_answer"]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    async with await start_server("math_exact", ServerConfig(port=0, log_requests=False)) as server:
        code = await asyncio.to_thread(cli_main, ["collect", "--server", server.address, "--input", str(src), "--output", str(out)])
    assert code == 0
    errors = [json.loads(line)["_gm_error"] for line in out.read_text().splitlines() if "_gm_error" in line]
    assert len(errors) == 1 and errors[0]["kind"] == "invalid_request"
    assert errors[0]["message"].startswith("input line 2: ") and "expected_answer" in errors[0]["message"]
    assert "row" not in errors[0]["message"]


async def test_input_and_the_failures_sidecar_are_named_when_missing(tmp_path: Path) -> None:
    """`--input` may be left out only with --reverify-failed (which reads the output's
    failures sidecar); with no sidecar there is nothing to verify again. One line each, exit 2."""
    server = await start_server(MathExactServer(), ServerConfig(port=0, log_requests=False))
    try:
        out = str(tmp_path / "out.jsonl")
        code, err = await run_cli("collect", "--server", server.address, "--output", out)
        assert code == 2 and "--input is required" in err and "Traceback" not in err
        code, err = await run_cli("collect", "--server", server.address, "--output", out, "--reverify-failed")
        assert code == 2 and "nothing to verify again" in err and "out_failures.jsonl" in err and "Traceback" not in err
    finally:
        await server.stop(0)


class _BrokenMetrics(SimpleResourcesServer):
    async def verify(self, body: BaseVerifyRequest) -> Any:
        return {**body.model_dump(), "reward": 1.0}

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return {"first": tasks[0][0]["nonexistent"]}


async def test_an_environments_own_code_failing_is_exit_1_not_bad_input(tmp_path: Path) -> None:
    """compute_metrics raising under collect exited 2 (bad input), where `aggregate --env` exits 1."""
    server = await start_server(_BrokenMetrics(), ServerConfig(port=0, log_requests=False))
    try:
        code, err = await run_cli("collect", "--server", server.address, "--input", str(SAMPLE_PATH), "--output", str(tmp_path / "out.jsonl"))
        assert code == 1 and "compute_metrics raised KeyError: 'nonexistent'" in err and "Traceback" not in err
    finally:
        await server.stop(0)


def test_too_many_processes_are_refused_before_any_work(tmp_path: Path, capsys: Any) -> None:
    """`--processes 99999999999` ran the machine out of memory: one real process a shard."""
    import os

    most = max(8, 4 * (os.cpu_count() or 1))
    base = ["collect", "--server", "127.0.0.1:1", "--input", str(SAMPLE_PATH), "--output", str(tmp_path / "out.jsonl")]
    assert cli_main([*base, "--processes", str(most + 1)]) == 2
    err = capsys.readouterr().err
    assert f"--processes: {most + 1:,} is more than {most:,} processes on this machine's" in err and "Traceback" not in err
    assert cli_main([*base, "--processes", "99999999999", "--ray"]) == 2 and "more than 4,096 a Ray run's shards" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()
