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
import json
import os
import resource
import select
import signal
import socket
import sys

_PR_SET_NO_NEW_PRIVS = 38
_FDS = 5  # stdin, stdout, stderr, report, control


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
        if job.get("uid") is not None:
            _become(job["uid"])
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
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
    except BaseException:  # noqa: BLE001  # the program's own error: its traceback, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


def _sweep(uid: int | None, pid: int) -> None:
    """Kill the program, its group, and every process of the job's user (one that left the
    group too): kill(-1) as that user."""
    for kill, target in ((os.kill, pid), (os.killpg, pid)):  # the pid too: it may not have its group yet
        try:
            kill(target, signal.SIGKILL)
        except OSError:
            pass
    if uid is None:
        return
    pid = os.fork()
    if pid == 0:
        try:
            _become(uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def _serve_job(job: dict, fds: list[int]) -> None:
    """The runner: one job, start to report. Never returns."""
    stdin, stdout, stderr, report, control = fds
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # wait4 needs its child (the launcher auto-reaps)
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
    _sweep(job.get("uid"), pid)  # before reaping it: its pid and group cannot have been reused yet
    _, status, usage = os.wait4(pid, 0)
    answer = {"exit_code": os.waitstatus_to_exitcode(status), "cpu_s": usage.ru_utime + usage.ru_stime,
              "max_rss_kb": usage.ru_maxrss, "killed": killed}  # fmt: skip
    try:
        os.write(report, json.dumps(answer).encode())
    except OSError:
        pass
    os._exit(0)


def main(argv: list[str]) -> int:
    jobs = socket.socket(fileno=int(argv[0]))
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
