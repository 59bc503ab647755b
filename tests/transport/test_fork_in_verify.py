"""A verify that forks a child per rollout (math-verify's timeout, as NeMo Gym's math_with_judge
runs it) is scored right under `gym-metrics serve`: every reward through a real serve
subprocess and `collect` equals the reward computed in process. Before serve turned grpc's
fork handlers off, about one child in ten died of SIGSEGV and was scored 0 (collect exit 0)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = [
    pytest.mark.every_python,  # (see pyproject: what differs between CPython versions)
    pytest.mark.timeout(600),
    pytest.mark.skipif(sys.platform == "win32", reason="the environment forks"),
]

WARNING = "the server forked while grpc's fork handlers are on"

FORKING_ENV = '''
import asyncio
import hashlib
import multiprocessing as mp

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer


class Request(BaseVerifyRequest):
    row_id: int = -1
    answer: str = ""


def score(answer: str) -> float:
    """What the child computes (the test calls it in process for the expected rewards)."""
    return int(hashlib.sha256(answer.encode()).hexdigest()[:8], 16) % 1000 / 999 + 0.001


def _child(answer: str, conn) -> None:
    try:
        conn.send(score(answer))
    finally:
        conn.close()


class ForkPerVerify(SimpleResourcesServer):
    """math_with_judge's pattern: a fork-context child per verify, polled until a deadline;
    a child that dies or says nothing is reward 0 (the silent wrong number)."""

    name = "fork_per_verify"

    async def verify(self, body: Request) -> BaseVerifyResponse:
        ctx = mp.get_context("fork")
        result, child_end = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(body.answer, child_end))
        proc.start()
        child_end.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30.0
        try:
            while proc.is_alive():
                if loop.time() > deadline:
                    proc.kill()
                    proc.join()
                    return BaseVerifyResponse(reward=0.0, row_id=body.row_id, child="timeout")
                await asyncio.sleep(0.005)
            proc.join(timeout=0)
            if proc.exitcode != 0 or not result.poll():
                return BaseVerifyResponse(reward=0.0, row_id=body.row_id, child=f"exit code {proc.exitcode}")
            return BaseVerifyResponse(reward=result.recv(), row_id=body.row_id, child="ok")
        finally:
            result.close()
'''


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("fork_per_verify_env", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _wait_listening(proc: asyncio.subprocess.Process, log: Path, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"listening on (\S+:\d+)", log.read_text())
        if found:
            return found.group(1)
        assert proc.returncode is None, f"serve exited with {proc.returncode}: {log.read_text()[-2000:]}"
        await asyncio.sleep(0.1)
    raise AssertionError(f"serve did not start within {timeout} s: {log.read_text()[-2000:]}")


async def _serve_and_collect(
    tmp_path: Path, rollouts: int, workers: int, fork_support: str | None = None
) -> tuple[dict[int, dict[str, Any]], list[float], str]:
    """Rows out of serve + collect by row id, the in-process rewards, and serve's log."""
    app = tmp_path / "forking_env.py"
    app.write_text(FORKING_ENV)
    answers = [f"answer {i}" for i in range(rollouts)]
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(
        json.dumps({"agent_ref": {"name": "a"}, "responses_create_params": {"input": []}, "_ng_task_index": i,
                    "row_id": i, "answer": answer}) + "\n"
        for i, answer in enumerate(answers)
    ))  # fmt: skip
    score = _load(app).score  # (loaded once: loading it for each of 2,000 answers took 6 s)
    expected = [score(answer) for answer in answers]  # in process, no fork: the right rewards

    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}  # serve's own default
    if fork_support is not None:
        env["GRPC_ENABLE_FORK_SUPPORT"] = fork_support
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        serve = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gym_metrics.cli", "serve", f"{app}:ForkPerVerify", "--port", "0",
            "--workers", str(workers), cwd=tmp_path, env=env, stderr=err,
        )  # fmt: skip
    try:
        address = await _wait_listening(serve, log)
        out = tmp_path / "out.jsonl"
        collect = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gym_metrics.cli", "collect", "--server", address, "--input", str(rows),
            "--output", str(out), cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(collect.communicate(), timeout=480)
        assert collect.returncode == 0, stderr.decode()[-2000:]
    finally:
        if serve.returncode is None:
            serve.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(serve.wait(), timeout=30)
            except asyncio.TimeoutError:
                serve.kill()
                await serve.wait()

    got = {row["row_id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert sorted(got) == list(range(rollouts))
    return got, expected, log.read_text()


async def _all_right(tmp_path: Path, rollouts: int, workers: int) -> None:
    got, expected, log = await _serve_and_collect(tmp_path, rollouts, workers)
    crashed = [f"row {i}: {row['child']}" for i, row in sorted(got.items()) if row["child"] != "ok"]
    assert not crashed, f"{len(crashed)} of {rollouts} verify children failed under serve: {crashed[:5]}"
    wrong = [i for i in range(rollouts) if got[i]["reward"] != expected[i]]
    assert not wrong, f"{len(wrong)} rewards differ from the in-process ones, e.g. rows {wrong[:5]}"
    assert WARNING not in log


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_verify_that_forks_is_scored_right_under_serve(tmp_path: Path, workers: int) -> None:
    await _all_right(tmp_path, rollouts=200, workers=workers)


@pytest.mark.slow  # 7-14 s: on the default Python only (CI's time bound)
async def test_two_thousand_forking_verifies_under_serve_all_scored_right(tmp_path: Path) -> None:
    await _all_right(tmp_path, rollouts=2000, workers=1)


async def test_fork_support_the_user_turned_on_is_kept_and_a_fork_warns_once(tmp_path: Path) -> None:
    _, _, log = await _serve_and_collect(tmp_path, rollouts=20, workers=1, fork_support="1")
    assert log.count(WARNING) == 1, log[-2000:]


def test_every_command_starts_grpc_with_its_fork_handlers_off() -> None:
    """`check-env` and `demo` serve in their own process: only `serve` turned the handlers off,
    so a forking verify (NeMo Gym's polymath through math_with_judge) scored 1-3 of 15 rows 0
    there, differences with NeMo Gym that were not real."""
    import subprocess

    script = ("import os, sys; from gym_metrics.cli import main; main(['aggregate', '--help'])\n"
              "print('|', os.environ.get('GRPC_ENABLE_FORK_SUPPORT'), 'grpc' in sys.modules)")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.stdout.rsplit("|", 1)[1].split() == ["0", "False"], done.stdout + done.stderr
    kept = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env={**env, "GRPC_ENABLE_FORK_SUPPORT": "1"})
    assert kept.stdout.rsplit("|", 1)[1].split()[0] == "1"  # the user's own value wins
