"""The local provider: run one program under limits, in a fresh process group, never forking
the caller's process (the launcher is spawned, as gRPC's fork handlers require).

Isolation, in layers (docs/sandbox.md has the threat model and the cost of each):
- rlimits, set by a small launcher before it execs the program: CPU seconds, address space,
  file size, open files, processes; no_new_privs, so setuid binaries gain nothing;
- as root, a user of the run's own (_users.py): the processes limit holds (root is exempt),
  root's files and processes are out of reach, and everything the user left running is killed;
- bubblewrap when installed (`bwrap`): a read-only view of the filesystem, a private /tmp and
  an empty home (the interpreter re-bound read-only), fresh network, pid, IPC and UTS
  namespaces (no network, loopback included), killed with its parent;
- a scrubbed environment (only what the run is given, plus PATH and LANG), a private temporary
  working directory (removed afterwards), no inherited file descriptors;
- a wall-clock deadline and an output cap, both enforced from here: past either, the whole
  process group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gym_metrics.sandbox._users import lease_uid, others_can_run

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
    """At once, threads included (a fork bomb stops here: enforced where runs have a user of
    their own, see docs/sandbox.md)."""
    nice: int = 10
    """Scheduling priority below the server's: runs busy on every core leave it answering."""


@dataclass(frozen=True)
class Program:
    """A program to run: its command, its stdin, files written into its working directory
    first (name -> content), and its environment (nothing else is inherited)."""

    command: Sequence[str] = ()
    stdin: bytes = b""
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    python: str | None = None
    """Python source to run instead of `command`, in the sandbox's own interpreter (this
    one's, with its site-packages), as `python main.py`: no interpreter start, a warm pool's
    run then costs about a fork."""

    def __post_init__(self) -> None:
        if not self.command and self.python is None:
            raise ValueError("a Program needs a command or Python source")


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
    """True when bubblewrap's namespaces were in force."""
    uid: int | None = None
    """The unprivileged user it ran as (a root server's runs), else None: the server's user."""


_LAUNCHER = Path(__file__).with_name("_launch.py")
"""Run by file (standard library only): nothing of the caller's environment is imported."""


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _hidden() -> list[str]:
    """What the run must not see: /tmp (a private one instead) and the server user's home."""
    home = os.path.realpath(os.path.expanduser("~"))
    return ["/tmp"] + ([home] if home not in ("/", "/tmp") and os.path.isdir(home) else [])


def _rebound(hidden: list[str]) -> list[str]:
    """bwrap arguments showing again, read-only, what the run needs from a hidden place: the
    interpreter and the launcher (a venv or a checkout under /tmp or the home)."""
    needed = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), str(_LAUNCHER.parent)}
    args: list[str] = []
    made: set[str] = set()
    for path in sorted({os.path.realpath(p) for p in needed}):
        top = next((h for h in hidden if path.startswith(h.rstrip("/") + "/")), None)
        if top is None:
            continue
        parent = os.path.dirname(path)
        ancestors = []
        while parent != top and parent not in made:  # searchable by the run's user (bwrap makes them 0700)
            ancestors.append(parent)
            parent = os.path.dirname(parent)
        for a in reversed(ancestors):
            args += ["--perms", "0755", "--dir", a]
            made.add(a)
        args += ["--ro-bind", path, path]
    return args


def _bwrap_prefix(bwrap: str, root: Path) -> list[str]:
    hidden = _hidden()
    return [
        bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        # empty and root's: a run's user can write nowhere but its own directory in `root`
        *(arg for h in hidden for arg in ("--perms", "0755", "--tmpfs", h)),
        *_rebound(hidden),
        "--bind", str(root), str(root), "--chdir", str(root),
        # no user namespace: the launcher inside needs root's power to switch to the run's user
        "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent", "--new-session", "--",
    ]  # fmt: skip


class SandboxError(RuntimeError):
    """The sandbox itself failed (its launcher is gone): the run's outcome is unknown."""


