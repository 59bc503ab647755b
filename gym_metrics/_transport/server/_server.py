"""Server bootstrap: one grpc.aio server with health, reflection, auth, access logs and the
call limits; `RunningServer.stop` drains it. Running it as a process is `_serving`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import grpc
from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
import pydantic

from gym_metrics._transport.server._handlers import add_resources_service
from gym_metrics._transport.server._health import HealthServicer
from gym_metrics._transport.server._interceptors import AccessLogInterceptor, AuthInterceptor, MetricsInterceptor
from gym_metrics._transport.server._tracing import server_interceptor
from gym_metrics._transport.server._metrics import ServerMetrics, serve_http
from gym_metrics._util.limits import CallLimits
from gym_metrics._util.tls import server_pair
from gym_metrics._transport.server._reflection import enable_reflection
from gym_metrics._transport.server._servicer import ResourcesServicer
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError
from gym_metrics.reducers import resolve_reducers
from gym_metrics.environments import IDLE_TTL_S, MAX_SESSIONS, TOOL_TIMEOUT_S, EnvironmentHandler, SimpleResourcesServer, close_sandbox, hook, resolve_server
from gym_metrics.v1 import resources_pb2

log = logging.getLogger("gym_metrics.server")

if TYPE_CHECKING:
    from typing_extensions import Self


SERVICE_NAME: str = resources_pb2.DESCRIPTOR.services_by_name["ResourcesService"].full_name
AUTH_TOKEN_ENV = "GYM_METRICS_AUTH_TOKEN"
HANDLER_KNOBS = ("max_concurrent_verifies", "verify_timeout_s")
"""`servicer_options` that go to the EnvironmentHandler; the rest go to the ResourcesServicer."""
"""serve() reads the token from here when none is given (keeps it out of `ps` output)."""

EnvTarget = SimpleResourcesServer | type[SimpleResourcesServer] | str


@dataclass
class ServerConfig:
    """How to serve an environment. Every field has a CLI flag of the same name."""

    host: str = "127.0.0.1"
    port: int = 50051
    """0 picks a free port; read it back from RunningServer.port."""
    max_message_bytes: int = 64 * 1024 * 1024
    """Send and receive limit; grpc's default receive limit (4 MiB) is too small for batches."""
    auth_token: str | None = field(default=None, repr=False)
    """When set, every RPC but health and reflection needs `authorization: Bearer <token>`."""
    tls_cert_file: str | Path | None = None
    tls_key_file: str | Path | None = None
    grace_seconds: float = 10.0
    """How long in-flight calls may run on after shutdown begins."""
    drain_seconds: float = 0.0
    """Pause between reporting NOT_SERVING and refusing new calls, for load balancers that poll."""
    max_concurrent_rpcs: int | None = None
    """Beyond this many concurrent RPCs the server answers RESOURCE_EXHAUSTED."""
    max_pending_rpcs: int = 100_000
    """Calls that may wait to be picked up (grpc's own default, 1000 / 3000, silently
    CANCELs a burst of small calls)."""
    limits: CallLimits = field(default_factory=CallLimits)
    """Bounds on each AggregateMetrics call (`--max-rollouts-per-call`, ...)."""
    max_sessions: int = MAX_SESSIONS
    """Live sessions at most (agentic environments); a SeedSession past it is refused, retryable."""
    session_ttl_s: float = IDLE_TTL_S
    """Seconds a session may go unused before it is closed (its client went away)."""
    tool_timeout_s: float = TOOL_TIMEOUT_S
    """Seconds one tool call may run; past it the model reads a timeout error."""
    verify_timeout_s: float | None = None
    """Seconds one verify may run; past it the rollout fails as `timeout` (never a 0). None:
    no bound, as NeMo Gym (a verify that never returns then holds its collect forever)."""
    mcp_port: int | None = None
    """Serve the environment's tools over MCP (streamable HTTP, `/mcp`) on this port of `host`
    (0 picks one); None: off. Needs the `mcp` extra."""
    http_port: int | None = None
    """Serve rewards over HTTP on this port of `host` (OpenRLHF's `POST /get_reward`, and
    `POST /score_groups`; 0 picks one); None: off. Needs the `http` extra."""
    http_label_field: str = "expected_answer"
    """The verify request field OpenRLHF's `labels` fill."""
    agent_http_port: int | None = None
    """Serve NeMo Gym's agent `POST /run` (NeMo RL's door: integrations/agent_run.py) on this
    port of `host` (0 picks one), running episodes against `agent_target`; None: off. Needs
    the `http` extra."""
    agent_target: Any = None
    """The policy of `/run` episodes (a targets.ModelTargetConfig)."""
    agent_max_steps: int | None = None
    """Policy calls one `/run` episode may make (None: until it answers without calls)."""
    agent_capture_tokens: bool = False
    """`/run` asks the policy for token IDs and log-probs and answers them on the output items,
    with `ng_model_call_capture` and `ng_trajectory`."""
    reflection: bool = True
    log_requests: bool = True
    grpc_options: list[tuple[str, Any]] = field(default_factory=list)
    """Extra grpc channel arguments, applied last (they win)."""
    prometheus_port: int | None = None
    """Serve Prometheus metrics (/metrics) on this port of `host` (0 picks one); None: off.
    Needs the `prometheus` extra."""

    def __post_init__(self) -> None:
        problems = [
            ("port", "must be in 0..65535", not 0 <= self.port <= 65535),
            ("max_message_bytes", "must be positive", self.max_message_bytes <= 0),
            ("tls_key_file", "TLS needs both tls_cert_file and tls_key_file",
             (self.tls_cert_file is None) != (self.tls_key_file is None)),
            ("grace_seconds", "must be >= 0", self.grace_seconds < 0),
            ("drain_seconds", "must be >= 0", self.drain_seconds < 0),
            ("max_concurrent_rpcs", "must be positive", self.max_concurrent_rpcs is not None
             and self.max_concurrent_rpcs <= 0),
            ("max_pending_rpcs", "must be positive", self.max_pending_rpcs <= 0),
            ("max_sessions", "must be positive", self.max_sessions <= 0),
            ("session_ttl_s", "must be positive", self.session_ttl_s <= 0),
            ("tool_timeout_s", "must be positive", self.tool_timeout_s <= 0),
            ("verify_timeout_s", "must be positive", self.verify_timeout_s is not None and self.verify_timeout_s <= 0),
            ("mcp_port", "must be in 0..65535", self.mcp_port is not None and not 0 <= self.mcp_port <= 65535),
            ("http_port", "must be in 0..65535", self.http_port is not None and not 0 <= self.http_port <= 65535),
            ("agent_http_port", "must be in 0..65535", self.agent_http_port is not None and not 0 <= self.agent_http_port <= 65535),
            ("agent_target", "the /run door needs a policy (--policy-url, --policy-model)",
             self.agent_http_port is not None and self.agent_target is None),
            ("prometheus_port", "must be in 0..65535", self.prometheus_port is not None
             and not 0 <= self.prometheus_port <= 65535),
            ("auth_token", "must not be empty (None disables auth)", self.auth_token is not None
             and not self.auth_token.strip()),
        ]  # fmt: skip
        violations = [FieldViolation(name, why) for name, why, bad in problems if bad]
        if violations:
            raise InvalidInputError("invalid server config", violations)

    @property
    def tls(self) -> bool:
        return self.tls_cert_file is not None

    def address(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{host}:{self.port if port is None else port}"


@dataclass(kw_only=True)
class RunningGrpcServer:
    """A started grpc server of ours (the resources server, the job server). `async with`
    stops it on exit."""

    server: aio.Server
    port: int
    """The bound port (the real one when the config asked for 0)."""
    config: ServerConfig
    health: HealthServicer
    metrics_port: int | None = None
    """Where /metrics is served (`config.prometheus_port`, the real one when that was 0)."""
    _stop_metrics: Callable[[], None] | None = field(default=None, repr=False)
    _stopping: bool = field(default=False, init=False, repr=False)

    @property
    def address(self) -> str:
        """host:port to dial."""
        return self.config.address(self.port)

    async def stop(self, grace: float | None = None) -> None:
        """Report NOT_SERVING, then refuse new calls and give in-flight ones `grace` seconds.

        Calling it again while a stop is under way with a smaller grace (0) cuts that short.
        """
        grace = self.config.grace_seconds if grace is None else grace
        if not self._stopping:
            self._stopping = True
            await self.health.enter_graceful_shutdown()
            await self._draining()
        await self.server.stop(grace)
        await self._release()

    async def _draining(self) -> None:
        """Between NOT_SERVING and refusing calls (balancers see the first before the second)."""

    async def _release(self) -> None:
        """After the server stopped: what it held (the /metrics endpoint here)."""
        if self._stop_metrics is not None:
            stop_metrics, self._stop_metrics = self._stop_metrics, None
            await asyncio.to_thread(stop_metrics)

    async def wait(self) -> None:
        """Block until the server has terminated."""
        await self.server.wait_for_termination()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop(0 if exc_type is not None else None)


@dataclass(kw_only=True)
class RunningServer(RunningGrpcServer):
    """A started resources server, serving `env` through `handler`."""

    env: SimpleResourcesServer
    handler: EnvironmentHandler
    """What its calls do (its live sessions: `handler.sessions.store`)."""
    mcp_port: int | None = None
    """Where the MCP endpoint listens (`http://host:mcp_port/mcp`), when `config.mcp_port` is set."""
    http_port: int | None = None
    """Where the HTTP reward endpoint listens, when `config.http_port` is set."""
    agent_http_port: int | None = None
    """Where NeMo Gym's agent `POST /run` listens, when `config.agent_http_port` is set."""
    _doors: list[Any] = field(default_factory=list, repr=False)

    async def stop(self, grace: float | None = None) -> None:
        """Stop serving, then close every live session and the environment (each frees what
        it holds: a session its sandbox, the environment its pool)."""
        doors, self._doors = self._doors, []
        for door in doors:  # the MCP and HTTP endpoints
            await door.stop()
        await super().stop(grace)
        await self.handler.sessions.aclose()
        await _closed(self.env)
        try:
            await close_sandbox(self.env)
        except Exception:
            log.exception("gym-metrics: closing %s's sandbox provider failed", type(self.env).__name__)

    async def _draining(self) -> None:
        if self.config.drain_seconds:
            await asyncio.sleep(self.config.drain_seconds)


def load_env(
    target: EnvTarget, reducers: Sequence[str] | None = None, *, metrics: Sequence[str] | None = None
) -> SimpleResourcesServer:
    """An environment instance from an instance, a class or a `resolve_server` name.

    `reducers` (reward reducer names; `metrics` is its old name) replaces the environment's
    list; every name is checked here, so a typo fails before the server binds, as do its tools
    and a constructor that raises: one line naming it (a bad `@tool` served on and failed every
    client's first GetServerInfo).
    """
    if isinstance(target, SimpleResourcesServer):
        env = target
    else:
        cls = resolve_server(target) if isinstance(target, str) else target
        if not (isinstance(cls, type) and issubclass(cls, SimpleResourcesServer)):
            raise TypeError(f"cannot serve {target!r}: need a SimpleResourcesServer instance, subclass or name")
        try:
            env = cls()
        except GymMetricsError:
            raise
        except Exception as exc:
            raise InvalidInputError("cannot build the environment", [FieldViolation(f"{cls.__name__}()", f"{type(exc).__name__}: {exc}")]) from exc
    names = _reducer_names(reducers, metrics)
    if names is not None:  # shadows the ClassVars on this instance (both: either may be read)
        setattr(env, "reducers", names)
        setattr(env, "metrics", names)
    resolve_reducers(env.listed_reducers())
    try:
        for spec in hook(env, "tools")().values():
            spec.as_function_tool()
    except (TypeError, ValueError, pydantic.PydanticUserError) as exc:  # a signature, a name, a schema
        raise InvalidInputError("the environment's tools cannot be served", [FieldViolation(type(env).__name__, str(exc))]) from exc
    return env


def _reducer_names(reducers: Sequence[str] | None, metrics: Sequence[str] | None) -> list[str] | None:
    """The reducer list given under its name or its old name (`metrics`), duplicates removed."""
    if reducers is not None and metrics is not None and list(reducers) != list(metrics):
        raise InvalidInputError("reducers and metrics (its old name) differ: give one of them")
    names = reducers if reducers is not None else metrics
    return None if names is None else list(dict.fromkeys(names))


def server_options(config: ServerConfig, *, reuse_port: bool = False) -> list[tuple[str, Any]]:
    """grpc channel arguments for the server; `config.grpc_options` replace ours of the same
    name (grpc keeps the first of two equal keys, so they are merged here, not appended)."""
    options = [
        ("grpc.max_receive_message_length", config.max_message_bytes),
        ("grpc.max_send_message_length", config.max_message_bytes),
        # grpc turns SO_REUSEPORT on by default, which lets a second server silently share a
        # busy port; only worker processes that mean to share one get it.
        ("grpc.so_reuseport", 1 if reuse_port else 0),
        # Ping idle clients every minute so dead peers are noticed; accept client keepalive
        # pings down to every 10 s (the default 5 min answers them with GOAWAY too_many_pings).
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
        ("grpc.server.max_pending_requests", config.max_pending_rpcs),
        ("grpc.server.max_pending_requests_hard_limit", 2 * config.max_pending_rpcs),
    ]
    return list({**dict(options), **dict(config.grpc_options)}.items())


def _credentials(config: ServerConfig) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials([server_pair(config.tls_cert_file, config.tls_key_file)])  # type: ignore[arg-type]


async def start_server(
    env: EnvTarget,
    config: ServerConfig | None = None,
    *,
    reuse_port: bool = False,
    reducers: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    servicer_options: Mapping[str, Any] | None = None,
    serve_metrics: bool = True,
) -> RunningServer:
    """Build, bind and start a server for `env`; returns once it accepts calls.

    `reuse_port` is for worker processes that share one port (see `serve(workers=...)`);
    `reducers` (old name `metrics`) replaces the environment's reward reducers (see `load_env`);
    `servicer_options` are EnvironmentHandler and ResourcesServicer knobs with no CLI flag
    (max_concurrent_verifies, verify_timeout_s, max_response_part_bytes, ...), for tests (gym_metrics.testing).
    With `config.prometheus_port` the server records metrics, and serves them unless
    `serve_metrics` is False (a worker of `serve --workers`: its parent serves the sum).
    """
    config = config or ServerConfig()
    env = load_env(env, reducers, metrics=metrics)
    await _astarted(env)
    recorder = ServerMetrics(env.server_name()) if config.prometheus_port is not None else None
    try:
        server = new_server(config, reuse_port=reuse_port, metrics=recorder)
        knobs = dict(servicer_options or {})
        handler_knobs = {"verify_timeout_s": config.verify_timeout_s, **{name: knobs.pop(name) for name in HANDLER_KNOBS if name in knobs}}
        handler = EnvironmentHandler(
            env, limits=config.limits, recorder=recorder, max_sessions=config.max_sessions,
            session_ttl_s=config.session_ttl_s, tool_timeout_s=config.tool_timeout_s, **handler_knobs,
        )  # fmt: skip
        servicer = ResourcesServicer(handler, max_message_bytes=config.max_message_bytes, **knobs)
        add_resources_service(servicer, server)
        health_servicer = await add_health_and_reflection(server, config, SERVICE_NAME)
        port = bind(server, config)
        await server.start()
    except BaseException:
        await _closed(env)
        raise
    running = RunningServer(server=server, port=port, config=config, health=health_servicer, env=env, handler=handler)
    try:
        await _open_doors(running, handler, config)
    except BaseException:
        await running.stop(0)
        raise
    if recorder is not None and serve_metrics and config.prometheus_port is not None:
        try:
            running.metrics_port, running._stop_metrics = serve_http(recorder.registry, config.host, config.prometheus_port)
        except OSError:
            await running.stop(0)
            raise
    return running


async def _astarted(env: SimpleResourcesServer) -> None:
    """The environment's `astart`, before the server can take a call (a ported environment's
    lifespan startup); its failure, named, stops the start."""
    try:
        await hook(env, "astart")()
    except GymMetricsError:
        raise
    except Exception as exc:
        raise InvalidInputError(f"cannot start the environment: {type(env).__name__}.astart() failed: {type(exc).__name__}: {exc}") from exc


async def _closed(env: SimpleResourcesServer) -> None:
    try:
        await hook(env, "aclose")()
    except Exception:  # the environment's own code: its server stops all the same
        log.exception("gym-metrics: %s.aclose() failed", type(env).__name__)


async def _open_doors(running: RunningServer, handler: EnvironmentHandler, config: ServerConfig) -> None:
    """The MCP and HTTP endpoints the config asks for, on this loop beside the gRPC server."""
    if config.mcp_port is not None:
        from gym_metrics._transport.server._mcp import serve_mcp

        door = await serve_mcp(handler, config.host, config.mcp_port, config.auth_token)
        running._doors.append(door)
        running.mcp_port = door.port
    if config.http_port is not None:
        from gym_metrics._transport.server._http import serve_http_rewards

        door = await serve_http_rewards(handler, config)
        running._doors.append(door)
        running.http_port = door.port
    if config.agent_http_port is not None:
        from gym_metrics._transport.server._http import serve_agent_http
        from gym_metrics.integrations.agent_run import AgentRun
        from gym_metrics.targets import ModelTarget

        target = ModelTarget(config.agent_target, think_tags=True, token_ids=config.agent_capture_tokens)
        agent = AgentRun(handler, target, config.agent_max_steps, config.agent_capture_tokens)
        door = await serve_agent_http(agent, config)
        running._doors.extend([door, _Closing(target)])
        running.agent_http_port = door.port


@dataclass
class _Closing:
    """Something a door uses, closed with the doors (`stop`): the /run door's policy client."""

    thing: Any

    async def stop(self) -> None:
        await self.thing.aclose()


def new_server(config: ServerConfig, *, reuse_port: bool = False, metrics: ServerMetrics | None = None) -> aio.Server:
    """A grpc.aio server with the access log, auth and limits of `config`, no service yet
    (shared by the resources server and the job server); RPC metrics into `metrics`."""
    interceptors: list[aio.ServerInterceptor] = []
    if metrics is not None:
        interceptors.append(MetricsInterceptor(metrics))  # outermost: refused calls count too
    tracing = server_interceptor()  # None unless opentelemetry is set up in this process
    if tracing is not None:
        interceptors.append(tracing)
    if config.log_requests:
        interceptors.append(AccessLogInterceptor())  # outermost: also logs refused calls
    if config.auth_token:
        interceptors.append(AuthInterceptor(config.auth_token))
    return aio.server(
        interceptors=interceptors,
        options=server_options(config, reuse_port=reuse_port),
        maximum_concurrent_rpcs=config.max_concurrent_rpcs,
    )


async def add_health_and_reflection(server: aio.Server, config: ServerConfig, service_name: str) -> HealthServicer:
    """Health (SERVING for "" and `service_name`) and, unless turned off, reflection."""
    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set(service_name, health_pb2.HealthCheckResponse.SERVING)
    if config.reflection:
        enable_reflection((service_name, health.SERVICE_NAME), server)
    return health_servicer


def bind(server: aio.Server, config: ServerConfig) -> int:
    """Bind `config`'s address (TLS when configured); the bound port, or a one-line OSError."""
    address = config.address()
    try:
        return server.add_secure_port(address, _credentials(config)) if config.tls else server.add_insecure_port(address)
    except RuntimeError as exc:
        why = "the port is in use, or the address is not on this host" if config.port else str(exc).split(";")[0]
        raise OSError(f"gym-metrics cannot listen on {address}: {why}") from None
