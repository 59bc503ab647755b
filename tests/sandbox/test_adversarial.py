"""Hostile programs through a real `gym-metrics serve code_tests` process: each is contained and
reported with its reason, nothing it started survives it, and the server keeps answering its
health checks (p99 under 100 ms over the whole suite, probed from a thread all along).

A program that probes a boundary prints `contained` when every attempt failed, or what leaked:
its one test expects `contained`, so a leak is a wrong_answer that names it. The suite needs
bubblewrap and root (each run then has a user of its own): CI has both (tests/_ci.py)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.sandbox import bwrap_path
from gym_metrics.sandbox._cgroups import Cgroups
from gym_metrics.sandbox._users import UID_COUNT

sys.path[:0] = [str(Path(__file__).parents[1]), str(Path(__file__).parent)]
import _ci  # noqa: E402
from _health_probe import HealthProber  # noqa: E402
from _attacks import (  # noqa: E402
    BIG_PROGRAM,
    DEEP_DIRECTORIES,
    DISK_BYTES_AND_FILES,
    HOST_SOCKETS,
    unix_listeners,
    KERNEL_REFUSALS,
    MEMORY_OVER_CHILDREN,
    SYSV_LOOK,
    SYSV_MAKE,
)

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow, pytest.mark.alone, pytest.mark.usefixtures("sandbox")]
SECRET = "gm-adversarial-secret-7f3a"
UIDS = 2_100_000_000  # the server's runs' users: a range of their own, told apart from other tests' runs


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], address: str, secret_file: Path, cwd: Path) -> None:
        self.proc, self.address, self.secret_file, self.cwd = proc, address, secret_file, cwd
        self.port = int(address.rsplit(":", 1)[1])
        self.health = HealthProber(address)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if bwrap_path() is None:
        _ci.missing("bubblewrap is not installed (apt-get install bubblewrap): the namespaces are not in force")
    if os.geteuid() != 0:
        _ci.missing("the adversarial suite runs as root: each run then has a user of its own (docs/sandbox.md)")
    cwd = tmp_path_factory.mktemp("server")
    secrets = Path(f"/var/tmp/gm-adversarial-{os.getpid()}")  # not under /tmp: the sandbox's view includes it
    secrets.mkdir(exist_ok=True)
    secret_file = secrets / "secret.txt"
    secret_file.write_text(SECRET)
    secret_file.chmod(0o600)
    env = {**os.environ, "GM_SERVER_SECRET": SECRET, "GYM_METRICS_SANDBOX_UID_BASE": str(UIDS)}
    err = cwd / "serve.err"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", "serve", "code_tests", "--port", "0"],
                                cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
    deadline = time.monotonic() + 60
    while not (found := re.search(r"listening on (\S+:\d+)", err.read_text())):
        assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
        time.sleep(0.05)
    running = Server(proc, found[1], secret_file, cwd)
    try:
        yield running
    finally:
        running.health.stop()
        proc.terminate()
        proc.wait(30)
        secret_file.unlink()
        secrets.rmdir()


def cgroups_here() -> bool:
    """Whether this host lets a root process make cgroups (the server's runs then have one)."""
    found = Cgroups.find()
    if found is not None:
        found.remove()
    return found is not None


def program(code: str) -> dict[str, Any]:
    return {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"```python\n{code}\n```"}]}]}


async def verify(server: Server, code: str, stdin: str = "", expected: str = "contained", **limits: Any) -> dict[str, Any]:
    body = {"response": program(code), "tests": [{"input": stdin, "output": expected}], "time_limit_s": 3, **limits}
    async with ResourcesClient(server.address) as client:
        result = await client.verify(body)
    assert server.proc.poll() is None, "the server died"
    return result


