"""What one run may use is bounded for the run as a whole, and nothing of it outlives it or
reaches another run (issue 35): memory and processes in all (a cgroup), bytes and inodes
written (a tmpfs), SysV IPC, the kernel keyring, user namespaces, the host's Unix sockets,
another run's loopback; programs of any size; a pool that frees what it made.

Each hostile program prints `contained` when every attempt failed, or what got through."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import resource
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import gym_metrics.sandbox as sandbox_package
from gym_metrics.sandbox import Limits, Pool, Program, SandboxBusyError, SandboxError, bwrap_path, run_local
from gym_metrics.sandbox._cgroups import Cgroups, _locate
from gym_metrics.sandbox._users import _lock_file

sys.path[:0] = [str(Path(__file__).parents[1]), str(Path(__file__).parent)]
import _ci  # noqa: E402
from _attacks import (  # noqa: E402
    BIG_PROGRAM,
    DEEP_DIRECTORIES,
    DISK_BYTES_AND_FILES,
    HOST_SOCKETS,
    unix_listeners,
    KERNEL_REFUSALS,
    MEMORY_OVER_CHILDREN,
    ROOT_POWER,
    SYSV_LOOK,
    SYSV_MAKE,
    UNMAPPED_MEMORY,
)

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("sandbox")]
LIMITS = Limits(wall_s=10, cpu_s=10, memory_mb=512)


@pytest.fixture
async def pool() -> AsyncIterator[Pool]:
    if bwrap_path() is None or os.geteuid() != 0:
        _ci.missing("isolation strict needs bubblewrap (apt-get install bubblewrap) and root")
    pool = Pool(size=4)
    await pool.start()
    try:
        yield pool
    finally:
        await pool.aclose()


async def run(pool: Pool, code: str, stdin: str = "", limits: Limits = LIMITS) -> str:
    result = await pool.run(Program(python=code, stdin=stdin.encode()), limits)
    assert result.isolated
    return result.stdout.decode().strip() or result.stderr.decode()[-500:]


async def test_memory_is_bounded_for_the_run_not_per_process(pool: Pool) -> None:
    if not pool.bounded:
        _ci.missing("this host gives the server no cgroup (a read-only /sys/fs/cgroup): memory holds per process only")
    assert await run(pool, MEMORY_OVER_CHILDREN) == "contained"


async def test_memory_no_process_maps_stops_the_run_for_memory_never_its_runner(pool: Pool) -> None:
    """The runner shares its run's cgroup: filled with memfds held by a sleeper, the OOM killer
    once took the runner (in a third of runs), a lost run scored as a verify error, left out of
    the score, where it is a run stopped for memory."""
    if not pool.bounded:
        _ci.missing("this host gives the server no cgroup (a read-only /sys/fs/cgroup): memory holds per process only")
    stops = [(await pool.run(Program(python=UNMAPPED_MEMORY), Limits(wall_s=20, cpu_s=20, memory_mb=256))).stop for _ in range(8)]
    assert stops == ["memory"] * 8, stops


CPU_HOG = "import os, time\nfor _ in range(40):\n    if os.fork() == 0:\n        os.setsid()\n        while True:\n            pass\ntime.sleep(30)"
CPU_HALF_SECOND = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass\nprint('done')"


@pytest.mark.slow  # 6 s of both cores busy: on the default Python only (CI's time bound)
async def test_a_run_of_many_busy_processes_takes_one_share_of_the_cpu(pool: Pool) -> None:
    """Each of a run's `setsid` children was an autogroup of the server's weight: 40 busy
    children took 40 shares, and honest runs beside them (0.3 s of CPU in 4 s) timed out, a
    score of 0 for other rollouts. A run is one share now, however many processes it forks."""
    found = Cgroups.find()
    fair = found is not None and found.fair
    if found is not None:
        found.remove()
    if not fair:
        _ci.missing("this host gives the server no cpu cgroup: runs share the CPU by their sessions")
    hog = asyncio.ensure_future(pool.run(Program(python=CPU_HOG), Limits(wall_s=6, cpu_s=60, processes=64)))
    await asyncio.sleep(0.5)
    honest = await asyncio.gather(*(pool.run(Program(python=CPU_HALF_SECOND), Limits(wall_s=4, cpu_s=4)) for _ in range(2)))
    assert [(r.stop, r.stdout) for r in honest] == [("exit", b"done\n")] * 2, [(r.stop, r.wall_s) for r in honest]
    assert (await hog).stop == "timeout"


async def test_run_local_bounds_memory_for_the_run_too(pool: Pool) -> None:
    """run_local "does the same" as a Pool run: it ran with no cgroup (six children of 200 MB
    all lived under 512 MB), and leaves none of its cgroups behind."""
    if not pool.bounded:
        _ci.missing("this host gives the server no cgroup (a read-only /sys/fs/cgroup): memory holds per process only")
    result = await run_local(Program(python=MEMORY_OVER_CHILDREN), LIMITS)
    assert result.isolated and result.stdout.decode().strip() == "contained", result
    mine = f"gym-metrics-{os.getpid()}-"
    ours = {p for p in Path("/sys/fs/cgroup").glob(f"**/{mine}*") if p.is_dir()}
    assert len(ours) <= 3, ours  # the pool's own (one per hierarchy: memory, pids, cpu); run_local's are gone


async def test_what_a_run_writes_is_bounded_in_bytes_and_files(pool: Pool) -> None:
    assert await run(pool, DISK_BYTES_AND_FILES) == "contained"


async def test_deep_directories_are_bounded_and_freed(pool: Pool) -> None:
    assert await run(pool, DEEP_DIRECTORIES) == "contained"
    launchers = [launcher for launcher in pool._launchers if launcher is not None]
    assert launchers and all(not any(launcher.root.iterdir()) for launcher in launchers)  # every run's place freed


async def test_sysv_ipc_dies_with_the_run_and_never_reaches_the_next(pool: Pool) -> None:
    assert await run(pool, SYSV_MAKE) in ("made", "refused")
    assert await asyncio.gather(*(run(pool, SYSV_LOOK) for _ in range(4))) == ["contained"] * 4


async def test_keyring_user_namespaces_and_mounts_are_refused(pool: Pool) -> None:
    assert await run(pool, KERNEL_REFUSALS) == "contained"


ROOTS_FILE = """
try:
    print(open('/etc/shadow').readline()[:5])
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.mark.parametrize("users", [True, False], ids=["own-user", "root-uid"])
async def test_a_run_has_no_capability_and_cannot_open_files_by_handle(users: bool, caplog: pytest.LogCaptureFixture) -> None:
    """With `users=False` a run keeps root's uid: it must not keep root's capabilities (with
    them, open_by_handle_at read the host's whole disk). It still reads root's own files
    (/etc/shadow), so such a run is not `isolated` and the pool says so as it starts (the
    result said isolated: true)."""
    if bwrap_path() is None or os.geteuid() != 0:
        _ci.missing("isolation strict needs bubblewrap (apt-get install bubblewrap) and root")
    from gym_metrics.sandbox._isolation import warn_root_runs

    warn_root_runs.cache_clear()
    pool = Pool(size=1, users=users)
    await pool.start()
    try:
        power = await pool.run(Program(python=ROOT_POWER), LIMITS)
        shadow = await pool.run(Program(python=ROOTS_FILE), LIMITS)
    finally:
        await pool.aclose()
    said = power.stdout.decode().strip() or power.stderr.decode()[-500:]
    assert said.startswith("contained"), said
    assert (said == "contained uid=0") is not users
    assert power.isolated is shadow.isolated is users
    assert (shadow.stdout.decode().strip() == "PermissionError") is users
    assert ("users=false" in caplog.text) is not users


