"""The Docker provider: each run in a container of its own (`docker run --rm`), for hosts where
a Docker engine runs and the local provider's guarantees are not enough (another kernel
through a VM runtime, or images with other toolchains).

The container has no network, a read-only root, a writable /tmp and the run's directory only,
no capabilities, no new privileges, an unprivileged user, and Docker's memory, pids and CPU
bounds; the caller's wall deadline and output cap are the local provider's (`watch`). A run
past its deadline is `docker kill`ed.

Docker reports a process ended by signal N as exit code 128 + N, the same as a program that
exits with 128 + N. So the program runs under a few lines of the image's Python that write its
real wait status into the run's directory: exit 130 stays an exit, SIGINT a signal. Without
that file (the container was killed: the deadline, Docker's OOM kill) the run ended by signal.
An image without Python can run commands with `status_python=None`, which reads 128 + N as a
signal, as Docker does.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
import time
import uuid
from pathlib import Path

from gym_metrics.sandbox._program import Limits, Program, RunResult, SandboxError, write_files
from gym_metrics.sandbox._provider import KeptProgram
from gym_metrics.sandbox._watch import stop_of, watch

_OOM_EXIT = 137  # 128 + SIGKILL: what Docker's out-of-memory kill exits with
_STATUS_FILE = ".gm_status"
_WRAPPER = (
    "import subprocess, sys\ncode = subprocess.call(sys.argv[1:])\n"
    "open('/work/" + _STATUS_FILE + "', 'w').write(str(code))\nsys.exit(code if code >= 0 else 128 - code)"
)
"""Runs the program and writes its returncode (-N for signal N) beside it."""


class DockerProvider:
    """Runs programs with `docker run` in `image` (Python source as `python main.py`)."""

    def __init__(self, image: str = "python:3.12-slim", *, docker: str = "docker", size: int = 4, user: str = "65534:65534",
                 status_python: str | None = "python") -> None:  # fmt: skip
        self.image, self.docker, self.user, self.status_python = image, docker, user, status_python
        self._slots = asyncio.Semaphore(size)
        self._names: set[str] = set()

    def _command(self, program: Program, limits: Limits, work: Path, name: str) -> list[str]:
        command = ["python", "main.py"] if program.python is not None else list(program.command)
        if self.status_python is not None:
            command = [self.status_python, "-c", _WRAPPER, *command]
        return [
            self.docker, "run", "--rm", "-i", "--name", name, "--network", "none", "--read-only",
            "--tmpfs", "/tmp:rw,size=64m", "-v", f"{work}:/work", "-w", "/work", "--user", self.user,
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", str(limits.processes),
            "--memory", f"{limits.memory_mb}m", "--memory-swap", f"{limits.memory_mb}m", "--cpus", "1",
            "--ulimit", f"cpu={limits.cpu_s}:{limits.cpu_s + 1}", "--ulimit", f"nofile={limits.open_files}",
            "--ulimit", f"fsize={limits.file_size_mb << 20}", "--env", "HOME=/work", "--env", "TMPDIR=/tmp",
            *(arg for key, value in program.env.items() for arg in ("--env", f"{key}={value}")),
            self.image, *command,
        ]  # fmt: skip

    async def run(self, program: Program, limits: Limits = Limits()) -> RunResult:
        async with self._slots:
            work = Path(tempfile.mkdtemp(prefix="gm-docker-"))
            work.chmod(0o777)  # the container's user writes there
            name = f"gm-sandbox-{uuid.uuid4().hex[:16]}"
            try:
                write_files(work, program.files_to_write(), None)
                return await self._run(program, limits, work, name)
            finally:
                shutil.rmtree(work, ignore_errors=True)

    async def _run(self, program: Program, limits: Limits, work: Path, name: str) -> RunResult:
        start = time.perf_counter()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._command(program, limits, work, name), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
        except OSError as exc:
            raise SandboxError(f"cannot run {self.docker!r}: {exc}") from None
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdin = proc.stdin

        async def feed() -> None:
            try:
                stdin.write(program.stdin)
                await stdin.drain()
                stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass

        self._names.add(name)
        ended = asyncio.ensure_future(proc.wait())
        try:
            watched = await watch(proc.stdout, proc.stderr, feed(), ended, lambda: asyncio.ensure_future(self._kill(name)), limits)
        finally:
            self._names.discard(name)
        if not ended.done():
            proc.kill()
            await proc.wait()
        code = proc.returncode if proc.returncode is not None else -9
        if code == 125:  # docker's own failure (no engine, no image): not the program's
            raise SandboxError(f"docker run failed: {watched.stderr.decode(errors='replace').strip()[-500:]}")
        status = exit_status(code, work / _STATUS_FILE if self.status_python is not None else None)
        stop, sig = stop_of(watched, status, 0.0, limits)
        if code == _OOM_EXIT and watched.stopped is None:
            stop = "memory"  # Docker's OOM kill (a program killing itself with SIGKILL reads the same)
        return RunResult(None if sig is not None else code, watched.stdout, watched.stderr, watched.truncated, stop, sig,
                         time.perf_counter() - start, 0.0, 0, True)  # fmt: skip

    async def _kill(self, name: str) -> None:
        proc = await asyncio.create_subprocess_exec(self.docker, "kill", name, stdout=asyncio.subprocess.DEVNULL,
                                                    stderr=asyncio.subprocess.DEVNULL)  # fmt: skip
        await proc.wait()

    async def open(self, program: Program, limits: Limits = Limits(), *, client: str = "") -> KeptProgram:
        raise SandboxError("the docker provider keeps no programs between calls yet: sessions' interpreters need the local provider")

    async def aclose(self) -> None:
        """Kill the containers of runs still in progress."""
        await asyncio.gather(*(self._kill(name) for name in list(self._names)), return_exceptions=True)


def exit_status(code: int, status_file: Path | None) -> int:
    """The program's exit code, or -N when signal N ended it: from the wrapper's file when it
    wrote one; else Docker's 128 + N is a signal (the container itself was killed)."""
    if status_file is not None:
        text = _read_small_regular(status_file)
        if text is not None:
            try:
                return int(text)
            except ValueError:
                pass
    return 128 - code if code > 128 else code  # no word from the wrapper: the container was killed from outside


def _read_small_regular(path: Path, limit: int = 64) -> bytes | None:
    """At most `limit` bytes of `path` if it is a regular file, never following a link or
    waiting: the program can write its folder, so it could make the status file a FIFO (an
    open that never returns), a link to a host file, or a huge file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    finally:
        os.close(fd)
