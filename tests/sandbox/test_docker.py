"""The Docker provider: a missing docker command or engine is the sandbox's error (never a
program's failure, never a 0), and, where an engine runs, the same programs give the same
results as under the local provider."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import subprocess
import sys
from pathlib import Path

import pytest

from gym_metrics.sandbox import DockerProvider, Limits, Pool, Program, Provider, SandboxError
from gym_metrics.sandbox._docker import _STATUS_FILE, _WRAPPER, exit_status

pytestmark = pytest.mark.timeout(120)


@pytest.mark.usefixtures("sandbox")
def test_both_providers_have_the_calls_environments_use() -> None:
    assert isinstance(Pool(), Provider) and isinstance(DockerProvider(), Provider)


async def test_without_docker_a_run_is_the_sandboxs_error() -> None:
    missing = DockerProvider(docker="/nonexistent/docker")
    with pytest.raises(SandboxError, match="cannot run '/nonexistent/docker'"):
        await missing.run(Program(python="print(1)"))


def engine() -> bool:
    docker = shutil.which("docker")
    return docker is not None and subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(not engine(), reason="no Docker engine answers `docker info` (this machine kind runs none)")
async def test_programs_in_containers_give_the_local_results() -> None:
    docker = DockerProvider()
    try:
        ok = await docker.run(Program(python="print(input()[::-1])", stdin=b"abc\n"), Limits(wall_s=60))
        assert (ok.stop, ok.exit_code, ok.stdout) == ("exit", 0, b"cba\n")
        slow = await docker.run(Program(python="import time\ntime.sleep(60)"), Limits(wall_s=3))
        assert slow.stop == "timeout"
        net = await docker.run(Program(python="import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)"), Limits(wall_s=30))
        assert net.exit_code != 0
    finally:
        await docker.aclose()


@pytest.mark.parametrize(
    ("command", "docker_code", "status"),
    [(["sh", "-c", "exit 130"], 130, 130), (["sh", "-c", "kill -INT $$"], 130, -2), (["sh", "-c", "exit 3"], 3, 3)],
    ids=["exit 130 is an exit", "SIGINT is a signal", "a plain exit"],
)
def test_an_exit_above_128_is_told_from_a_signal(tmp_path: Path, command: list[str], docker_code: int, status: int) -> None:
    """The wrapper the container runs (with this interpreter, in a directory of the test's own)
    writes the real status; Docker's own exit code alone could not tell them apart."""
    wrapper = _WRAPPER.replace("/work/", f"{tmp_path}/")
    done = subprocess.run([sys.executable, "-c", wrapper, *command], check=False)
    assert done.returncode == docker_code
    assert exit_status(done.returncode, tmp_path / _STATUS_FILE) == status


def test_without_the_wrapper_or_its_word_docker_s_convention_holds(tmp_path: Path) -> None:
    assert exit_status(137, tmp_path / "absent") == -9  # killed from outside: no file
    assert exit_status(130, None) == -2 and exit_status(3, None) == 3


@pytest.mark.parametrize("planted", ["fifo", "link", "huge"])
async def test_a_status_file_the_program_planted_never_blocks_or_leaks(tmp_path: Path, planted: str) -> None:
    """The run's folder is writable from the container: a FIFO as the status file hung the
    server's event loop on its open; a link or a huge file must not be read either. A stand-in
    `docker` does only what a container could: it plants the file in the mounted folder."""
    fake = tmp_path / "docker"
    plant = {
        "fifo": 'mkfifo "$w/.gm_status"',
        "link": 'ln -s /etc/hostname "$w/.gm_status"',
        "huge": 'head -c 50000000 /dev/zero > "$w/.gm_status"',
    }[planted]
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do case "$a" in *:/work) w="${{a%:/work}}"; {plant};; esac; done\nexit 1\n')
    fake.chmod(0o755)
    before = set(Path(tempfile.gettempdir()).glob("gm-docker-*"))
    result = await asyncio.wait_for(DockerProvider(docker=str(fake)).run(Program(python="print(1)"), Limits(wall_s=5)), 30)
    assert result.exit_code == 1 and set(Path(tempfile.gettempdir()).glob("gm-docker-*")) == before