class Launcher:
    """One launcher process (in bubblewrap's namespaces where installed) serving runs: each is
    a fork of it, so a run costs a fork, not an interpreter start. Runs' working directories
    are made in `root`, each its user's own."""

    def __init__(self, proc: asyncio.subprocess.Process, sock: socket.socket, root: Path, isolated: bool, users: bool = True) -> None:
        self.proc, self._sock, self.root, self.isolated, self.users = proc, sock, root, isolated, users

    @classmethod
    async def start(cls, *, isolate: bool = True, users: bool = True) -> Launcher:
        """`isolate`: in bubblewrap's namespaces when installed; `users`: each run as a user of
        its own when this process is root (both off only to measure what each costs)."""
        bwrap = bwrap_path() if isolate else None
        root = Path(tempfile.mkdtemp(prefix="gm-sandbox-"))
        root.chmod(0o711)  # runs' users may reach their own directory in it, and list nothing
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = [sys.executable, "-I", str(_LAUNCHER), str(theirs.fileno())]
        if bwrap is not None:
            command = [*_bwrap_prefix(bwrap, root), *command]
        try:
            proc = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, cwd=root, start_new_session=True, close_fds=True,
                pass_fds=(theirs.fileno(),), env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            )  # fmt: skip
        except BaseException:
            ours.close()
            shutil.rmtree(root, ignore_errors=True)
            raise
        finally:
            theirs.close()
        return cls(proc, ours, root, bwrap is not None, users)

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None and self._sock.fileno() >= 0

    def discard(self) -> None:
        """Stop it without waiting (its event loop may be gone)."""
        self._sock.close()
        _kill_group(self.proc.pid)
        shutil.rmtree(self.root, ignore_errors=True)

    async def aclose(self) -> None:
        """No more jobs: the launcher exits (runs in progress are killed with it)."""
        self.discard()
        await self.proc.wait()

    async def run(self, program: Program, limits: Limits) -> RunResult:
        """Run `program` under `limits` (see the module docstring)."""
        async with self._place(program) as (work, uid):
            return await self._run(program, limits, work, uid)

    async def open(self, program: Program, limits: Limits) -> OpenRun:
        """Start `program` and hand over its pipes (a process kept between calls, e.g. a
        session's interpreter); `OpenRun.close` stops it and frees its place."""
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
        """A run's working directory with its files, and its user (leased for the run)."""
        lease = lease_uid() if self.users else None
        work = Path(tempfile.mkdtemp(dir=self.root, prefix="run-"))
        try:
            uid = lease.uid if lease is not None else None
            runs = sys.executable if program.python is not None else shutil.which(program.command[0]) or program.command[0]
            if uid is not None and not self.isolated and not others_can_run(runs):
                uid = None  # its user could not reach the program (e.g. an interpreter under /root): the server's user
            if uid is not None:
                os.chown(work, uid, uid)
            files = {"main.py": program.python, **program.files} if program.python is not None else program.files
            _write_files(work, files, uid)  # main.py: the source, for its traceback's lines
            yield work, uid
        finally:
            shutil.rmtree(work, ignore_errors=True)
            if lease is not None:
                lease.release()

    async def _start(self, program: Program, limits: Limits, work: Path, uid: int | None) -> tuple[int, _Streams]:
        """Send the job with its pipes; this end of its control pipe and its streams."""
        job = {
            "command": list(program.command), "python": program.python, "cwd": str(work), "uid": uid,
            "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(work),
                    "TMPDIR": str(work), **program.env},
            "cpu_s": limits.cpu_s, "memory_mb": limits.memory_mb, "file_size_mb": limits.file_size_mb,
            "open_files": limits.open_files, "processes": limits.processes, "nice": limits.nice,
        }  # fmt: skip
        (stdin_r, stdin_w), (out_r, out_w), (err_r, err_w), (rep_r, rep_w), (ctl_r, ctl_w) = (os.pipe() for _ in range(5))
        try:
            socket.send_fds(self._sock, [json.dumps(job).encode()], [stdin_r, out_w, err_w, rep_w, ctl_r])
        except OSError as exc:
            for fd in (stdin_w, out_r, err_r, rep_r, ctl_w):
                _close(fd)
            raise SandboxError(f"the sandbox launcher is gone ({exc})") from None
        finally:
            for fd in (stdin_r, out_w, err_w, rep_w, ctl_r):
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
        code, cpu = report["exit_code"], float(report.get("cpu_s", 0.0))
        stop, sig = stop_of(watched, code, cpu, limits)
        return RunResult(None if sig is not None else code, watched.stdout, watched.stderr, watched.truncated, stop, sig,
                         time.perf_counter() - start, cpu, int(report.get("max_rss_kb", 0)), self.isolated, uid)  # fmt: skip