async def test_the_hosts_unix_sockets_and_other_places_are_not_there(pool: Pool, tmp_path: Path) -> None:
    places = [Path("/run") / f"gm-probe-{os.getpid()}.sock", Path("/var/tmp") / f"gm-probe-{os.getpid()}.sock", tmp_path / "s.sock"]
    with unix_listeners(places) as paths:
        assert await run(pool, HOST_SOCKETS, stdin=paths) == "contained"


async def test_runs_at_once_cannot_reach_each_others_loopback(pool: Pool) -> None:
    """Both in one launcher (they once shared its network namespace)."""
    one = Pool(size=2, launchers=1)
    listen = (
        "import socket, time\nserver = socket.create_server(('127.0.0.1', 47474))\nserver.settimeout(3)\n"
        "try:\n    server.accept()\n    print('leak: a connection came in')\nexcept socket.timeout:\n    print('contained')"
    )
    connect = (
        "import socket, time\ntime.sleep(0.5)\ntry:\n    socket.create_connection(('127.0.0.1', 47474), timeout=1)\n"
        "    print('leak: connected')\nexcept OSError:\n    print('contained')"
    )
    try:
        assert await asyncio.gather(run(one, listen), run(one, connect)) == ["contained", "contained"]
    finally:
        await one.aclose()


