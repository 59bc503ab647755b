"""The local sandbox provider against programs that misbehave: each is contained and reported
with its reason (bubblewrap's namespaces where installed: tests/_ci.py needs it under CI)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from gym_metrics.sandbox import Limits, Program, bwrap_path, run_local

sys.path.insert(0, str(Path(__file__).parents[1]))
import _ci  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("sandbox")]
PY = sys.executable
LIMITS = Limits(wall_s=3, cpu_s=2, memory_mb=256, output_bytes=1 << 16)


def python(code: str, **more: object) -> Program:
    return Program([PY, "-c", code], **more)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def isolated() -> bool:
    if bwrap_path() is None:
        _ci.missing("bubblewrap is not installed (apt-get install bubblewrap): the namespaces are not in force")
    return True


async def test_a_program_runs_with_its_files_and_stdin() -> None:
    program = python("import sys; print(open('data.txt').read() + sys.stdin.read()[::-1])", stdin=b"cba", files={"data.txt": "x"})
    result = await run_local(program, LIMITS)
    assert (result.stop, result.exit_code, result.stdout) == ("exit", 0, b"xabc\n")
    assert result.cpu_s > 0 and result.max_rss_kb > 0


@pytest.mark.parametrize(
    ("code", "stop"),
    [
        ("while True: pass", "cpu"),
        ("import time; time.sleep(30)", "timeout"),
        ("x = bytearray(2_000_000_000)", "memory"),
        ("import sys\nwhile True: sys.stdout.write('x' * 65536)", "output_limit"),
    ],
    ids=["infinite loop", "sleeper", "memory bomb", "output bomb"],
)
async def test_each_excess_is_stopped_and_named(code: str, stop: str) -> None:
    limits = Limits(wall_s=6, cpu_s=1, memory_mb=256, output_bytes=1 << 16) if stop == "cpu" else LIMITS  # CPU runs out first
    started = time.perf_counter()
    result = await run_local(python(code), limits)
    assert result.stop == stop, (result.stop, result.stderr[-300:])
    assert time.perf_counter() - started < limits.wall_s + 2
    assert len(result.stdout) <= LIMITS.output_bytes


async def test_a_run_that_ended_as_its_output_passed_the_cap_stopped_for_the_output_limit() -> None:
    """The cap hit as the program ended (its end seen before its last bytes were read): its
    stop was `exit` now and then, and code_tests scored the output cut at the cap."""
    from gym_metrics.sandbox._watch import watch

    stdout, stderr = asyncio.StreamReader(), asyncio.StreamReader()
    stdout.feed_data(b"A" * 20)
    stdout.feed_eof()
    stderr.feed_eof()
    ended = asyncio.get_running_loop().create_future()
    ended.set_result(0)  # ended first
    watched = await watch(stdout, stderr, asyncio.sleep(0), ended, lambda: None, Limits(output_bytes=10))
    assert (watched.stopped, watched.truncated, watched.stdout) == ("output_limit", True, b"A" * 10)


async def test_a_killed_run_reports_the_cpu_and_memory_it_used(isolated: bool) -> None:
    """Killed with its init, a run that timed out said 0 s of CPU and the init's own memory."""
    code = "import time\nblock = b'x' * (100 << 20)\nt = time.process_time()\nwhile time.process_time() - t < 0.6:\n    pass\ntime.sleep(30)"
    result = await run_local(python(code), Limits(wall_s=3, cpu_s=10, memory_mb=512))
    assert result.stop == "timeout" and result.cpu_s >= 0.5 and result.max_rss_kb > 100 << 10, (result.cpu_s, result.max_rss_kb)


async def test_the_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GM_SERVER_SECRET", "do-not-leak")
    result = await run_local(python("import os; print(sorted(os.environ))", env={"MINE": "1"}), LIMITS)
    assert b"GM_SERVER_SECRET" not in result.stdout and b"MINE" in result.stdout


async def test_writing_outside_and_the_network_are_refused(isolated: bool) -> None:
    write = await run_local(python("open('/etc/gm_sandbox_probe', 'w').write('x')"), LIMITS)
    assert write.exit_code != 0 and b"Read-only file system" in write.stderr and write.isolated
    assert not Path("/etc/gm_sandbox_probe").exists()
    net = await run_local(python("import socket; socket.create_connection(('127.0.0.1', 22), timeout=1)"), LIMITS)
    assert net.exit_code != 0 and (b"refused" in net.stderr or b"unreachable" in net.stderr)



async def test_tmp_is_each_runs_own_and_bounded(isolated: bool) -> None:
    """/tmp is writable by absolute path (NeMo Gym's sandboxed tools put their files there), a
    run's own (the next run of the same launcher sees nothing of it, nor does the host), and
    capped like its directory; the run's directory stays where it was."""
    token = f"gm-tmp-{time.time_ns()}"
    write = await run_local(python(f"open('/tmp/{token}', 'w').write('mine'); print(open('/tmp/{token}').read()); open('here.txt', 'w').write('x')"), LIMITS)
    assert (write.exit_code, write.stdout) == (0, b"mine\n"), write.stderr
    assert not Path(f"/tmp/{token}").exists()
    read = await run_local(python(f"import os; print(os.path.exists('/tmp/{token}'))"), LIMITS)
    assert read.stdout == b"False\n", read.stderr
    full = await run_local(python("open('/tmp/big', 'wb').write(b'x' * (3 << 20))"), Limits(wall_s=5, disk_mb=2))
    assert full.exit_code != 0 and b"No space left on device" in full.stderr

async def test_nothing_is_left_running_after_the_run(isolated: bool) -> None:
    """A child the program started outlives neither the run nor its sandbox. The child's command
    line carries a token of this test; the same search finds a process carrying one started
    from here (so the search itself can fail)."""
    import subprocess
    import uuid

    token = f"gm-leftover-{uuid.uuid4().hex}"
    child = f"import time; time.sleep(30)  # {token}"
    code = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {child!r}]); print('spawned')"
    result = await run_local(python(code), LIMITS)
    assert result.stdout == b"spawned\n"
    assert subprocess.run(["pgrep", "-f", token], capture_output=True, text=True).stdout.split() == []
    control = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(30)  # {token}-control"])
    try:
        assert subprocess.run(["pgrep", "-f", f"{token}-control"], capture_output=True, text=True).stdout.split() == [str(control.pid)]
    finally:
        control.kill()
        control.wait()


def test_a_launcher_never_closed_leaves_no_folder(tmp_path: Path) -> None:
    """A process that started launchers and never closed them (a pool its owner forgot, a
    server stopped without its environment's close) leaves none of their folders behind."""
    import subprocess

    script = (
        "import asyncio, gc\n"
        "from gym_metrics.sandbox import Launcher\n"
        "async def main():\n"
        "    kept = await Launcher.start(isolation='none', users=False)\n"
        "    dropped = await Launcher.start(isolation='none', users=False)\n"
        "    print(kept.root, dropped.root, flush=True)\n"
        "    del dropped; gc.collect()\n"
        "    return kept\n"
        "launcher = asyncio.run(main())\n"
    )
    proc = subprocess.run([PY, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    roots = [Path(p) for p in proc.stdout.split()]
    assert len(roots) == 2 and all(p.name.startswith("gm-sandbox-") for p in roots)
    assert [p for p in roots if p.exists()] == []