@dataclass(frozen=True)
class Watched:
    """A run's output, and whether the caller stopped it (`timeout`, `output_limit`)."""

    stdout: bytes
    stderr: bytes
    truncated: bool
    stopped: Literal["timeout", "output_limit"] | None


async def watch(stdout: asyncio.StreamReader, stderr: asyncio.StreamReader, feed: Awaitable[None],
                ended: asyncio.Future[Any], kill: Callable[[], object], limits: Limits) -> Watched:  # fmt: skip
    """Feed stdin and keep the output (up to the limit, the rest drained) until `ended`, the
    wall deadline or the output cap; past either, or when cancelled, `kill()` and wait for
    `ended` a little (a provider's kill is milliseconds)."""
    over = asyncio.Event()

    async def read(stream: asyncio.StreamReader, out: bytearray) -> None:
        while chunk := await stream.read(65536):
            room = limits.output_bytes - len(out)
            if room > 0:
                out += chunk[:room]
            if len(chunk) > room:
                over.set()

    out, err = bytearray(), bytearray()
    io = asyncio.gather(read(stdout, out), read(stderr, err), feed)
    limit_hit = asyncio.ensure_future(over.wait())
    done: set[asyncio.Future[Any]] = set()
    try:
        done, _ = await asyncio.wait({ended, limit_hit}, timeout=limits.wall_s, return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when cancelled (the client went away): the run is killed
        limit_hit.cancel()
        if ended not in done:
            kill()
            await asyncio.wait({ended}, timeout=_REPORT_GRACE_S)
        # its output's last bytes (a writer that escaped the kill could hold the pipe: not for long)
        await asyncio.wait({io}, timeout=_REPORT_GRACE_S)
        io.cancel()
        await asyncio.gather(io, return_exceptions=True)
    stopped: Literal["timeout", "output_limit"] | None = None
    if ended not in done:
        stopped = "output_limit" if limit_hit in done else "timeout"
    return Watched(bytes(out), bytes(err), over.is_set(), stopped)


def stop_of(watched: Watched, code: int, cpu_s: float, limits: Limits) -> tuple[Stop, int | None]:
    """Why the run stopped, and the signal that ended it (exit code -N)."""
    sig = -code if code < 0 else None
    if watched.stopped is not None:
        return watched.stopped, sig
    stop: Stop = "exit"
    if sig is not None:  # SIGXCPU at the soft CPU limit, SIGKILL at the hard one
        stop = "cpu" if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= 0.9 * limits.cpu_s) else "signal"
    tail = watched.stderr[-4096:]
    if stop != "cpu" and code != 0 and (b"MemoryError" in tail or b"Cannot allocate memory" in tail):
        stop = "memory"
    return stop, sig


_REPORT_GRACE_S = 5.0
"""How long the runner may take to kill and report once told to (a backstop: it is milliseconds)."""


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

    async def close(self) -> None:
        """Kill it (if still running), wait for its runner's word, free its place."""
        if self._control < 0:
            return
        control, self._control = self._control, -1
        _close(control)
        try:
            await asyncio.wait_for(self._streams.report.read(), _REPORT_GRACE_S)
        except asyncio.TimeoutError:
            pass
        finally:
            self._streams.close()
            await self._place.aclose()


async def run_local(program: Program, limits: Limits = Limits(), *, isolate: bool = True, users: bool = True) -> RunResult:
    """Run `program` under `limits` in a launcher started for it (see the module docstring);
    a Pool's `run` does the same in launchers started ahead."""
    launcher = await Launcher.start(isolate=isolate, users=users)
    try:
        return await launcher.run(program, limits)
    finally:
        await launcher.aclose()


def _write_files(work: Path, files: Mapping[str, str | bytes], uid: int | None) -> None:
    root = work.resolve()
    for name, content in files.items():
        target = (work / name).resolve()
        if root not in target.parents:
            raise ValueError(f"file {name!r} would be written outside the working directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
        if uid is not None:
            for path in [target, *(p for p in target.parents if root in p.parents)]:
                os.chown(path, uid, uid)


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


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
