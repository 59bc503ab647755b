"""What the launcher does to confine one run (standard library only: the launcher imports it by
path, never the server): the run's own namespaces (mount, IPC, network, PID), its directory as
a tmpfs capped in bytes and inodes, and a seccomp filter that refuses the system calls a run
never needs (new namespaces, the kernel keyring, mounts, BPF, io_uring, kernel modules, files
opened by handle); a run left with root's uid loses every capability.

A runner made ahead of its job (a spare) does the slow parts before the job comes: the
namespaces, and its cgroup (RunGroup), whose joining waits for the kernel.

Why each (docs/sandbox.md, threat model): a fresh IPC namespace per run frees SysV shared
memory and message queues with the run and hides them from the next; a network namespace per
run keeps runs of one launcher off each other's loopback; a PID namespace per run, whose
first process is a small init, kills everything the run started when it ends; the tmpfs bounds
what a run may write and vanishes with it; the filter keeps a run from making a user namespace
(and, as its root, a tmpfs past its memory limit) or leaving keys for a later run of its uid.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import platform
import re
import shutil
import socket
import stat
import struct
import sys
from collections.abc import Callable

_LIBC = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x40000000, 0x20000000, 0x10000000
_NEW_NAMESPACES = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x1000, 0x4000, 0x40000
PR_SET_NO_NEW_PRIVS = 38


class ConfineError(OSError):
    """A confinement step failed: the run must not start."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise ConfineError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _LIBC.mount(source.encode(), target.encode(), kind.encode() if kind else None, flags, data.encode() if data else None),
        f"mount {kind or source} on {target}",
    )


def enter_run_namespaces() -> None:
    """This process into new mount, IPC and network namespaces, and its children into a new PID
    namespace; mounts made from here on are this run's alone."""
    _check(_LIBC.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWPID), "unshare")
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)
    _loopback_up()


def _loopback_up() -> None:
    """A new network namespace's loopback is down: up, so a run may talk to itself (only)."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), siocgifflags, request))[1]
        fcntl.ioctl(s.fileno(), siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def mount_run_directory(path: str, uid: int | None, disk_mb: int, inodes: int) -> None:
    """A tmpfs of `disk_mb` and `inodes` at `path`, the run's user's, holding what the caller
    staged there (its program and files), copied over before the mount hides them."""
    staged = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        owner = f",uid={uid},gid={uid}" if uid is not None else ""
        _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={disk_mb}m,nr_inodes={inodes},mode=0700{owner}")
        try:
            _copy_tree(staged, path, uid)
        except OSError as exc:
            raise ConfineError(exc.errno or errno.EIO, f"the program's files do not fit the run's disk ({exc.strerror})") from None
    finally:
        os.close(staged)


def mount_run_tmp(uid: int | None, disk_mb: int, inodes: int) -> None:
    """/tmp of the run's own (programs write there by absolute path: compilers, tempfile
    without TMPDIR, NeMo Gym's sandboxed tools), bounded like its directory and gone with its
    mount namespace; the launcher's /tmp under it is an empty one no run may write. What is
    mounted below /tmp (the run's directory, and the interpreter and launcher of a checkout
    that lives there) is bound back at its place, with what is mounted below it and as it was
    (read-only stays read-only)."""
    kept = [(point, os.open(point, os.O_PATH)) for point in _mounts_below("/tmp")]
    try:
        owner = f",uid={uid},gid={uid}" if uid is not None else ""
        _mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={disk_mb}m,nr_inodes={inodes},mode=0700{owner}")
        for point, fd in kept:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.makedirs(point, 0o755)  # (root's, searchable: the run's user reaches what is below)
            else:
                os.makedirs(os.path.dirname(point), 0o755, exist_ok=True)
                os.close(os.open(point, os.O_CREAT | os.O_WRONLY, 0o644))
            _mount(f"/proc/self/fd/{fd}", point, None, _MS_BIND | _MS_REC)
    finally:
        for _, fd in kept:
            os.close(fd)


def _mounts_below(root: str) -> list[str]:
    """The outermost mount points strictly below `root` (each with its own below it), from
    /proc/self/mountinfo, in the order they were mounted."""
    points: list[str] = []
    with open("/proc/self/mountinfo", "rb") as info:
        for line in info:
            point = os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), line.split()[4]))  # (mountinfo writes a space as \040)
            if point.startswith(root.rstrip("/") + "/") and not any(point == p or point.startswith(p + "/") for p in points):
                points.append(point)
    return points


def _copy_tree(source_fd: int, target: str, uid: int | None) -> None:
    for top, dirs, files, top_fd in os.fwalk(".", dir_fd=source_fd):
        where = os.path.normpath(os.path.join(target, top))
        for name in dirs:
            os.mkdir(os.path.join(where, name), 0o700)
            if uid is not None:
                os.chown(os.path.join(where, name), uid, uid)
        for name in files:
            st = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                continue
            src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=top_fd)
            dst = os.open(os.path.join(where, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(src, "rb", closefd=False) as r, os.fdopen(dst, "wb", closefd=False) as w:
                    shutil.copyfileobj(r, w)
                if uid is not None:
                    os.fchown(dst, uid, uid)
            finally:
                os.close(src)
                os.close(dst)


def mount_proc() -> None:
    """/proc of the run's own PID namespace (by its first process, which lives in it)."""
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)


