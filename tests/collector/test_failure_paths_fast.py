"""The collector's failure paths, fast (issue 24.13): exit 3 (every rollout failed), exit 4 (a
server lost mid-run that stays away), a replica lost mid-run (the others finish it) and a server
restarted on the same address (picked up, same metrics). The slow tests cover each with
subprocesses, kills and big inputs; these use in-process servers on 127.0.0.1:0, so the legs
that run `-m "not slow"` (.ci/run: 3.10 and 3.13) cover them too. Each takes about a second.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics.cli import main as cli_main
from gym_metrics_servers.math_exact import SAMPLE_PATH, MathExactServer, MathVerifyRequest, MathVerifyResponse

pytestmark = pytest.mark.timeout(60)

ROWS = len(SAMPLE_PATH.read_text().splitlines())  # 144
PACE = ["--batch-size", "8", "--max-in-flight", "1"]
"""18 batches, one at a time: the run is still going when the test stops a server."""


class PacedMath(MathExactServer):
    """math_exact, 20 ms a verify: a batch of 8 takes ~20 ms, the run ~0.4 s."""

    async def verify(self, body: MathVerifyRequest) -> MathVerifyResponse:
        await asyncio.sleep(0.02)
        return await super().verify(body)


def config(port: int = 0) -> ServerConfig:
    return ServerConfig(port=port, log_requests=False)


def collect(tmp_path: Path, *servers: str, extra: tuple[str, ...] = (), src: Path = SAMPLE_PATH) -> asyncio.Future[Any]:
    """`gym-metrics collect` in a thread (the servers run on this test's loop)."""
    args = ["collect", *[a for s in servers for a in ("--server", s)], "--input", str(src),
            "--output", str(tmp_path / "out.jsonl"), *extra]  # fmt: skip
    return asyncio.ensure_future(asyncio.to_thread(cli_main, args))


async def lines_written(path: Path, at_least: int, run: asyncio.Future[Any]) -> None:
    """Wait until `path` has `at_least` lines (the run must still be going)."""
    for _ in range(1000):  # bounded: 10 s
        if path.exists() and len(path.read_bytes().splitlines()) >= at_least:
            return
        assert not run.done(), f"the run ended early with {run.result()}"
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} never reached {at_least} lines")


def complete(out: Path) -> bool:
    keys = [(r["agent_ref"]["name"], r["_ng_task_index"], r["_ng_rollout_index"]) for r in map(json.loads, out.read_text().splitlines())]
    return len(keys) == len(set(keys)) == ROWS


def metrics(out: Path) -> bytes:
    return out.with_name(out.stem + "_aggregate_metrics.json").read_bytes()


async def test_every_rollout_failed_is_exit_3(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in SAMPLE_PATH.read_text().splitlines()[:12]]
    for row in rows:
        del row["expected_answer"]  # each one an invalid_request: nothing verified
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    async with await start_server(MathExactServer(), config()) as server:
        code = await collect(tmp_path, server.address, src=src)
    assert code == 3


async def test_a_server_lost_mid_run_that_stays_away_is_exit_4(tmp_path: Path) -> None:
    server = await start_server(PacedMath(), config())
    run = collect(tmp_path, server.address, extra=(*PACE, "--max-retries", "2"))
    try:
        await lines_written(tmp_path / "out.jsonl", 16, run)
    finally:
        await server.stop(0)
    assert await asyncio.wait_for(run, 30) == 4
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) < ROWS


async def test_a_replica_lost_mid_run_leaves_the_run_to_the_others(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    async with await start_server(PacedMath(), config()) as kept:
        assert await collect(reference, kept.address) == 0
        lost = await start_server(PacedMath(), config())
        run = collect(tmp_path, lost.address, kept.address, extra=(*PACE, "--max-retries", "1"))
        try:
            await lines_written(tmp_path / "out.jsonl", 16, run)
        finally:
            await lost.stop(0)
        assert await asyncio.wait_for(run, 30) == 0
    out = tmp_path / "out.jsonl"
    assert complete(out)
    assert metrics(out) == metrics(reference / "out.jsonl")


async def test_a_server_restarted_on_its_address_is_picked_up(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    server = await start_server(PacedMath(), config())
    port = server.port
    assert await collect(reference, server.address) == 0
    run = collect(tmp_path, server.address, extra=PACE)
    try:
        await lines_written(tmp_path / "out.jsonl", 16, run)
    finally:
        await server.stop(0)
    await asyncio.sleep(0.3)
    assert not run.done(), "the collector gave up while the server was down"
    server = await start_server(PacedMath(), config(port))
    try:
        assert await asyncio.wait_for(run, 30) == 0
    finally:
        await server.stop(0)
    out = tmp_path / "out.jsonl"
    assert complete(out)
    assert metrics(out) == metrics(reference / "out.jsonl")