async def test_a_program_of_any_allowed_size_runs(pool: Pool) -> None:
    assert await run(pool, BIG_PROGRAM) == "contained"


async def test_a_run_whose_launcher_died_is_not_run_again(pool: Pool) -> None:
    """Its launcher (and runner) killed mid-run: the outcome is unknown, so it is an error,
    never a second run of the same program."""
    call = asyncio.ensure_future(pool.run(Program(python="import time\ntime.sleep(2)\nprint('done')"), LIMITS))
    await asyncio.sleep(0.5)
    for launcher in pool._launchers:
        assert launcher is not None
        os.killpg(launcher.proc.pid, 9)
    with pytest.raises(SandboxError, match="lost the run"):
        await call


async def test_programs_kept_running_are_bounded_by_the_pool_and_per_client() -> None:
    if bwrap_path() is None or os.geteuid() != 0:
        _ci.missing("isolation strict needs bubblewrap (apt-get install bubblewrap) and root")
    pool = Pool(size=2, max_open=3, max_open_per_client=2)
    sleeper = Program(python="import time\ntime.sleep(60)")
    try:
        mine = [await pool.open(sleeper, client="10.0.0.1") for _ in range(2)]
        with pytest.raises(SandboxBusyError, match="for client 10.0.0.1 .*max_open_per_client"):
            await pool.open(sleeper, client="10.0.0.1")
        theirs = await pool.open(sleeper, client="10.0.0.2")  # another client still has room
        with pytest.raises(SandboxBusyError, match="the pool's max_open"):
            await pool.open(sleeper, client="10.0.0.3")
        await mine[0].close()
        mine[0] = await pool.open(sleeper, client="10.0.0.1")  # a closed one's place is free again
        for opened in (*mine, theirs):
            await opened.close()
    finally:
        await pool.aclose()


async def test_a_closed_pool_leaves_nothing_behind() -> None:
    if bwrap_path() is None or os.geteuid() != 0:
        _ci.missing("isolation strict needs bubblewrap (apt-get install bubblewrap) and root")
    lock_dir = Path(os.readlink(f"/proc/self/fd/{_lock_file()}")).parent
    before = set(lock_dir.iterdir())
    located = _locate()
    ours = f"gym-metrics-{os.getpid()}-*"  # other pools of this process (other tests' fixtures) may live on
    others = {d for parent in (located[0] if located else []) for d in parent.glob(ours)}
    pool = Pool(size=4)
    await pool.start()  # its launchers start together: one cgroup directory per hierarchy all the same
    if pool._cgroups is not None:
        assert all(set(base.parent.glob(ours)) - others == {base} for base in pool._cgroups.bases)
    results = await asyncio.gather(*(pool.run(Program(python="print(1)"), LIMITS) for _ in range(20)))
    assert {r.stdout for r in results} == {b"1\n"}
    roots = [launcher.root for launcher in pool._launchers if launcher is not None]
    cgroups = list(pool._cgroups.bases) if pool._cgroups is not None else []
    await pool.aclose()
    assert roots and not any(root.exists() for root in roots)
    assert not any(base.exists() for base in cgroups)
    assert set(lock_dir.iterdir()) == before  # one lock file for every lease, not one per uid


