"""The local provider: run programs under limits in launchers it spawns (never forking the
caller's process, as gRPC's fork handlers require); each run a fork of a launcher.

Isolation `strict` (the default; _isolation.py checks the host can give it), in layers
(docs/sandbox.md has the threat model and the cost of each):
- bubblewrap around each launcher: only the system's programs, the interpreter and the runs'
  directory are there (read-only but the last), fresh network, PID, IPC and UTS namespaces;
- per run (_confine.py): its own mount, IPC, network and PID namespaces, its directory a tmpfs
  capped in bytes and inodes, a seccomp filter (no new namespaces, no keyring, no mounts);
- a user of the run's own (_users.py): the processes limit holds per run, root's files and
  processes are out of reach;
- a cgroup per run where the host allows (_cgroups.py): one bound on the memory and processes
  of everything the run forks; rlimits per process (CPU, address space, file size, open files,
  processes); no_new_privs;
- a scrubbed environment (only what the run is given, plus PATH and LANG), no inherited file
  descriptors, a wall-clock deadline and an output cap enforced from here.
Isolation `none` keeps only the rlimits, the user and the caller's limits; its results say
`isolated: False`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from gym_metrics.sandbox._bwrap import bwrap_path, bwrap_prefix
from gym_metrics.sandbox._cgroups import Cgroups
from gym_metrics.sandbox._isolation import LAUNCHER, Isolation, SandboxUnavailableError, check_isolation, default_isolation, warn_root_runs
from gym_metrics.sandbox._program import Limits, Program, RunResult, SandboxError, write_files
from gym_metrics.sandbox._users import lease_uid, others_can_run
from gym_metrics.sandbox._watch import REPORT_GRACE_S, stop_of, watch


class LauncherGoneError(SandboxError):
    """The launcher was gone before it took the job: the program never started (safe to retry)."""


class Launcher:
    """One launcher process (in bubblewrap's namespaces unless isolation is `none`) serving
    runs: each is a fork of it, so a run costs a fork, not an interpreter start. Runs' working
    directories are made in `root`, each its user's own."""

    def __init__(self, proc: asyncio.subprocess.Process, sock: socket.socket, root: Path, isolation: Isolation,
                 users: bool = True) -> None:  # fmt: skip
        self.proc, self._sock, self.root, self.isolation, self.users = proc, sock, root, isolation, users
        self._let_go = weakref.finalize(self, _let_go, sock, proc.pid, root)
        """discard's work, done at the latest when the launcher is collected or the interpreter
        exits: one never closed (its pool's owner never closed it) leaves no folder behind."""

    @property
    def isolated(self) -> bool:
        return self.isolation == "strict"

    def _isolated(self, uid: int | None) -> bool:
        """A run's `isolated`: strict, and not left with root's uid (users=False on a root
        server: root's own files are readable, docs/sandbox.md#threat-model)."""
        return self.isolated and (uid is not None or os.geteuid() != 0)

    @classmethod
    async def start(cls, *, isolation: Isolation | None = None, users: bool = True, cgroups: Cgroups | None = None) -> Launcher:
        """`isolation`: `strict` (default, or GYM_METRICS_SANDBOX_ISOLATION) or `none`, checked
        against this host first (SandboxUnavailableError); `users`: each run as a user of its
        own when this process is root (off only to measure what it costs); `cgroups`: where to
        make each run's cgroup (a Pool finds them)."""
        isolation = isolation or default_isolation()
        await asyncio.to_thread(check_isolation, isolation)
        if not users and isolation == "strict" and os.geteuid() == 0:
            warn_root_runs()
        bwrap = bwrap_path() if isolation == "strict" else None
        if isolation == "strict" and bwrap is None:
            raise SandboxUnavailableError("the sandbox cannot isolate runs: bubblewrap (bwrap) is gone")
        await asyncio.to_thread(_remove_stale_roots)
        root = Path(tempfile.mkdtemp(prefix=f"gm-sandbox-{os.getpid()}-"))
        root.chmod(0o711)  # runs' users may reach their own directory in it, and list nothing
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        flags, cgroup_fds = cgroups.launcher_args() if cgroups is not None else ([], [])
        command = [sys.executable, "-I", str(LAUNCHER), str(theirs.fileno()), *(["--confine"] if bwrap else []), *flags]
        if bwrap is not None:
            command = [*bwrap_prefix(bwrap, root, str(LAUNCHER.parent)), *command]
        try:
            proc = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, cwd=root, start_new_session=True, close_fds=True,
                pass_fds=(theirs.fileno(), *cgroup_fds), env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            )  # fmt: skip
        except BaseException:
            ours.close()
            remove_tree(root)
            raise
        finally:
            theirs.close()
            for fd in cgroup_fds:
                os.close(fd)
        return cls(proc, ours, root, isolation, users)

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None and self._sock.fileno() >= 0

    def discard(self) -> None:
        """Stop it without waiting (its event loop may be gone)."""
        self._let_go()

    async def aclose(self) -> None:
        """No more jobs: the launcher exits (runs in progress are killed with it)."""
        self._sock.close()
        _kill_group(self.proc.pid)
        await self.proc.wait()
        await asyncio.to_thread(remove_tree, self.root)
        self._let_go.detach()  # done (a cancelled aclose leaves it to the finaliser)

    async def run(self, program: Program, limits: Limits) -> RunResult:
        """Run `program` under `limits` (see the module docstring)."""
        async with self._place(program) as (work, uid):
            return await self._run(program, limits, work, uid)

    async def open(self, program: Program, limits: Limits, *, client: str = "") -> OpenRun:
        """Start `program` and hand over its pipes (a process kept between calls, e.g. a
        session's interpreter); `OpenRun.close` stops it and frees its place. (`client`: the
        Provider protocol's; a launcher alone keeps no shares.)"""
        stack = contextlib.AsyncExitStack()
        work, uid = await stack.enter_async_context(self._place(program))
        try:
            control, streams = await self._start(program, limits, work, uid)
        except BaseException:
            await stack.aclose()
            raise
        return OpenRun(control, streams, stack, work)

    @contextlib.asynccontextmanager
    async def _place(self, program: Program) -> AsyncIterator[tuple[Path, int | None]]:
        """A run's working directory with its files (staged: a confined run gets them in its
        own tmpfs) and its user (leased for the run); the files written and the directory
        removed off the event loop (a big one takes seconds), the lease always released."""
        lease = lease_uid() if self.users else None
        work: Path | None = None
        prepared: asyncio.Future[None] | None = None
        try:
            work = Path(tempfile.mkdtemp(dir=self.root, prefix="run-"))
            uid = lease.uid if lease is not None else None
            runs = sys.executable if program.python is not None else shutil.which(program.command[0]) or program.command[0]
            if uid is not None and not self.isolated and not others_can_run(runs):
                uid = None  # its user could not reach the program (e.g. an interpreter under /root): the server's user
            if uid is not None:
                os.chown(work, uid, uid)
            prepared = asyncio.ensure_future(asyncio.to_thread(write_files, work, program.files_to_write(), uid))
            await asyncio.shield(prepared)
            yield work, uid
        finally:
            try:
                await asyncio.shield(asyncio.ensure_future(_free(work, prepared)))
            finally:
                if lease is not None:
                    lease.release()

    async def _start(self, program: Program, limits: Limits, work: Path, uid: int | None) -> tuple[int, _Streams]:
        """Send the job with its pipes; this end of its control pipe and its streams."""
        job = {
            "command": list(program.command), "python": program.python is not None, "cwd": str(work), "uid": uid,
            "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(work),
                    "TMPDIR": str(work), **program.env},
            "cpu_s": limits.cpu_s, "memory_mb": limits.memory_mb, "file_size_mb": limits.file_size_mb,
            "open_files": limits.open_files, "processes": limits.processes, "nice": limits.nice,
            "disk_mb": limits.disk_mb, "inodes": limits.inodes,
        }  # fmt: skip
        (stdin_r, stdin_w), (out_r, out_w), (err_r, err_w), (rep_r, rep_w), (ctl_r, ctl_w) = (os.pipe() for _ in range(5))
        theirs = [stdin_r, out_w, err_w, rep_w, ctl_r]
        try:
            socket.send_fds(self._sock, [json.dumps(job).encode()], theirs)
        except OSError as exc:
            for fd in (stdin_w, out_r, err_r, rep_r, ctl_w):
                _close(fd)
            raise LauncherGoneError(f"the sandbox launcher is gone ({exc})") from None
        finally:
            for fd in theirs:
                _close(fd)
        try:
            return ctl_w, await _Streams.open(stdin_w, out_r, err_r, rep_r)
        except BaseException:
            _close(ctl_w)
            raise

    async def _run(self, program: Program, limits: Limits, work: Path, uid: int | None) -> RunResult:
        start = time.perf_counter()
        ctl_w, streams = await self._start(program, limits, work, uid)
        control = [ctl_w]

        def kill() -> None:
            """Close the control pipe once: a second close could hit another run's reused fd."""
            while control:
                _close(control.pop())

        reported = asyncio.ensure_future(streams.report.read())
        try:
            watched = await watch(streams.stdout, streams.stderr, streams.feed(program.stdin), reported, kill, limits)
        finally:
            kill()
            streams.close()
        report = _parse_report(reported.result() if reported.done() and not reported.cancelled() else b"")
        if not report:
            reported.cancel()
            raise SandboxError("the sandbox lost the run: no report from its runner")
        if report.get("error"):
            raise SandboxError(f"the sandbox could not start the run: {report['error']}")
        code, cpu = report["exit_code"], float(report.get("cpu_s", 0.0))
        stop, sig = stop_of(watched, code, cpu, limits, oom=bool(report.get("oom")))
        return RunResult(None if sig is not None else code, watched.stdout, watched.stderr, watched.truncated, stop, sig,
                         time.perf_counter() - start, cpu, int(report.get("max_rss_kb", 0)), self._isolated(uid), uid)  # fmt: skip


