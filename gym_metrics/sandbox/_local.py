"""The local provider: run one program under limits, in a fresh process group, never forking
the caller's process (the program is spawned, as gRPC's fork handlers require).

Isolation, in layers (docs/sandbox.md has the threat model):
- rlimits, set by a small launcher before it execs the program: CPU seconds, address space,
  file size, open files, processes (root is exempt from the last: see the docs);
- bubblewrap when installed (`bwrap`): a read-only view of the filesystem, a private /tmp,
  fresh network, pid, IPC and UTS namespaces (no network, loopback included), killed with its
  parent; without it the run says so (`isolated=False`);
- a scrubbed environment (only what the run is given, plus PATH and LANG), a private temporary
  working directory (removed afterwards), no inherited file descriptors;
- a wall-clock deadline and an output cap, both enforced from here: past either, the whole
  process group is killed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Stop = Literal["exit", "timeout", "memory", "output_limit", "signal", "cpu"]
"""Why a run stopped: it exited, or was stopped for that reason."""


@dataclass(frozen=True)
class Limits:
    """What one run may use."""

    wall_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 512
    """Address space (RLIMIT_AS)."""
    output_bytes: int = 1 << 20
    """stdout and stderr each, kept; past it the run is stopped (`output_limit`)."""
    file_size_mb: int = 64
    open_files: int = 64
    processes: int = 64


@dataclass(frozen=True)
class Program:
    """A program to run: its command, its stdin, files written into its working directory
    first (name -> content), and its environment (nothing else is inherited)."""

    command: Sequence[str]
    stdin: bytes = b""
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunResult:
    """What a run did."""

    exit_code: int | None
    """None when it ended by a signal."""
    stdout: bytes
    stderr: bytes
    truncated: bool
    """True when stdout or stderr was cut at the output limit."""
    stop: Stop
    signal: int | None
    wall_s: float
    cpu_s: float
    max_rss_kb: int
    isolated: bool
    """True when bubblewrap's namespaces were in force (else rlimits and the group only)."""


_LAUNCHER = Path(__file__).with_name("_launch.py")
"""Run by file (standard library only): nothing of the caller's environment is imported."""


def _under_tmp() -> list[str]:
    """What the run needs that a private /tmp would hide: the interpreter and the launcher
    when they live under /tmp (a venv or a checkout there), read-only."""
    tmp = os.path.realpath(tempfile.gettempdir()).rstrip("/") + "/"
    needed = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), str(_LAUNCHER.parent)}
    return sorted(p for p in (os.path.realpath(n) for n in needed) if (p + "/").startswith(tmp) or p.startswith("/tmp/"))


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


async def run_local(program: Program, limits: Limits = Limits(), *, isolate: bool = True) -> RunResult:
    """Run `program` under `limits` (see the module docstring)."""
    work = Path(tempfile.mkdtemp(prefix="gm-sandbox-"))
    try:
        for name, content in program.files.items():
            target = (work / name).resolve()
            if work.resolve() not in target.parents:
                raise ValueError(f"file {name!r} would be written outside the working directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)
        return await _run(program, limits, work, isolate)
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _run(program: Program, limits: Limits, work: Path, isolate: bool) -> RunResult:
    bwrap = bwrap_path() if isolate else None
    report_r, report_w = os.pipe()
    launcher = [sys.executable, "-I", "-S", str(_LAUNCHER), str(report_w), str(limits.cpu_s), str(limits.memory_mb),
                str(limits.file_size_mb), str(limits.open_files), str(limits.processes), "--", *program.command]  # fmt: skip
    if bwrap is not None:
        launcher = [
            bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            *(arg for path in _under_tmp() for arg in ("--ro-bind", path, path)),
            "--bind", str(work), str(work), "--chdir", str(work), "--unshare-all", "--die-with-parent",
            "--new-session", "--", *launcher,
        ]  # fmt: skip
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(work), **program.env}
    start = time.perf_counter()
    try:
        proc = await asyncio.create_subprocess_exec(
            *launcher, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            cwd=work, env=env, start_new_session=True, close_fds=True, pass_fds=(report_w,),
        )  # fmt: skip
    finally:
        os.close(report_w)
    stop: Stop = "exit"
    over = asyncio.Event()

    async def read(stream: asyncio.StreamReader | None, out: bytearray) -> None:
        """Keep up to the limit; past it, say so and drain the rest (the pipe must reach EOF
        for the process to be reaped once it is killed)."""
        assert stream is not None
        while chunk := await stream.read(65536):
            room = limits.output_bytes - len(out)
            if room > 0:
                out += chunk[:room]
            if len(chunk) > room:
                over.set()

    async def feed() -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(program.stdin)
            await proc.stdin.drain()
            proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass

    stdout, stderr = bytearray(), bytearray()
    io = asyncio.gather(read(proc.stdout, stdout), read(proc.stderr, stderr), feed())
    waiting = asyncio.ensure_future(proc.wait())
    limit_hit = asyncio.ensure_future(over.wait())
    done, _ = await asyncio.wait({waiting, limit_hit}, timeout=limits.wall_s, return_when=asyncio.FIRST_COMPLETED)
    if waiting not in done:
        stop = "output_limit" if limit_hit in done else "timeout"
    _kill_group(proc.pid)  # also what it left running in the background
    await proc.wait()
    limit_hit.cancel()
    io.cancel()
    await asyncio.gather(io, return_exceptions=True)
    wall = time.perf_counter() - start
    report = _report(report_r)
    code = report.get("exit_code", proc.returncode)
    sig = -code if isinstance(code, int) and code < 0 else None
    if stop == "exit" and sig is not None:
        used = float(report.get("cpu_s", 0.0))  # SIGXCPU at the soft limit, SIGKILL at the hard one
        stop = "cpu" if sig == signal.SIGXCPU or (sig == signal.SIGKILL and used >= 0.9 * limits.cpu_s) else "signal"
    if stop in ("exit", "signal") and (b"MemoryError" in stderr[-4096:] or b"Cannot allocate memory" in stderr[-4096:]):
        stop = "memory"
    return RunResult(None if sig is not None else code, bytes(stdout), bytes(stderr), over.is_set(), stop, sig, wall,
                     float(report.get("cpu_s", 0.0)), int(report.get("max_rss_kb", 0)), bwrap is not None)  # fmt: skip


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _report(fd: int) -> dict[str, Any]:
    """The launcher's report (exit status, CPU, peak memory); {} when it had none to give."""
    import json

    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(4096)
        value = json.loads(data) if data else {}
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}