def sandbox_processes() -> list[str]:
    """Processes of the runs' users still alive: none may outlive its run."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        uid = int(re.search(r"^Uid:\s+(\d+)", text, re.MULTILINE)[1])  # type: ignore[index]
        if UIDS <= uid < UIDS + UID_COUNT:
            found.append(f"{status.parent.name} uid {uid}")
    return found


def status_of(result: dict[str, Any]) -> tuple[str, str]:
    [test] = result["test_results"]
    return test["status"], test["detail"]


# ----------------------------------------------------------------------------- resources


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("while True:\n    pass", "timeout"),
        ("import time\ntime.sleep(60)", "timeout"),
        ("x = bytearray(4 << 30)", "memory"),
        ("import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)", "output_limit"),
        ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", "timeout"),
    ],
    ids=["infinite loop", "sleeper", "memory bomb", "1 GB of output", "fork bomb"],
)
async def test_an_excess_is_stopped_and_named(server: Server, code: str, status: str) -> None:
    started = time.monotonic()
    result = await verify(server, code, memory_limit_mb=256)
    assert status_of(result)[0] == status, result["test_results"]
    assert result["reward"] == 0.0
    assert time.monotonic() - started < 3 + 5  # the time limit, and the kill
    assert sandbox_processes() == []


async def test_a_fork_bomb_stops_at_the_processes_limit(server: Server) -> None:
    code = "import os, time\nn = 0\nwhile True:\n    try:\n        if os.fork() == 0:\n            time.sleep(60)\n        n += 1\n    except OSError:\n        break\nprint(n)"
    result = await verify(server, code, expected="63")  # 64 at once, itself included
    assert status_of(result) == ("ok", ""), result["test_results"]
    assert sandbox_processes() == []


# ----------------------------------------------------------------------------- boundaries


async def test_writing_outside_its_directory_fails(server: Server) -> None:
    targets = ["/etc/gm_probe", f"{server.cwd}/gm_probe", "/var/tmp/gm_probe", "/root/gm_probe", "/dev/shm/gm_probe"]
    code = (
        "import json, sys\nleaks = []\nfor path in json.loads(sys.stdin.read()):\n    try:\n"
        "        open(path, 'w').write('x')\n        leaks.append(path)\n    except OSError:\n        pass\n"
        "open('mine.txt', 'w').write('its own directory is writable')\nprint('leak: ' + ' '.join(leaks) if leaks else 'contained')"
    )
    result = await verify(server, code, stdin=json.dumps(targets))
    assert status_of(result) == ("ok", ""), result["test_results"]
    assert not any(Path(t).exists() for t in targets)


async def test_the_servers_secrets_are_out_of_reach(server: Server) -> None:
    code = (
        "import glob, json, os, sys\nsecret, server_pid, secret_file = json.loads(sys.stdin.read())\nleaks = []\n"
        "if any(secret in v for v in os.environ.values()):\n    leaks.append('environ')\n"
        "for path in glob.glob('/proc/*/environ') + [f'/proc/{server_pid}/environ', f'/proc/{server_pid}/cmdline', secret_file, '/etc/shadow']:\n"
        "    try:\n        if secret in open(path, errors='replace').read() or path == '/etc/shadow':\n            leaks.append(path)\n"
        "    except OSError:\n        pass\nprint('leak: ' + ' '.join(leaks) if leaks else 'contained')"
    )
    result = await verify(server, code, stdin=json.dumps([SECRET, server.proc.pid, str(server.secret_file)]))
    assert status_of(result) == ("ok", ""), result["test_results"]


async def test_the_network_is_unreachable_loopback_included(server: Server) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    ports = [server.port, listener.getsockname()[1]]
    code = (
        "import json, socket, sys\nleaks = []\nfor port in json.loads(sys.stdin.read()):\n    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=1).close()\n        leaks.append(port)\n"
        "    except OSError:\n        pass\nprint('leak: ' + ' '.join(map(str, leaks)) if leaks else 'contained')"
    )
    with listener:
        listener.settimeout(0.5)
        result = await verify(server, code, stdin=json.dumps(ports))
        with pytest.raises(socket.timeout):
            listener.accept()  # nothing came through
    assert status_of(result) == ("ok", ""), result["test_results"]


async def test_killing_its_parent_or_the_server_fails(server: Server) -> None:
    code = (
        "import os, signal, sys\nleaks = []\nfor pid in (os.getppid(), int(sys.stdin.read()), 1):\n    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n        leaks.append(pid)\n    except OSError:\n        pass\n"
        "print('leak: ' + ' '.join(map(str, leaks)) if leaks else 'contained')"
    )
    result = await verify(server, code, stdin=str(server.proc.pid))
    assert status_of(result) == ("ok", ""), result["test_results"]
    assert server.proc.poll() is None


async def test_nothing_it_started_outlives_it(server: Server) -> None:
    code = (
        "import os, subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n    os._exit(0)\n"
        "time.sleep(0.5)\nprint('contained')"
    )
    result = await verify(server, code)
    assert status_of(result) == ("ok", ""), result["test_results"]
    assert sandbox_processes() == []


async def test_no_privilege_can_be_gained(server: Server) -> None:
    code = (
        "import os, subprocess\nleaks = []\nstatus = open('/proc/self/status').read()\n"
        "if 'NoNewPrivs:\\t1' not in status:\n    leaks.append('no_new_privs unset')\n"
        "if 'CapEff:\\t0000000000000000' not in status:\n    leaks.append('capabilities')\n"
        "try:\n    os.setuid(0)\n    leaks.append('setuid')\nexcept OSError:\n    pass\n"
        "try:\n    su = subprocess.run(['su', '-c', 'id -u', 'root'], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1)\n"
        "    if su.stdout.strip() == '0':\n        leaks.append('su')\nexcept subprocess.TimeoutExpired:\n    pass\n"
        "print('leak: ' + ' '.join(leaks) if leaks else 'contained')"
    )
    result = await verify(server, code)
    assert status_of(result) == ("ok", ""), result["test_results"]


async def test_a_verify_whose_client_left_stops_its_run(server: Server) -> None:
    call = asyncio.ensure_future(verify(server, "import time\ntime.sleep(60)", time_limit_s=60))
    for _ in range(100):  # until its run has started
        if sandbox_processes():
            break
        await asyncio.sleep(0.05)
    assert sandbox_processes(), "the run never started"
    call.cancel()
    for _ in range(100):
        if not sandbox_processes():
            break
        await asyncio.sleep(0.05)
    assert sandbox_processes() == []  # stopped with its request, not at its 60 s limit


# ----------------------------------------------------------------------------- the run as a whole (issue 35)


@pytest.mark.parametrize(
    ("code", "limits"),
    [
        (MEMORY_OVER_CHILDREN, {"memory_limit_mb": 512, "time_limit_s": 10}),
        (DISK_BYTES_AND_FILES, {"time_limit_s": 20}),
        (DEEP_DIRECTORIES, {"time_limit_s": 10}),
        (KERNEL_REFUSALS, {}),
        (BIG_PROGRAM, {}),
    ],
    ids=["memory over children", "1 GB and 200,000 files", "nested directories", "keyring, user namespace, mount", "600 KB program"],
)
async def test_the_run_is_bounded_as_a_whole(server: Server, code: str, limits: dict[str, Any]) -> None:
    if code is MEMORY_OVER_CHILDREN and not cgroups_here():
        _ci.missing("this host gives no cgroup to the server: memory holds per process only (docs/sandbox.md)")
    result = await verify(server, code, **limits)
    assert status_of(result) == ("ok", ""), result["test_results"]
    assert sandbox_processes() == []


async def test_sysv_ipc_never_reaches_a_later_run(server: Server) -> None:
    await verify(server, SYSV_MAKE, expected="made")
    looked = await asyncio.gather(*(verify(server, SYSV_LOOK) for _ in range(4)))
    assert [status_of(r) for r in looked] == [("ok", "")] * 4, [r["test_results"] for r in looked]


async def test_the_hosts_unix_sockets_are_out_of_reach(server: Server) -> None:
    places = [Path("/run") / f"gm-adversarial-{os.getpid()}.sock", Path("/var/tmp") / f"gm-adversarial-{os.getpid()}.sock"]
    with unix_listeners(places) as paths:
        result = await verify(server, HOST_SOCKETS, stdin=paths)
    assert status_of(result) == ("ok", ""), result["test_results"]


# ----------------------------------------------------------------------------- the server


def test_the_server_kept_answering_health_checks(server: Server) -> None:
    """Last in the file: the probe ran through every case above."""
    server.health.assert_p99_under(100)