async def test_isolation_none_says_so_and_still_frees_a_deep_tree() -> None:
    pool = Pool(size=2, isolation="none")
    try:
        code = "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\nprint('deep')"
        result = await pool.run(Program(python=code), LIMITS)
        assert (result.stdout, result.isolated) == (b"deep\n", False)
        roots = [launcher.root for launcher in pool._launchers if launcher is not None]
        assert roots and all(not any(root.iterdir()) for root in roots)  # removed, with no RecursionError
    finally:
        await pool.aclose()


async def test_cgroups_left_by_a_killed_server_are_removed() -> None:
    found = Cgroups.find()
    if found is None:
        _ci.missing("this host gives no cgroup to the server")
    found.remove()
    gone = subprocess.Popen(["true"])  # its pid is free once it is reaped
    gone.wait()
    stale = [base.parent / f"gym-metrics-{gone.pid}-00000000" for base in found.bases]
    for base in stale:
        (base / "run-0").mkdir(parents=True)
    again = Cgroups.find()
    assert again is not None
    again.remove()
    assert not any(base.exists() for base in stale)


@pytest.mark.alone  # counts the processes of user 65534 machine-wide
def test_a_run_sharing_the_servers_user_does_not_count_the_servers_threads() -> None:
    """A non-root server (isolation none: its runs keep its user) with 80 threads of its own:
    the program under the run's `processes` limit of 8 can still start its threads. Run in a
    forked child that became an unprivileged user, with the launcher's own code."""
    if os.geteuid() != 0:
        _ci.missing("needs root, to become an unprivileged user in a child")
    spec = importlib.util.spec_from_file_location("gm_launch", Path(sandbox_package.__file__).with_name("_launch.py"))
    assert spec is not None and spec.loader is not None
    launch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the "server": unprivileged, many threads
        try:
            os.setgid(65534)
            os.setuid(65534)
            stop = threading.Event()
            for _ in range(80):
                threading.Thread(target=stop.wait, daemon=True).start()
            limit = launch._nproc_limit({"uid": None, "processes": 8})
            program = os.fork()
            if program == 0:  # the run's program, under that limit
                resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
                try:
                    for _ in range(4):
                        threading.Thread(target=lambda: None).start()
                    os._exit(0)
                except RuntimeError:
                    os._exit(1)
            os.write(write, b"ok" if os.waitpid(program, 0)[1] == 0 else b"no threads")
        finally:
            os._exit(0)
    os.close(write)
    said = os.read(read, 100)
    os.waitpid(pid, 0)
    assert said == b"ok"


async def test_a_killed_servers_run_folders_are_removed_by_the_next_one(tmp_path: Path) -> None:
    """SIGKILL runs no cleanup: the staged programs of the runs a killed server had in flight
    stayed in /tmp for good. The next server removes the folders whose server is gone."""
    import tempfile

    import gym_metrics.sandbox._local as local

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead, alive = (Path(tempfile.gettempdir()) / f"gm-sandbox-{pid}-test{os.getpid()}" for pid in (int(gone.stdout), os.getppid()))
    for folder in (dead, alive):
        (folder / "run-x").mkdir(parents=True)
        (folder / "run-x" / "main.py").write_text("print('model code')")
    local._remove_stale_roots.cache_clear()
    try:
        result = await run_local(Program(python="print('ok')"), LIMITS)
        assert result.stdout == b"ok\n" and not dead.exists() and alive.exists()
    finally:
        for folder in (dead, alive):
            local.remove_tree(folder)
