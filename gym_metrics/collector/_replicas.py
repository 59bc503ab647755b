"""Several servers behind one collection (`collect --server A --server B`): which of them are
reachable, that they serve one environment, and a call run on whichever still answers.

Verification is spread by `verify_all` (one lane per connection, orphans resent on any lane);
this module covers what happens around it: the first connection, GetServerInfo and the extra
connections (`connect`), and phase 2's AggregateMetrics, which runs on one replica (the first
that answers), so the metrics file is the one a single server writes. A replica lost at any of
these steps is left out; the run fails only when none is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from gym_metrics._transport.client import ResourcesClient, ServerInfo, ServerUnavailableError, ServerUnreachableError
from gym_metrics.collector._options import RetryPolicy
from gym_metrics.collector._verify import LaneReport
from gym_metrics.errors import FieldViolation, InvalidInputError

T = TypeVar("T")
Log = Callable[[str], None]
_GONE = (ServerUnavailableError, ServerUnreachableError)
"""A replica lost (before or after it answered): left out, not the end of the run."""


@dataclass(frozen=True)
class Connections:
    """The servers a collection runs on, once connected."""

    info: ServerInfo
    clients: list[ResourcesClient]
    """Those that answered, in the order given."""
    lanes: list[ResourcesClient]
    """Their connections (see ResourcesClient.open_connections), clients' own included."""

    async def close_extra(self) -> None:
        """Close the connections opened here (the clients are the caller's)."""
        for extra in {id(lane): lane for lane in self.lanes if all(lane is not c for c in self.clients)}.values():
            await extra.close()


async def connect(
    given: Sequence[ResourcesClient], connections: int | None, retry: RetryPolicy, timeout: float, log: Log
) -> Connections:
    """Reach the servers, check they serve one environment, open their connections. One server
    is retried as ever; of several, one that is lost on the way (even right after it
    connected) is left out, waited for `timeout` first, and only with none left does it fail."""
    clients = await reachable(given, timeout, log)
    if len(clients) == 1:
        info = await on_any(clients, lambda c: c.server_info(), retry, log)
        return Connections(info, clients, await on_any(clients, lambda c: _connections(c, connections), retry, log))
    infos = await _each(clients, lambda c: c.server_info(), retry, timeout, log)
    clients = _survivors(given, clients, infos, timeout, log)
    info = same_environment(clients, [i for i in infos if not isinstance(i, BaseException)])
    opened = await _each(clients, lambda c: _connections(c, connections), retry, timeout, log)
    up = _survivors(given, clients, opened, timeout, log)
    return Connections(info, up, [lane for lanes in opened if not isinstance(lanes, BaseException) for lane in lanes])


async def reachable(clients: Sequence[ResourcesClient], timeout: float, log: Log) -> list[ResourcesClient]:
    """The clients whose server answers within `timeout` (waited for together; one that refuses
    the connection is not waited for). One server unreachable fails as before; of several, those unreachable are left out (logged), and the
    run fails only when none is reachable."""
    if len(clients) == 1:
        await clients[0].wait_until_reachable(timeout, refused_fails_fast=True)
        return list(clients)
    waits = (c.wait_until_reachable(timeout, refused_fails_fast=True) for c in clients)
    outcomes = await asyncio.gather(*waits, return_exceptions=True)
    for o in outcomes:
        if isinstance(o, BaseException) and not isinstance(o, ServerUnreachableError):
            raise o
    return _survivors(clients, clients, outcomes, timeout, log)


async def _each(
    clients: Sequence[ResourcesClient], call: Callable[[ResourcesClient], Awaitable[T]], retry: RetryPolicy,
    timeout: float, log: Log,
) -> list[T | BaseException]:
    """`call` on every client at once, each through `_while_reachable`; a replica lost has
    its error in its place. Any other error fails the run, once the connections the others
    opened are closed."""
    calls = (_while_reachable(c, call, retry, timeout, log) for c in clients)
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    failed = next((o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, _GONE)), None)
    if failed is not None:
        for c, o in zip(clients, outcomes):
            for extra in o if isinstance(o, list) else ():
                if extra is not c:
                    await extra.close()
        raise failed
    return outcomes


async def _while_reachable(
    client: ResourcesClient, call: Callable[[ResourcesClient], Awaitable[T]], retry: RetryPolicy,
    timeout: float, log: Log,
) -> T:
    """`call`, again after each transient failure while the server can be reached within
    `timeout` (ServerUnreachableError past it: it is gone), up to the retry policy's limit."""
    attempt = 0
    while True:
        try:
            return await call(client)
        except ServerUnavailableError as exc:
            attempt += 1
            await client.wait_until_reachable(timeout)
            await retry.back_off(attempt, exc, log, f"server {client.target}")