async def _free(work: Path | None, prepared: asyncio.Future[None] | None) -> None:
    """The run's directory, once its files are written (also when its caller was cancelled)."""
    if prepared is not None:
        with contextlib.suppress(Exception):
            await prepared
    if work is not None:
        await asyncio.to_thread(remove_tree, work)


@functools.lru_cache(maxsize=1)
def _remove_stale_roots() -> None:
    """Once a process: the launchers' folders of servers that are gone (killed: a SIGKILL runs
    no cleanup), which held the staged programs of the runs they had in flight."""
    for root in Path(tempfile.gettempdir()).glob("gm-sandbox-*-*"):
        pid = root.name.split("-")[2]
        if not pid.isascii() or not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its server lives (or another process has its pid: left alone)
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue
        with contextlib.suppress(OSError):
            if root.stat().st_uid == os.geteuid():
                remove_tree(root)


def remove_tree(path: Path) -> None:
    """Remove a directory whatever it holds: shutil.rmtree recurses (a run's 3,000 nested
    directories overflow it on Python 3.10-3.12), so past its reach `rm -rf` finishes the job."""
    try:
        shutil.rmtree(path)
        return
    except FileNotFoundError:
        return
    except (RecursionError, OSError):
        pass
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=600)  # fmt: skip


class _Streams:
    """A run's pipes on this event loop: stdin to feed, stdout and stderr, the runner's report."""

    def __init__(self, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader, stderr: asyncio.StreamReader,
                 report: asyncio.StreamReader, transports: list[asyncio.BaseTransport]) -> None:  # fmt: skip
        self.stdin, self.stdout, self.stderr, self.report, self._transports = stdin, stdout, stderr, report, transports

    @classmethod
    async def open(cls, stdin_w: int, out_r: int, err_r: int, rep_r: int) -> _Streams:
        loop = asyncio.get_running_loop()
        transports: list[asyncio.BaseTransport] = []
        try:
            readers = []
            for fd in (out_r, err_r, rep_r):
                reader = asyncio.StreamReader(limit=1 << 20)
                protocol = asyncio.StreamReaderProtocol(reader)
                read_end, _ = await loop.connect_read_pipe(lambda p=protocol: p, os.fdopen(fd, "rb", 0))  # type: ignore[misc]
                transports.append(read_end)
                readers.append(reader)
            to_stdin = asyncio.StreamReaderProtocol(asyncio.StreamReader())
            write_end, _ = await loop.connect_write_pipe(lambda: to_stdin, os.fdopen(stdin_w, "wb", 0))
            transports.append(write_end)
        except BaseException:
            for t in transports:
                t.close()
            raise
        stdout, stderr, report = readers
        return cls(asyncio.StreamWriter(write_end, to_stdin, None, loop), stdout, stderr, report, transports)

    async def feed(self, data: bytes) -> None:
        try:
            if data:
                self.stdin.write(data)
                await self.stdin.drain()
            self.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def close(self) -> None:
        for t in self._transports:
            t.close()


