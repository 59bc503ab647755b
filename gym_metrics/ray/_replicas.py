"""serve_replicas: n `gym-metrics serve` processes, each owned by a Ray actor that Ray places
across the cluster (SPREAD), and the host:port addresses to give `collect --server`."""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType, TracebackType
from typing import Any

from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError

RAY_EXTRA_HINT = "gym_metrics.ray needs Ray, an optional extra: pip install 'gym-metrics[ray]'"
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", ""})
LISTENING = re.compile(r"listening on (\S+):(\d+)")
"""The line `gym-metrics serve` writes to stderr once bound (gym_metrics._transport.serve)."""

# Run as `python -c _LAUNCH serve ...`: ask Linux to SIGTERM the server when the actor's process
# dies (ray.kill, a crash, a lost node), so no orphan keeps the port, then become the CLI. Done
# in the fresh child rather than in a preexec_fn, which is unsafe in the threaded Ray worker.
_LAUNCH = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG\n"
    "except (OSError, AttributeError):\n"
    "    pass  # not Linux: Replicas.stop() is the only way down\n"
    "if os.getppid() == 1:\n"
    "    sys.exit('gym-metrics: the process that started this server is gone')\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'gym_metrics.cli', *sys.argv[1:]])\n"
)


def _ray() -> ModuleType:
    """The ray module, or an ImportError that names the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(RAY_EXTRA_HINT) from exc
    return ray


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


class ServerProcess:
    """One `gym-metrics serve` subprocess; the class a Ray actor wraps (it imports no Ray).

    A subprocess rather than a server inside the actor's own process: it is exactly the CLI's
    bootstrap (signal handling, graceful drain, logs), it owns its event loop and the GIL of its
    process, and a crash in environment code cannot take the Ray worker down with it.
    """

    def __init__(self, args: Sequence[str], env: Mapping[str, str] | None = None, advertise_host: str | None = None):
        self._advertise = advertise_host
        self._port: int | None = None
        self._done = threading.Event()  # set once the port is known or the process has ended
        self._tail: collections.deque[str] = collections.deque(maxlen=20)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        threading.Thread(target=self._read_stderr, name="gym-metrics-serve-stderr", daemon=True).start()

    def _read_stderr(self) -> None:
        """Find the "listening on" line; forward every line to this process's stderr (Ray
        shows an actor's stderr on the driver) so the server's logs stay visible."""
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            if self._port is None and (match := LISTENING.search(line)):
                self._port = int(match.group(2))
                self._done.set()
            self._tail.append(line.rstrip("\n"))
            sys.stderr.write(line)
            sys.stderr.flush()
        self._done.set()

    def address(self, timeout: float) -> str:
        """host:port to dial once the server listens; the node's IP when it binds a wildcard."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"gym-metrics serve did not listen within {timeout:g} s; its last lines:\n{self.tail()}")
        if self._port is None:
            code = self._proc.wait()
            raise GymMetricsError(f"gym-metrics serve exited with code {code} before listening; its last lines:\n{self.tail()}")
        host = self._advertise
        if host is None:
            host = _ray().util.get_node_ip_address()
        return _join_host_port(host, self._port)

    def pid(self) -> int:
        return self._proc.pid

    def returncode(self) -> int | None:
        """None while the server runs."""
        return self._proc.poll()

    def tail(self) -> str:
        return "\n".join(self._tail) or "(none)"

    def stop(self, grace: float) -> int | None:
        """SIGTERM (the server drains for its --grace), SIGKILL if it outlives grace + 10 s."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(grace + 10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        return self._proc.returncode


class Replicas:
    """Environment servers running as Ray actors. `with serve_replicas(...) as replicas:` stops
    them on exit; `addresses` are host:port strings for `collect --server`."""

    def __init__(self, addresses: Sequence[str], actors: Sequence[Any], grace: float) -> None:
        self.addresses: list[str] = list(addresses)
        self.actors: list[Any] = list(actors)
        """The Ray actor handles (ServerProcess), one per address, in the same order."""
        self.grace = grace
        self._stopped = False

    def server_args(self) -> list[str]:
        """`--server A --server B ...` for the `gym-metrics collect` command line."""
        return [arg for address in self.addresses for arg in ("--server", address)]

    def stop(self, grace: float | None = None) -> None:
        """SIGTERM every server (each drains for `grace` s), then end the actors. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        grace = self.grace if grace is None else grace
        _stop_actors(_ray(), self.actors, grace)

    def __len__(self) -> int:
        return len(self.addresses)

    def __iter__(self) -> Iterator[str]:
        return iter(self.addresses)

    def __enter__(self) -> Replicas:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop(0 if exc_type is not None else None)

    def __repr__(self) -> str:
        return f"Replicas({self.addresses!r})"


