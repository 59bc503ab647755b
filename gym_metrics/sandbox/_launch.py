"""The sandbox's launcher (standard library only, run by path, never imported by the server).

It serves jobs from a Unix socket until the socket closes. Each job comes with its pipes
(stdin, stdout, stderr, report, control) and is served by a runner forked for it ahead of time
(a spare, prepared while it waits: the launcher forks the next as soon as one takes a job). A
spare of a confining launcher (`--confine`, isolation `strict`) gets namespaces of its own
(_confine.py: mount, IPC, network, PID), and, with `--cgroups`, a cgroup of its own, joined.
With the job, the runner sets the cgroup's bounds, mounts its directory as a capped tmpfs and
forks the run's init (PID 1 of its namespace), which mounts its /proc and forks the program:
under the job's rlimits, as the job's unprivileged user when there is one, with no_new_privs
and the seccomp filter. The runner waits for the program to end or for the control pipe to
close (the caller's deadline, output cap or cancellation), kills the init (and so every
process of the run), and writes one JSON report: exit status, CPU time, peak memory, whether
it was killed or its cgroup killed for memory, or why the run could not be confined. An
unconfined job (isolation "none") runs in a process group, its user's processes swept
afterwards. The launcher itself runs no job's code, so each run starts from the same clean
state: a fork, not an interpreter start, is a run's cost.

A `python` job runs its directory's main.py in the forked interpreter (as `python main.py`
would); a `command` is exec'd.

Usage: python -I _launch.py SOCKET_FD [--confine] [--cgroups v1:FD,FD | v2:FD], or
python -I _launch.py --probe DIR (the isolation check)
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _confine  # type: ignore[import-not-found]  # noqa: E402  # beside this file (run by path, -I: its directory is not on sys.path)
from _sweep import become, sweep, sweep_user  # type: ignore[import-not-found]  # noqa: E402

del sys.path[0]

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36
_FDS = 5  # stdin, stdout, stderr, report, control
_LIBC = ctypes.CDLL(None, use_errno=True)


def _exec_program(job: dict, stdin: int, stdout: int, stderr: int, failed: int) -> None:
    """In the program's process: its pipes, group, limits, user, no new privileges (and, when
    confined, the seccomp filter), then exec (or run main.py here). Never returns. A step of
    that set-up that fails is written to `failed` (a pipe its parent reads): the sandbox's
    error, never the program's exit 127 (a test scored 0 for a sandbox that could not run it)."""
    command = job["command"]
    try:
        os.setsid()
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        os.dup2(failed, 3, inheritable=False)
        os.closerange(4, 1 << 16)
        mb = 1 << 20
        for kind, value in (
            (resource.RLIMIT_CPU, (job["cpu_s"], job["cpu_s"] + 1)),
            (resource.RLIMIT_AS, (job["memory_mb"] * mb, job["memory_mb"] * mb)),
            (resource.RLIMIT_FSIZE, (job["file_size_mb"] * mb, job["file_size_mb"] * mb)),
            (resource.RLIMIT_NOFILE, (job["open_files"], job["open_files"])),
            (resource.RLIMIT_NPROC, (_nproc_limit(job),) * 2),
            (resource.RLIMIT_CORE, (0, 0)),
        ):
            resource.setrlimit(kind, value)
        os.nice(job.get("nice", 0))
        if os.geteuid() == 0:
            _confine.empty_bounding_set(keeps_root=job.get("uid") is None)
        if job.get("uid") is not None:
            become(job["uid"])
        if os.geteuid() == 0:  # no user of its own (users=False, or not reachable): root's uid, none of its power
            _confine.drop_capabilities()
        _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if job.get("confine"):
            _confine.apply_seccomp()
        os.chdir(job["cwd"])
    except OSError as exc:
        os.write(3, f"cannot set the run up: {exc}".encode())
        os._exit(127)
    os.close(3)
    try:
        if job.get("python"):
            _run_python(job["env"])
        os.execvpe(command[0], command, job["env"])
    except OSError as exc:
        os.write(2, f"sandbox: cannot run {command[0] if command else 'python'!r}: {exc}\n".encode())
    os._exit(127)


def _setup_failure(failed: int) -> str | None:
    """What the program's process wrote to its set-up pipe (None: it started)."""
    said = os.read(failed, 4096)
    os.close(failed)
    return said.decode(errors="replace") if said else None


