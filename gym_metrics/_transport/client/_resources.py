"""Async client of ResourcesService: dicts and columns in, dicts and AgentAggregate out."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import orjson

from gym_metrics._util.masking import remember
from gym_metrics._util.tls import trusted_roots
from gym_metrics._transport.client._balance import ROUND_ROBIN, address_count, is_balanced
from gym_metrics._transport.client._groups import GroupCalls
from gym_metrics._transport.client._session_stream import SessionStream
from gym_metrics._transport.client._sessions import MAX_MESSAGE_BYTES, SessionCalls, json_text, session_error
from gym_metrics._transport._batches import columns_to_batches
from gym_metrics._transport._convert import responses_to_aggregate
from gym_metrics._transport._verified import VerifiedBatch, VerifyOutcome
from gym_metrics._transport._tracing import client_interceptors
from gym_metrics._transport.client._verify_calls import VerifyCalls
from gym_metrics._transport.client._status import (
    RemoteCallError,
    ServerUnavailableError,
    ServerUnreachableError,
    is_transient,
    translate,
)
from gym_metrics.aggregate import AgentAggregate, non_numeric_counts
from gym_metrics.rollouts import RolloutColumns
from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc

CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),  # both directions: gRPC's 4 MiB receive default is too small for metrics
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
)
KEEPALIVE_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.http2.ping_timeout_ms", 20_000),  # (grpc 1.6x waits for any ping's ack this long, 60 s by default, whatever the keepalive's)
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
)
"""While calls are open, a ping every 30 s that must be answered within 20 s: a server that
stopped answering (frozen, its host or network gone without a reset) ends the calls as
unavailable instead of leaving them waiting forever. Resources servers accept pings down to every
10 s (server_options)."""


@dataclass(frozen=True)
class ServerInfo:
    """What GetServerInfo says about the environment."""

    name: str
    version: str
    metrics: list[str]
    verify_request_schema: dict[str, Any]
    verify_response_schema: dict[str, Any]
    wants_rows: bool
    tools: list[dict[str, Any]]
    """The environment's tools as Responses API function tools (empty: it only verifies)."""
    any_tool_name: bool = False
    """The environment answers calls of names not in `tools` too (a ported NeMo Gym app)."""
    steps: bool = False
    """The environment answers each model turn (reset / step) instead of tools and verify."""
    agent_max_steps: dict[str, int] = field(default_factory=dict)
    """Policy calls an episode of each named agent may make (a NeMo Gym config's `max_steps`)."""

    agent_types: dict[str, str] = field(default_factory=dict)
    """The NeMo Gym agent each named agent is (simple_agent, tool_simulation_agent, ...)."""
    environment_servers: dict[str, tuple[str, str]] = field(default_factory=dict)
    """The NeMo Gym environment server (name, type) in front of each named agent."""
    agent_model_servers: dict[str, str] = field(default_factory=dict)
    """The model server each named agent calls in its NeMo Gym config (`model_server.name`)."""

    def max_steps_of(self, agent: str) -> int | None:
        """The bound of `agent`'s episodes: its own, else the one all listed agents share."""
        return for_agent(self.agent_max_steps, agent)

    def type_of(self, agent: str) -> str | None:
        """The NeMo Gym agent `agent` is: its own, else the one all listed agents are."""
        return for_agent(self.agent_types, agent)


def for_agent(by_agent: Mapping[str, Any], agent: str) -> Any:
    """`by_agent[agent]`, else the one value all its agents share (None when they differ)."""
    if agent in by_agent:
        return by_agent[agent]
    shared = set(by_agent.values())
    return shared.pop() if len(shared) == 1 else None


_WORKER_KEY = "gym-metrics-worker"
"""GetServerInfo's trailing metadata: "INDEX/COUNT" of the worker process that answered."""


