"""Live servers for the clients in other languages: `serve math_exact` (also one that requires a
bearer token) and `jobs serve`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _compare import TOKEN, TOKEN_ENV


def spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", *args], stdout=subprocess.DEVNULL, stderr=err, env=env)


def _data_root(logs: Path) -> Path:
    """Beside the job server's database, never around it (refused: a job could read it)."""
    (logs / "data").mkdir(exist_ok=True)
    return logs / "data"


def address(proc: subprocess.Popen[bytes], pattern: str, log: Path) -> str:
    deadline = time.monotonic() + 60
    while not (found := re.search(pattern, log.read_text(errors="replace"))):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return found[1]


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Started together (each takes a second or two to import), then waited for."""
    logs = tmp_path_factory.mktemp("servers")
    listening = r"listening on (\S+:\d+)"
    env = {k: v for k, v in os.environ.items() if k != "GYM_METRICS_AUTH_TOKEN"}
    started = {
        "resources": (spawn(["serve", "math_exact", "--port", "0"], logs / "serve.err", env), listening, logs / "serve.err"),
        "jitter": (spawn(["serve", f"{Path(__file__).parent / '_jitter_env.py'}:JitterMath", "--port", "0"], logs / "jitter.err", env),
                   listening, logs / "jitter.err"),
        "jobs": (spawn(["jobs", "serve", "--db", str(logs / "jobs.sqlite"), "--port", "0", "--data-root", str(_data_root(logs))], logs / "jobs.err", env),
                 r"job server listening on (\S+:\d+)", logs / "jobs.err"),
        # math_exact that requires `authorization: Bearer TOKEN` on every call
        "auth": (spawn(["serve", "math_exact", "--port", "0", "--auth-token-env", TOKEN_ENV], logs / "auth.err", {**env, TOKEN_ENV: TOKEN}),
                 listening, logs / "auth.err"),
    }  # fmt: skip
    try:
        yield {name: address(proc, pattern, log) for name, (proc, pattern, log) in started.items()}
    finally:
        for proc, _, _ in started.values():
            proc.terminate()
        for proc, _, _ in started.values():
            proc.wait(30)