def _nproc_limit(job: dict) -> int:
    """RLIMIT_NPROC counts every process and thread of the real user: a run with a user of its
    own gets `processes`; one that shares the server's user gets them on top of what that
    user already runs (the server's threads must not count against the run)."""
    if job.get("uid") is not None or os.getuid() == 0:
        return job["processes"]
    mine, count = str(os.getuid()).encode(), 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status", "rb") as f:
                    fields = dict(line.split(b":", 1) for line in f.read(2048).splitlines() if b":" in line)
            except OSError:
                continue
            if fields.get(b"Uid", b"").split()[:1] == [mine]:
                count += int(fields.get(b"Threads", b"1"))
    return count + job["processes"]


def _run_python(env: dict) -> None:
    """main.py, run as `python main.py` would. Never returns."""
    with open("main.py", "rb") as f:
        source = f.read()
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


_REAP_S = 1.0
"""How long a killed run's init may take to kill the rest and reap its program."""


def _oom_score(adjust: int) -> None:
    """This process's OOM-killer adjustment (-1000: never; 1000: first). A run that fills its
    memory bound with memory no process maps (memfds held by sleepers) once made the kernel
    kill the runner, which shares the run's cgroup: the run was lost with no report, a verify
    error left out of the score instead of its 0. The run's processes go first (raising needs
    no privilege); lowering the runner's needs CAP_SYS_RESOURCE (else it stays as it is)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(adjust))
    except OSError:
        pass


Prepared = tuple["_confine.RunGroup | None", "str | None"]
"""A runner's cgroup (None without) and why it could not be confined (None when it was)."""


def _prepare(confine: bool, cgroups: tuple[list[int], bool] | None) -> Prepared:
    """A runner's slow part, done ahead of its job when it is a spare: its namespaces (a
    confined job) and its cgroup, joined."""
    try:
        if confine:
            _confine.enter_run_namespaces()
        return (_confine.RunGroup(*cgroups) if cgroups is not None else None), None
    except OSError as exc:
        return None, f"cannot confine the run: {exc}"


def _serve_job(job: dict, fds: list[int], confined: bool, prepared: Prepared) -> None:
    """The runner: one job, start to report. Never returns. `confined`: the launcher's (a job
    cannot ask for it: its namespaces are made before the job comes)."""
    stdin, stdout, stderr, report, control = fds
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # wait4 needs its child (the launcher auto-reaps)
    _oom_score(-1000)  # in its run's cgroup, whose OOM kill takes the group: never this runner
    job["confine"] = confined
    group, error = prepared
    try:
        if error is None and group is not None:
            group.limit(job["memory_mb"], job["processes"])
        if error is None and confined:  # its directory, in its own mount namespace, before anything of the run exists
            _confine.mount_run_directory(job["cwd"], job.get("uid"), job["disk_mb"], job["inodes"])
            _confine.mount_run_tmp(job.get("uid"), job["disk_mb"], job["inodes"])
    except OSError as exc:
        error = f"cannot confine the run: {exc}"
    if error is not None:
        _end(report, {"exit_code": 127, "error": error}, group)
    if not confined:
        _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans come here
    status_r, status_w = os.pipe()  # confined: the run's init says how the program ended, or why it never started
    failed_r, failed_w = os.pipe()  # not confined: why the program's set-up failed
    pid = os.fork()
    if pid == 0:
        _oom_score(1000)  # the run's processes are the OOM killer's first choice (inherited by all of them)
        for fd in (report, control, status_r, failed_r):
            os.close(fd)
        if confined:
            os.close(failed_w)
            _init(job, (stdin, stdout, stderr), status_w)
        os.close(status_w)
        _exec_program(job, stdin, stdout, stderr, failed_w)
    for fd in (stdin, stdout, stderr, status_w, failed_w):
        os.close(fd)
    if confined:
        os.close(failed_r)
    killed = False
    try:
        ended = os.pidfd_open(pid)
        ready, _, _ = select.select([ended, control], [], [])
        killed = ended not in ready
    except OSError:  # no pidfd (old kernel): wait for the program's end alone
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    if confined:  # the run's init: its end takes every process of the run's PID namespace with it
        if killed:  # asked first to kill the rest and reap the program, so its usage is counted
            os.kill(pid, signal.SIGTERM)
            with contextlib.suppress(OSError):
                select.select([ended], [], [], _REAP_S)
        os.kill(pid, signal.SIGKILL)
    else:
        sweep(job.get("uid"), pid)
    _, status, usage = os.wait4(pid, 0)
    answer = {"cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_kb": usage.ru_maxrss, "killed": killed,
              "oom": group is not None and group.oom_killed()}  # fmt: skip
    if confined:
        said = os.read(status_r, 4096)
        if said[:1] == b"E":
            _end(report, {"exit_code": 127, "error": said[1:].decode(errors="replace")}, group)
        status = struct.unpack("i", said[1:5])[0] if said[:1] == b"S" else (signal.SIGKILL if killed else status)
    else:
        sweep_user(job.get("uid"))
        setup_failed = _setup_failure(failed_r)
        if setup_failed is not None:
            _end(report, {"exit_code": 127, "error": setup_failed}, group)
    _end(report, {"exit_code": os.waitstatus_to_exitcode(status), **answer}, group)