class OpenRun:
    """A started program's pipes (Launcher.open), until `close`."""

    def __init__(self, control: int, streams: _Streams, place: contextlib.AsyncExitStack, work: Path) -> None:
        self._control, self._streams, self._place, self.work = control, streams, place, work
        self.stdin, self.stdout, self.stderr = streams.stdin, streams.stdout, streams.stderr
        self._on_close: list[Callable[[], None]] = []

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` once, when it is closed (a pool frees its place)."""
        self._on_close.append(callback)

    async def close(self) -> None:
        """Kill it (if still running), wait for its runner's word, free its place."""
        if self._control < 0:
            return
        control, self._control = self._control, -1
        _close(control)
        try:
            await asyncio.wait_for(self._streams.report.read(), REPORT_GRACE_S)
        except asyncio.TimeoutError:
            pass
        finally:
            self._streams.close()
            while self._on_close:
                self._on_close.pop()()
            await self._place.aclose()


async def run_local(program: Program, limits: Limits = Limits(), *, isolation: Isolation | None = None,
                    users: bool = True) -> RunResult:  # fmt: skip
    """Run `program` under `limits` in a launcher started for it (see the module docstring),
    in a cgroup of its own where the host allows (so `memory_mb` and `processes` bound the run
    as a whole, as in a Pool); a Pool's `run` does the same in launchers started ahead."""
    cgroups = await asyncio.to_thread(Cgroups.find) if os.geteuid() == 0 else None
    try:
        launcher = await Launcher.start(isolation=isolation, users=users, cgroups=cgroups)
        try:
            return await launcher.run(program, limits)
        finally:
            await launcher.aclose()
    finally:
        if cgroups is not None:
            await asyncio.to_thread(cgroups.remove)


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _let_go(sock: socket.socket, pid: int, root: Path) -> None:
    """A launcher stopped without waiting: its socket closed, its process group killed, its
    folder removed."""
    sock.close()
    _kill_group(pid)
    remove_tree(root)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _parse_report(data: bytes) -> dict[str, Any]:
    """The runner's report (exit status, CPU, peak memory); {} when it had none to give."""
    try:
        value = json.loads(data) if data else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) and isinstance(value.get("exit_code"), int) else {}