def _survivors(
    given: Sequence[ResourcesClient], clients: Sequence[ResourcesClient], outcomes: Sequence[object], timeout: float,
    log: Log,
) -> list[ResourcesClient]:
    """The clients whose outcome is not an error, the others logged as left out; none: one
    ServerUnreachableError naming all `given` and the first error."""
    up = [c for c, o in zip(clients, outcomes) if not isinstance(o, BaseException)]
    if up:
        for c, o in zip(clients, outcomes):
            if isinstance(o, BaseException):
                log(f"collect: leaving out {c.target}: {o}")
        return up
    first = str(outcomes[0])
    _, waited, reason = first.rpartition(f"within {timeout:g} s: ")
    if not waited:  # refused at once, not waited for
        reason = first.partition(f"{clients[0].target}: ")[2] or first
    raise ServerUnreachableError(
        f"cannot reach any of the {len(given)} servers ({', '.join(c.target for c in given)})"
        f"{' within %g s' % timeout if waited else ''}; the first: {reason}"
    )


def same_environment(clients: Sequence[ResourcesClient], infos: Sequence[ServerInfo]) -> ServerInfo:
    """The servers' one ServerInfo; replicas of different environments (or versions) are
    refused: their rewards would be mixed in one file."""
    first = infos[0]
    for c, info in zip(clients[1:], infos[1:]):
        differ = [name for name in _COMPARED if getattr(info, name) != getattr(first, name)]
        if differ:
            raise InvalidInputError(
                "the servers serve different environments (every --server must be a replica of one)",
                [FieldViolation(f"--server {c.target}", f"serves {info.name} {info.version}, but "
                                f"{clients[0].target} serves {first.name} {first.version}; they differ in {', '.join(differ)}")],
            )  # fmt: skip
    return first


_COMPARED = ("name", "version", "metrics", "verify_request_schema", "verify_response_schema", "wants_rows", "tools", "any_tool_name", "steps", "agent_max_steps", "agent_types", "environment_servers", "agent_model_servers")
"""What replicas must agree on: everything GetServerInfo says (two environments both called
`Env` by their `app.py`, but scoring differently, were mixed in one file)."""


async def _connections(client: ResourcesClient, n: int | None) -> list[ResourcesClient]:
    """`client` and more connections to its server (see ResourcesClient.open_connections);
    just `client` when it cannot open more (a test double)."""
    more = getattr(client, "open_connections", None)
    if more is None:
        return [client]
    opened: list[ResourcesClient] = await more(n)
    return opened


async def on_any(
    clients: list[ResourcesClient], call: Callable[[ResourcesClient], Awaitable[T]], retry: RetryPolicy, log: Log
) -> T:
    """`call` on the first client, on the next one at once after a transient failure, and
    round again after a backoff once each has failed (up to the retry policy's limit): a
    replica that died costs one failed call, not a retry. Those that failed before one
    answered move to the end of `clients`, so the next call starts on one that answers."""
    attempt = 0
    while True:
        for i, client in enumerate(clients):
            try:
                result = await call(client)
            except ServerUnavailableError as exc:
                failure = exc
                if len(clients) > 1:
                    log(f"collect: server {client.target} unavailable ({exc})")
                continue
            clients[:] = clients[i:] + clients[:i]
            return result
        attempt += 1
        who = "server" if len(clients) == 1 else f"every one of the {len(clients)} servers"
        await retry.back_off(attempt, failure, log, who)


def by_server(lanes: Sequence[ResourcesClient], report: LaneReport) -> dict[str, int]:
    """Batches answered per server address (lanes of one server summed), in the order given."""
    counts: dict[str, int] = {}
    for lane, n in zip(lanes, report.answered):
        counts[lane.target] = counts.get(lane.target, 0) + n
    return counts


def still_up(clients: Sequence[ResourcesClient], lanes: Sequence[ResourcesClient], report: LaneReport) -> list[ResourcesClient]:
    """The clients in the order given, those all of whose lanes gave up last (tried only
    when the others fail)."""
    gone = {lanes[i].target for i in report.retired} - {lanes[i].target for i in range(len(lanes)) if i not in report.retired}
    return [c for c in clients if c.target not in gone] + [c for c in clients if c.target in gone]