def serve_replicas(
    target: str,
    n: int,
    *,
    host: str = "0.0.0.0",
    port: int = 0,
    num_cpus: float = 1,
    grace: float = 10.0,
    serve_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    startup_timeout: float = 120.0,
    actor_options: Mapping[str, Any] | None = None,
) -> Replicas:
    """Start `n` `gym-metrics serve TARGET` servers as Ray actors spread over the cluster.

    Each actor reserves `num_cpus` (one server process uses one core) and runs
    `gym-metrics serve TARGET --host HOST --port PORT --grace GRACE *serve_args` as its child,
    so the environment must be installed on every node. `port=0` lets each pick a free port;
    a server bound to a wildcard host is advertised at its node's IP. `env` is added to the
    servers' environment (e.g. GYM_METRICS_AUTH_TOKEN); `actor_options` go to Ray's
    `.options()` (memory, resources, runtime_env, a scheduling strategy other than SPREAD).
    Uses the connected Ray cluster (or starts a local one, as any Ray call does). Blocks until
    every server listens; if one fails or Ray cannot place them within `startup_timeout`
    seconds, all are stopped and GymMetricsError says why.
    """
    _check_args(target, n, port, num_cpus, grace, startup_timeout)
    ray = _ray()
    actor_cls = ray.remote(ServerProcess)
    options: dict[str, Any] = {"num_cpus": num_cpus, "scheduling_strategy": "SPREAD", "max_restarts": 0}
    options.update(actor_options or {})
    args = ["serve", target, "--host", host, "--port", str(port), "--grace", f"{grace:g}", *serve_args]
    advertise = None if host in WILDCARD_HOSTS else host.strip("[]")
    actors = [actor_cls.options(**options).remote(args, dict(env or {}), advertise) for _ in range(n)]
    try:
        addresses = _wait_for_addresses(ray, actors, startup_timeout, num_cpus)
    except BaseException:
        _stop_actors(ray, actors, 0)
        raise
    return Replicas(addresses, actors, grace)


def _check_args(target: str, n: int, port: int, num_cpus: float, grace: float, startup_timeout: float) -> None:
    problems = [
        ("target", "must name an environment (e.g. math_exact)", not target.strip()),
        ("n", f"must be >= 1, got {n}", n < 1),
        ("port", "must be in 0..65535", not 0 <= port <= 65535),
        ("num_cpus", "must be >= 0", num_cpus < 0),
        ("grace", "must be >= 0", grace < 0),
        ("startup_timeout", "must be positive", startup_timeout <= 0),
    ]
    violations = [FieldViolation(name, why) for name, why, bad in problems if bad]
    if violations:
        raise InvalidInputError("invalid serve_replicas arguments", violations)


def _wait_for_addresses(ray: ModuleType, actors: list[Any], timeout: float, num_cpus: float) -> list[str]:
    """Every actor's address, or GymMetricsError naming the first replica that failed."""
    refs = [actor.address.remote(timeout) for actor in actors]
    ready, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout + 15)
    if pending:
        raise GymMetricsError(
            f"{len(pending)} of {len(refs)} replicas did not start within {timeout:g} s "
            f"(each asks Ray for num_cpus={num_cpus:g}; can the cluster place them all?)"
        )
    addresses = []
    for i, ref in enumerate(refs):
        try:
            addresses.append(ray.get(ref))
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None) or exc
            raise GymMetricsError(f"replica {i + 1} of {len(refs)} did not start: {cause}") from None
    return addresses


def _stop_actors(ray: ModuleType, actors: Sequence[Any], grace: float) -> None:
    """Ask every server to stop, wait for them (bounded), then end the actors."""
    refs = [actor.stop.remote(grace) for actor in actors]
    try:
        ray.wait(refs, num_returns=len(refs), timeout=grace + 30)
    finally:
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - an actor already gone is what we wanted
                pass
