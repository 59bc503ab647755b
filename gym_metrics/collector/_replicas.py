"""Several servers behind one collection (`collect --server A --server B`): which of them are
reachable, that they serve one environment, and a call run on whichever still answers.

Verification is spread by `verify_all` (one lane per connection, orphans resent on any lane);
this module covers what happens around it: the first connection, GetServerInfo, and phase 2's
AggregateMetrics, which runs on one replica (the first that answers), so the metrics file is
the one a single server writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from gym_metrics._transport import ResourcesClient, ServerInfo, ServerUnavailableError, ServerUnreachableError
from gym_metrics.collector._verify import LaneReport, RetryPolicy
from gym_metrics.errors import FieldViolation, InvalidInputError

T = TypeVar("T")


async def reachable(clients: Sequence[ResourcesClient], timeout: float, log: Callable[[str], None]) -> list[ResourcesClient]:
    """The clients whose server answers within `timeout` (waited for together). One server
    unreachable fails as before; of several, those unreachable are left out (logged), and the
    run fails only when none is reachable."""
    if len(clients) == 1:
        await clients[0].wait_until_reachable(timeout)
        return list(clients)
    outcomes = await asyncio.gather(*(c.wait_until_reachable(timeout) for c in clients), return_exceptions=True)
    for o in outcomes:
        if isinstance(o, BaseException) and not isinstance(o, ServerUnreachableError):
            raise o
    up = [c for c, o in zip(clients, outcomes) if o is None]
    if not up:
        reason = str(outcomes[0]).rpartition(f"within {timeout:g} s: ")[2]
        raise ServerUnreachableError(
            f"cannot reach any of the {len(clients)} servers ({', '.join(c.target for c in clients)}) "
            f"within {timeout:g} s; the first: {reason}"
        )
    for c, o in zip(clients, outcomes):
        if o is not None:
            log(f"collect: leaving out {c.target}: {o}")
    return up


async def same_environment(
    clients: Sequence[ResourcesClient], retry: RetryPolicy, log: Callable[[str], None]
) -> ServerInfo:
    """The servers' one ServerInfo; replicas of different environments (or versions) are
    refused: their rewards would be mixed in one file."""
    infos = [await on_any([c], lambda c: c.server_info(), retry, log) for c in clients]
    first = infos[0]
    for c, info in zip(clients[1:], infos[1:]):
        if (info.name, info.version, info.wants_rows) != (first.name, first.version, first.wants_rows):
            raise InvalidInputError(
                "the servers serve different environments (every --server must be a replica of one)",
                [FieldViolation(f"--server {c.target}", f"serves {info.name} {info.version}, but "
                                f"{clients[0].target} serves {first.name} {first.version}")],
            )  # fmt: skip
    return first


async def on_any(
    clients: Sequence[ResourcesClient],
    call: Callable[[ResourcesClient], Awaitable[T]],
    retry: RetryPolicy,
    log: Callable[[str], None],
) -> T:
    """`call` on the first client, moving on to the next one after each transient failure
    (backing off as one server would be), up to the retry policy's limit."""
    attempt = 0
    while True:
        client = clients[attempt % len(clients)]
        try:
            return await call(client)
        except ServerUnavailableError as exc:
            attempt += 1
            await retry.back_off(attempt, exc, log, "server" if len(clients) == 1 else f"server {client.target}")


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
