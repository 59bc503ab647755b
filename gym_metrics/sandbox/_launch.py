"""The sandbox's launcher (standard library only, run by path, never imported by the server).

It serves jobs from a Unix socket until the socket closes. Each job comes with its pipes
(stdin, stdout, stderr, report, control) and is served by a runner forked for it: the runner
forks the program into a process group of its own, under the job's rlimits, as the job's
unprivileged user when there is one, with no_new_privs; then it waits for the program to end
or for the control pipe to close (the caller's deadline, output cap or cancellation), kills the
group and everything the job's user left running, and writes one JSON report: exit status,
CPU time, peak memory, whether it was killed. The launcher itself runs no job's code, so each
run starts from the same clean state: a fork, not an interpreter start, is a run's cost.

A job's `python` source runs in the forked interpreter (as `python main.py` would); a
`command` is exec'd.

Usage: python -I _launch.py SOCKET_FD
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import resource
import select
import signal
import socket
import sys
import time
import traceback

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36
_FDS = 5  # stdin, stdout, stderr, report, control
_LIBC = ctypes.CDLL(None, use_errno=True)


def _become(uid: int) -> None:
    """The job's user, with no groups: it may not signal or read what root owns."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _exec_program(job: dict, stdin: int, stdout: int, stderr: int) -> None:
    """In the program's process: its pipes, group, limits, user, no new privileges, then exec
    (or run the Python source here). Never returns."""
    command = job["command"]
    try:
        os.setsid()
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)
        mb = 1 << 20
        for kind, value in (
            (resource.RLIMIT_CPU, (job["cpu_s"], job["cpu_s"] + 1)),
            (resource.RLIMIT_AS, (job["memory_mb"] * mb, job["memory_mb"] * mb)),
            (resource.RLIMIT_FSIZE, (job["file_size_mb"] * mb, job["file_size_mb"] * mb)),
            (resource.RLIMIT_NOFILE, (job["open_files"], job["open_files"])),
            (resource.RLIMIT_NPROC, (job["processes"], job["processes"])),
            (resource.RLIMIT_CORE, (0, 0)),
        ):
            resource.setrlimit(kind, value)
        os.nice(job.get("nice", 0))
        if job.get("uid") is not None:
            _become(job["uid"])
        _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        os.chdir(job["cwd"])
        if job.get("python") is not None:
            _run_python(job["python"], job["env"])
        os.execvpe(command[0], command, job["env"])
    except OSError as exc:
        os.write(2, f"sandbox: cannot run {command[0] if command else 'python'!r}: {exc}\n".encode())
    os._exit(127)


def _run_python(source: str, env: dict) -> None:
    """Python source, run as `python main.py` would. Never returns."""
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["main.py"]
    sys.path.insert(0, os.getcwd())
    sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115
    code = 0
    try:
        exec(compile(source, "main.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})  # noqa: S102
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException as exc:  # noqa: BLE001  # the program's own error: its traceback, exit 1
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)  # not this frame
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


def _kill_as(uid: int) -> None:
    """kill(-1) as `uid`, in a child of its own: every process of that user."""
    pid = os.fork()
    if pid == 0:
        try:
            _become(uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def _alive_as(uid: int) -> bool:
    """Whether a live (not zombie) process of `uid` is left: kill(-1) cannot tell (it counts
    the processes it may not signal too). Cheap in the sandbox's pid namespace."""
    want = str(uid).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                head = f.read(1024)
        except OSError:
            continue
        fields = dict(line.split(b":", 1) for line in head.splitlines() if b":" in line)
        if fields.get(b"Uid", b"").split()[:1] == [want] and not fields.get(b"State", b"").strip().startswith(b"Z"):
            return True
    return False


def _reap_orphans() -> None:
    """Reap the run's dead descendants (this runner is their subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _sweep(uid: int | None, pid: int) -> None:
    """Kill the program and its group (before it is reaped: its pid cannot have been reused)."""
    for kill in (os.kill, os.killpg):  # the pid too: it may not have its group yet
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if uid is not None:
        _kill_as(uid)


def _sweep_user(uid: int | None) -> None:
    """Until no process of the run's user is left (one that left the group, one forked while
    the last kill went round), dead ones reaped, for _SWEEP_S at most."""
    deadline = time.monotonic() + _SWEEP_S
    while True:
        _reap_orphans()
        if uid is None or not _alive_as(uid) or time.monotonic() > deadline:
            return
        _kill_as(uid)
        time.sleep(0.001)


_SWEEP_S = 2.0


def _serve_job(job: dict, fds: list[int]) -> None:
    """The runner: one job, start to report. Never returns."""
    stdin, stdout, stderr, report, control = fds
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # wait4 needs its child (the launcher auto-reaps)
    _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans come here
    pid = os.fork()
    if pid == 0:
        os.close(report)
        os.close(control)
        _exec_program(job, stdin, stdout, stderr)
    for fd in (stdin, stdout, stderr):
        os.close(fd)
    killed = False
    try:
        ended = os.pidfd_open(pid)
        ready, _, _ = select.select([ended, control], [], [])
        killed = ended not in ready
    except OSError:  # no pidfd (old kernel): wait for the program's end alone
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    _sweep(job.get("uid"), pid)
    _, status, usage = os.wait4(pid, 0)
    _sweep_user(job.get("uid"))
    answer = {"exit_code": os.waitstatus_to_exitcode(status), "cpu_s": usage.ru_utime + usage.ru_stime,
              "max_rss_kb": usage.ru_maxrss, "killed": killed}  # fmt: skip
    try:
        os.write(report, json.dumps(answer).encode())
    except OSError:
        pass
    os._exit(0)


def main(argv: list[str]) -> int:
    jobs = socket.socket(fileno=int(argv[0]))
    open(os.devnull, encoding="utf-8", errors="surrogateescape").close()  # the codecs a run's stdio needs, loaded once
    gc.freeze()  # what is loaded now stays shared with every fork (no copy for the collector's sake)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # runners are reaped by the kernel
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(jobs, 1 << 20, _FDS)
        except InterruptedError:
            continue
        if not data:
            return 0  # the caller closed the socket: no more jobs
        if len(fds) != _FDS:
            for fd in fds:
                os.close(fd)
            continue
        if os.fork() == 0:
            jobs.close()
            _serve_job(json.loads(data), fds)
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