def probe(root: str) -> int:
    """What a confined run needs, tried once when a server starts (its isolation check): the
    namespaces, a capped tmpfs, /proc, the seccomp filter. stderr names what failed."""
    try:
        enter_run_namespaces()
        mount_run_directory(root, None, 1, 16)
    except OSError as exc:
        print(exc, file=sys.stderr)
        return 1
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            mount_proc()
            if os.geteuid() == 0:  # as the PID namespace's init (its first child): a fork before would end the namespace
                _probe_run_user(root)
            _LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            apply_seccomp()
            if _LIBC.unshare(CLONE_NEWUSER) == 0:
                os.write(2, b"the seccomp filter is not in force (a user namespace was made)\n")
                code = 1
        except OSError as exc:
            os.write(2, f"{exc}\n".encode())
            code = 1
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _probe_run_user(root: str, uid: int = 65534) -> None:
    """What giving a run a user of its own takes of root, each named when missing (a container
    that dropped one started, then failed every run): handing it its files (CAP_CHOWN),
    reaching them though they are its user's alone (CAP_DAC_OVERRIDE), becoming it
    (CAP_SETUID, CAP_SETGID)."""
    theirs = os.path.join(root, "user")
    os.mkdir(theirs, 0o700)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("CAP_CHOWN: cannot hand a run its files", lambda: os.chown(theirs, uid, uid)),
        ("CAP_DAC_OVERRIDE: cannot reach a run's directory", lambda: os.close(os.open(os.path.join(theirs, "f"), os.O_CREAT | os.O_WRONLY, 0o600))),
    ]  # fmt: skip
    for what, step in steps:
        try:
            step()
        except OSError as exc:
            raise ConfineError(exc.errno or errno.EPERM, f"{what} ({exc.strerror})") from None
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os._exit(0)
        except OSError:
            os._exit(1)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        raise ConfineError(errno.EPERM, "CAP_SETUID, CAP_SETGID: cannot switch to a run's user")


# ----------------------------------------------------------------------------- cgroups