class ResourcesClient(SessionCalls, GroupCalls, VerifyCalls):
    """Talks to one resources server. Use as `async with ResourcesClient("host:port") as c:`.

    Args:
        target: "host:port", or "dns:///name:port" (also "ipv4:a:p,b:p"): every address the
            name resolves to, calls placed round_robin (a Kubernetes headless Service); or an
            open grpc.aio.Channel (then the caller closes it).
        token: bearer token sent as `authorization` metadata on every call.
        tls_ca: connect with TLS, trusting this PEM root certificate (a path or its bytes);
            `True` trusts the system's roots.
        credentials: grpc channel credentials, for what tls_ca does not cover (mTLS).
    """

    def __init__(
        self,
        target: str | grpc.aio.Channel,
        *,
        token: str | None = None,
        tls_ca: str | Path | bytes | bool | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        _options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self._token, self._credentials = token, None
        self._session_stream: SessionStream | None = None
        if tls_ca is not None and tls_ca is not False and credentials is None:
            credentials = grpc.ssl_channel_credentials(None if tls_ca is True else trusted_roots(tls_ca))
        self._credentials = credentials
        if isinstance(target, str):
            options = list({**dict(CHANNEL_OPTIONS), **dict(KEEPALIVE_OPTIONS), **dict(ROUND_ROBIN if is_balanced(target) else ()), **dict(_options)}.items())
            if credentials is not None:
                self._channel = grpc.aio.secure_channel(target, credentials, options=options, interceptors=client_interceptors())
            else:
                self._channel = grpc.aio.insecure_channel(target, options=options, interceptors=client_interceptors())
            self._owns_channel = True
        else:
            self._channel = target
            self._owns_channel = False
        self.target = target if isinstance(target, str) else "the server"
        self._target_arg = target
        self._stub = resources_pb2_grpc.ResourcesServiceStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        if token:
            remember(token)

    async def __aenter__(self) -> ResourcesClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session_stream is not None:
            await self._session_stream.aclose()
        if self._owns_channel:
            await self._channel.close()

    async def worker(self) -> tuple[int, int]:
        """(index, count) of the server worker process this client's connection reached
        (`serve --workers`), from GetServerInfo; (1, 1) for a server of one process."""
        call = self._stub.GetServerInfo(pb.GetServerInfoRequest(), metadata=self._metadata, timeout=10)
        try:
            await call
            trailing = await call.trailing_metadata()
        except grpc.aio.AioRpcError as exc:
            raise translate(exc) from None
        for key, value in trailing or ():
            if key == _WORKER_KEY and isinstance(value, str):
                index, _, count = value.partition("/")
                if index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count):
                    return int(index), int(count)
        return 1, 1

    async def open_connections(self, n: int | None = None) -> list[ResourcesClient]:
        """This client and more of the same server, each on its own TCP connection, so that
        calls spread over a server's worker processes: SO_REUSEPORT balances connections,
        not calls, and channels to one target share a connection unless their arguments
        differ. `n` connections (None: one per worker the server reports); the first ones
        reach distinct workers (a connection that lands on a worker already reached is
        replaced, a few tries at most). Close the new ones. With a caller's channel, only
        this client. A `dns:` target gets this client once per address it resolves to (or
        `n` times): each stream is a call, and round_robin places each on the next address."""
        if not isinstance(self._target_arg, str) or n == 1:
            return [self]
        if is_balanced(self._target_arg):
            streams = n if n is not None else await asyncio.to_thread(address_count, self._target_arg)
            return [self] * streams
        index, workers = await self.worker()
        want = workers if n is None else n
        clients, reached, channel_id, tries = [self], {index}, 0, 0
        try:
            while len(clients) < want:
                channel_id += 1
                extra = ResourcesClient(
                    self._target_arg, token=self._token, credentials=self._credentials,
                    _options=(("grpc.use_local_subchannel_pool", 1), ("grpc.channel_id", channel_id)),
                )  # fmt: skip
                landed, _ = await extra.worker()
                if landed in reached and len(reached) < workers and tries < 8 * want:
                    tries += 1
                    await extra.close()
                    continue
                reached.add(landed)
                clients.append(extra)
        except BaseException:
            for extra in clients[1:]:
                await extra.close()
            raise
        return clients

    async def wait_until_reachable(self, timeout: float, *, refused_fails_fast: bool = False) -> None:
        """Wait up to `timeout` seconds for the first connection, else raise
        ServerUnreachableError with grpc's reason: a wrong address fails in seconds instead
        of going through every retry meant for a server that went away. With
        `refused_fails_fast` (a first connection) an address that refuses (nothing listens,
        the name does not resolve) fails once it has refused for REFUSED_PATIENCE_S (a server
        started just before, as `serve ... &` then `collect` does, is still importing); only
        a peer that does not answer is waited for the whole `timeout`."""
        try:
            if refused_fails_fast:
                await asyncio.wait_for(self._ready_unless_refused(min(timeout, REFUSED_PATIENCE_S)), timeout)
            else:
                await asyncio.wait_for(self._channel.channel_ready(), timeout)
            return
        except asyncio.TimeoutError:  # still refusing when the time ran out: it refused
            refusing = self._channel.get_state() is grpc.ChannelConnectivity.TRANSIENT_FAILURE
            within = "" if refused_fails_fast and refusing else f" within {timeout:g} s"
        except _Refused:
            within = ""
        try:  # not waiting for ready: fails at once with the channel's last connection error
            await self._stub.GetServerInfo(pb.GetServerInfoRequest(), metadata=self._metadata, timeout=2)
            return  # it came up just now
        except grpc.aio.AioRpcError as exc:
            if not is_transient(exc):
                return  # it answered (e.g. UNAUTHENTICATED): reachable; the next call reports it
            reason = f"{exc.code().name}: {exc.details()}"
        raise ServerUnreachableError(f"cannot reach the server at {self.target}{within}: {reason}")

    async def _ready_unless_refused(self, patience: float) -> None:
        """Until the channel is READY; _Refused once attempts have failed for `patience` s."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + patience
        state = self._channel.get_state(try_to_connect=True)
        while state is not grpc.ChannelConnectivity.READY:
            failing = state is grpc.ChannelConnectivity.TRANSIENT_FAILURE
            if failing and loop.time() >= give_up:
                raise _Refused
            change = self._channel.wait_for_state_change(state)
            try:  # grpc's reconnect backoff (about 1 s) paces the attempts
                await asyncio.wait_for(change, max(0.01, give_up - loop.time()) if failing else None)
            except asyncio.TimeoutError:
                pass
            state = self._channel.get_state(try_to_connect=True)

    async def verify(self, body: Mapping[str, Any] | str, session_id: str = "") -> dict[str, Any]:
        """Verify one rollout (in its session, which this closes, when `session_id` is given);
        returns the full verify response."""
        return orjson.loads((await self.verify_text(body, session_id))[1])

    def session_stream(self) -> SessionStream:
        """This connection's SessionCalls stream (opened on first use): the session calls of
        many episodes at once, several times cheaper than a unary call each."""
        if self._session_stream is None:
            self._session_stream = SessionStream(self._stub, self._metadata)
        return self._session_stream

    async def verify_text(self, body: Mapping[str, Any] | str, session_id: str = "") -> tuple[float, str]:
        """`verify`, answering (reward, the verify response as JSON text): for callers that
        write the response as it came (no parse and dump again)."""
        request = pb.VerifyRequest(body_json=json_text(body), session_id=session_id)
        try:
            response = await self._stub.Verify(request, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise session_error(exc) from None
        return float(response.reward), str(response.response_json)

    async def aggregate(
        self,
        agent_name: str,
        cols: RolloutColumns,
        *,
        batch_size: int = 10_000,
        include_rollout_infos: bool = True,
        expected_rollouts_per_task: int = 0,
        expected_task_indices: Sequence[int] = (),
        order_seed: int | None = None,
        include_rows: bool | None = None,
        row_positions: Any = None,
        count_errors_as_zero: bool = False,
        include_samples: bool = True,
    ) -> AgentAggregate:
        """Stream one agent's verify responses through AggregateMetrics.

        `order_seed` shuffles the batch order (the result must not change: a test hook).
        `include_rows` defaults to True: samples (and compute_metrics) need the full rows;
        `row_positions` limits the rows sent to those positions (e.g. each task's sample).
        """
        header = pb.AggregateMetricsHeader(
            agent_ref=pb.AgentRef(name=agent_name),
            options=pb.AggregateOptions(
                omit_rollout_infos=not include_rollout_infos,
                count_errors_as_zero=count_errors_as_zero,
                omit_samples=not include_samples,
            ),
            expected_rollouts_per_task=expected_rollouts_per_task,
            expected_task_indices=list(expected_task_indices),
        )
        batches: Iterable[pb.RolloutBatch] = columns_to_batches(
            cols, batch_size, include_rows=True if include_rows is None else include_rows, row_positions=row_positions
        )
        if order_seed is not None:
            batches = list(batches)
            random.Random(order_seed).shuffle(batches)

        def requests() -> Iterator[pb.AggregateMetricsRequest]:
            yield pb.AggregateMetricsRequest(header=header)
            for batch in batches:
                yield pb.AggregateMetricsRequest(batch=batch)

        try:
            parts = [part async for part in self._stub.AggregateMetrics(requests(), metadata=self._metadata)]
        except grpc.aio.AioRpcError as exc:
            raise translate(exc) from None
        if not parts or not parts[-1].last:
            raise ServerUnavailableError("AggregateMetrics answer ended before its last part")
        result = responses_to_aggregate(parts)
        # packed columns carry no text: values left out as non-numeric are counted from the rows here
        result.non_numeric_counts = non_numeric_counts([cols], count_errors_as_zero) or result.non_numeric_counts
        return result

    async def server_info(self) -> ServerInfo:
        try:
            info = await self._stub.GetServerInfo(pb.GetServerInfoRequest(), metadata=self._metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            raise translate(exc) from None
        return ServerInfo(
            name=info.name,
            version=info.version,
            metrics=list(info.metrics),
            verify_request_schema=orjson.loads(info.verify_request_schema_json or "{}"),
            verify_response_schema=orjson.loads(info.verify_response_schema_json or "{}"),
            wants_rows=info.wants_rows,
            tools=[
                {"type": "function", "name": t.name, "description": t.description, "parameters": orjson.loads(t.parameters_json or "{}")}
                for t in info.tools
            ],
            any_tool_name=info.any_tool_name,
            steps=info.steps,
            agent_max_steps=dict(info.agent_max_steps),
            agent_types=dict(info.agent_types),
            environment_servers={agent: (server.name, server.type) for agent, server in info.environment_servers.items()},
            agent_model_servers=dict(info.agent_model_servers),
        )


REFUSED_PATIENCE_S = 10.0  # how long (at most: the connect timeout bounds it) a refused first connection is retried


class _Refused(Exception):
    """A first connection attempt failed at once (refused, unresolvable): not worth waiting for."""


__all__ = [
    "CHANNEL_OPTIONS",
    "KEEPALIVE_OPTIONS",
    "MAX_MESSAGE_BYTES",
    "ResourcesClient",
    "ServerInfo",
    "RemoteCallError",
    "ServerUnavailableError",
    "ServerUnreachableError",
    "VerifiedBatch",
    "VerifyOutcome",
    "is_transient",
]
