"""Live servers for the clients in other languages: `serve math_exact` and `jobs serve`."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def start(args: list[str], pattern: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", *args], stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 60
    while not (found := re.search(pattern, log.read_text(errors="replace"))):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return proc, found[1]


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    logs = tmp_path_factory.mktemp("servers")
    math_exact, resources = start(["serve", "math_exact", "--port", "0"], r"listening on (\S+:\d+)", logs / "serve.err")
    jitter_proc, jitter = start(["serve", f"{Path(__file__).parent / '_jitter_env.py'}:JitterMath", "--port", "0"], r"listening on (\S+:\d+)", logs / "jitter.err")
    jobs, job_server = start(["jobs", "serve", "--db", str(logs / "jobs.sqlite"), "--port", "0", "--data-root", str(logs)],
                             r"job server listening on (\S+:\d+)", logs / "jobs.err")  # fmt: skip
    try:
        yield {"resources": resources, "jobs": job_server, "jitter": jitter}
    finally:
        for proc in (math_exact, jitter_proc, jobs):
            proc.terminate()
            proc.wait(30)