class RunGroup:
    """The run's cgroup in each hierarchy (v1: memory, pids and cpu where found; v2: one), made under the pool's
    base directories (`bases`: directory descriptors the server opened) and joined by this
    runner ahead of its job, so that the move, which waits for the kernel (an RCU grace period,
    milliseconds), is not in the run's way. `park` beside it takes the runner when it is done."""

    def __init__(self, bases: list[int], v2: bool) -> None:
        self.bases, self.v2 = bases, v2
        self.name = f"run-{os.getpid()}-{os.urandom(4).hex()}"
        made = []
        try:
            for base in bases:
                os.mkdir(self.name, 0o755, dir_fd=base)
                made.append(base)
            for base in bases:
                _write_at(base, f"{self.name}/cgroup.procs", "0")
        except OSError:
            for base in made:
                _rmdir_at(base, self.name)
            raise

    def limit(self, memory_mb: int, processes: int) -> None:
        """The job's bounds: `memory_mb` in all (no swap), `processes` (and the runner and init)."""
        memory, pids = f"{self.name}/", f"{self.name}/"
        limit = str(memory_mb << 20)
        if self.v2:
            _write_at(self.bases[0], memory + "memory.max", limit)
            _write_at(self.bases[0], memory + "memory.swap.max", "0", optional=True)
            _write_at(self.bases[0], memory + "memory.oom.group", "1", optional=True)
        else:
            _write_at(self.bases[0], memory + "memory.limit_in_bytes", limit)
            _write_at(self.bases[0], memory + "memory.memsw.limit_in_bytes", limit, optional=True)
        _write_at(self.bases[0 if self.v2 else 1], pids + "pids.max", str(processes + 2))  # v1: [memory, pids, cpu]

    def oom_killed(self) -> bool:
        """Whether the kernel killed one of the run's processes for its memory bound."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            fd = os.open(f"{self.name}/{name}", os.O_RDONLY, dir_fd=self.bases[0])
            try:
                text = os.read(fd, 4096).decode()
            finally:
                os.close(fd)
        except OSError:
            return False
        return any(line.split()[:1] == ["oom_kill"] and line.split()[1:2] != ["0"] for line in text.splitlines())

    def leave(self) -> None:
        """This runner out to `park`, and the run's cgroup removed (its processes are gone)."""
        for base in self.bases:
            try:
                _write_at(base, "park/cgroup.procs", "0")
            except OSError:
                pass
            _rmdir_at(base, self.name)


def _write_at(base: int, path: str, value: str, *, optional: bool = False) -> None:
    try:
        fd = os.open(path, os.O_WRONLY, dir_fd=base)
    except FileNotFoundError:
        if optional:
            return
        raise
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _rmdir_at(base: int, name: str) -> None:
    try:
        os.rmdir(name, dir_fd=base)
    except OSError:
        pass


# ----------------------------------------------------------------------------- capabilities

_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
_SECBITS = 0xE3  # NOROOT and its lock, KEEP_CAPS locked off, NO_CAP_AMBIENT_RAISE and its lock
_CAPABILITY_VERSION_3 = 0x20080522