def _init(job: dict, stdio: tuple[int, int, int], status: int) -> None:
    """The first process of the run's PID namespace: mounts its /proc, starts the program,
    reaps what is orphaned, and says how the program ended. Its own end (when the program's
    comes, or when killed) kills whatever else the run left."""
    try:
        _confine.mount_proc()
    except OSError as exc:
        os.write(status, b"E" + f"cannot set up the run: {exc}".encode())
        os._exit(0)
    failed_r, failed_w = os.pipe()
    signal.signal(signal.SIGTERM, _kill_the_run)  # the runner's "stop": the program is reaped, its usage counted
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.close(status)
        os.close(failed_r)
        _exec_program(job, *stdio, failed_w)
    for fd in (*stdio, failed_w):
        os.close(fd)
    while True:
        child, code = os.wait()
        if child == pid:
            setup_failed = _setup_failure(failed_r)
            os.write(status, b"E" + setup_failed.encode() if setup_failed is not None else b"S" + struct.pack("i", code))
            os._exit(0)


def _kill_the_run(signum: int, frame: object) -> None:
    """In the run's init: every other process of its PID namespace killed, so that its wait
    reaps the program (and the runner's wait4 counts the program's CPU and memory; killed
    with its init, a run that timed out said 0 s of CPU)."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass


def _end(fd: int, answer: dict, group: _confine.RunGroup | None) -> None:
    """The run's one report to the caller, then its cgroup left and removed, then this
    runner's end."""
    try:
        os.write(fd, json.dumps(answer).encode())
    except OSError:
        pass
    os.close(fd)
    if group is not None:
        group.leave()
    os._exit(0)


def _spare(jobs: socket.socket, confine: bool, cgroups: tuple[list[int], bool] | None) -> socket.socket:
    """A runner forked ahead of its job, prepared (_prepare) while it waits for it: the socket
    that hands it over. It goes when the launcher goes (the socket closes)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        jobs.close()
        ours.close()
        prepared = _prepare(confine, cgroups)
        try:
            data, fds, _, _ = socket.recv_fds(theirs, 1 << 16, _FDS)
        except OSError:
            data, fds = b"", []
        if not data or len(fds) != _FDS:
            if prepared[0] is not None:
                prepared[0].leave()
            os._exit(0)
        theirs.close()
        _serve_job(json.loads(data), fds, confine, prepared)
    theirs.close()
    return ours


def _cgroups(argv: list[str]) -> tuple[list[int], bool] | None:
    """`--cgroups v1:FD,FD` or `--cgroups v2:FD`: the pool's base directories, if any."""
    if "--cgroups" not in argv:
        return None
    kind, _, fds = argv[argv.index("--cgroups") + 1].partition(":")
    return [int(fd) for fd in fds.split(",")], kind == "v2"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        return _confine.probe(argv[1])
    jobs = socket.socket(fileno=int(argv[0]))
    confine, cgroups = "--confine" in argv, _cgroups(argv)
    open(os.devnull, encoding="utf-8", errors="surrogateescape").close()  # the codecs a run's stdio needs, loaded once
    gc.freeze()  # what is loaded now stays shared with every fork (no copy for the collector's sake)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # runners are reaped by the kernel
    spare = _spare(jobs, confine, cgroups)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(jobs, 1 << 16, _FDS)
        except InterruptedError:
            continue
        if not data:
            return 0  # the caller closed the socket: no more jobs
        if len(fds) != _FDS:
            for fd in fds:
                os.close(fd)
            continue
        try:  # to the spare, prepared while it waited; the next spare starts preparing now
            socket.send_fds(spare, [data], fds)
        except OSError:  # the spare is gone: a runner forked for the job prepares itself
            if os.fork() == 0:
                jobs.close()
                spare.close()
                _serve_job(json.loads(data), fds, confine, _prepare(confine, cgroups))
        for fd in fds:
            os.close(fd)
        spare.close()
        spare = _spare(jobs, confine, cgroups)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