def empty_bounding_set(keeps_root: bool) -> None:
    """Nothing any later exec of this process may gain, by a setuid file or root's exec-time
    grant: the bounding set emptied, root's grant switched off and locked (securebits), the
    ambient set cleared. Call before switching user. Without CAP_SETPCAP (a container that
    dropped it) a run that switches user needs none of this (its caps go with the switch, the
    container bounds the rest); one that `keeps_root` would regain the container's
    capabilities at exec, so it is refused."""
    _check(_LIBC.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    if _LIBC.prctl(_PR_SET_SECUREBITS, _SECBITS, 0, 0, 0) != 0:
        if ctypes.get_errno() == errno.EPERM and not keeps_root:
            return
        raise ConfineError(ctypes.get_errno(), "a run kept as root needs CAP_SETPCAP to give up root's power "
                           "(give each run a user of its own: users=True)")  # fmt: skip
    for cap in range(64):
        if _LIBC.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:  # past the last capability this kernel knows
                break
            _check(-1, f"dropping capability {cap} from the bounding set")


def drop_capabilities() -> None:
    """Every capability of this process gone (effective, permitted, inheritable): a run that
    keeps root's uid (no user of its own) must not keep root's power (opening any inode by
    handle, mounts, raw devices)."""
    header = struct.pack("Ii", _CAPABILITY_VERSION_3, 0)
    _check(_LIBC.capset(ctypes.c_char_p(header), ctypes.c_char_p(bytes(24))), "capset")


# ----------------------------------------------------------------------------- seccomp

_ARCH = {  # audit arch, and the syscalls refused (EPERM) by number
    "x86_64": (0xC000003E, {
        "clone": 56, "clone3": 435, "unshare": 272, "setns": 308, "keyctl": 250, "add_key": 248, "request_key": 249,
        "mount": 165, "umount2": 166, "pivot_root": 155, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 246, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "fspick": 433, "mount_setattr": 442, "acct": 163, "swapon": 167, "swapoff": 168, "reboot": 169,
        "syslog": 103, "name_to_handle_at": 303, "open_by_handle_at": 304,
    }),
    "aarch64": (0xC00000B7, {
        "clone": 220, "clone3": 435, "unshare": 97, "setns": 268, "keyctl": 219, "add_key": 217, "request_key": 218,
        "mount": 40, "umount2": 39, "pivot_root": 41, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 104, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "fspick": 433, "mount_setattr": 442, "acct": 89, "swapon": 224, "swapoff": 225, "reboot": 142,
        "syslog": 116, "name_to_handle_at": 264, "open_by_handle_at": 265,
    }),
}  # fmt: skip

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO, _KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def seccomp_supported() -> bool:
    return platform.machine() in _ARCH


def _filter() -> bytes:
    """The classic BPF program: another architecture's calls kill, x32's are refused, clone
    with a namespace flag and the listed calls are refused (clone3 with ENOSYS, so libc falls
    back to clone, whose flags can be read), everything else is allowed."""
    arch, calls = _ARCH[platform.machine()]
    code: list[tuple[int, str | int, str | int, int]] = [  # (op, jump-if-true, jump-if-false, k); jumps by label
        (_LD_W_ABS, 0, 0, 4), (_JEQ, 0, "kill", arch), (_LD_W_ABS, 0, 0, 0),
    ]
    if arch == 0xC000003E:
        code.append((_JGE, "eperm", 0, 0x40000000))  # the x32 ABI
    code += [(_JEQ, "clone", 0, calls["clone"]), (_JEQ, "enosys", 0, calls["clone3"])]
    code += [(_JEQ, "eperm", 0, nr) for name, nr in calls.items() if name not in ("clone", "clone3")]
    labels = {"allow": len(code)}
    code.append((_RET, 0, 0, _ALLOW))
    labels["clone"] = len(code)
    code += [(_LD_W_ABS, 0, 0, 16), (_JSET, "eperm", 0, _NEW_NAMESPACES), (_RET, 0, 0, _ALLOW)]
    labels["eperm"] = len(code)
    code.append((_RET, 0, 0, _ERRNO | errno.EPERM))
    labels["enosys"] = len(code)
    code.append((_RET, 0, 0, _ERRNO | errno.ENOSYS))
    labels["kill"] = len(code)
    code.append((_RET, 0, 0, _KILL_PROCESS))

    def jump(target: str | int, at: int) -> int:
        return target if isinstance(target, int) else labels[target] - at - 1

    return b"".join(struct.pack("HBBI", op, jump(jt, i), jump(jf, i), k) for i, (op, jt, jf, k) in enumerate(code))


_PROGRAM = _filter() if seccomp_supported() else b""


def apply_seccomp() -> None:
    """Install the filter on this process and everything it starts (no_new_privs must be set)."""
    if not _PROGRAM:
        raise ConfineError(errno.ENOSYS, f"no seccomp filter for {platform.machine()}")
    buffer = ctypes.create_string_buffer(_PROGRAM, len(_PROGRAM))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Prog(len(_PROGRAM) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(_LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")
