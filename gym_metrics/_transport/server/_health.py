"""The standard health service, with Watch streams that end once shutdown begins.

grpc's aio HealthServicer keeps every Watch stream open forever, and server.stop(grace) waits
for open streams, so one client-side health watcher (gRPC round_robin with health checking
uses Watch) would hold every shutdown for the whole grace period. Here Watch tells its client
NOT_SERVING and then ends the stream when shutdown begins. Check and the status table are
grpc_health's; Watch follows the statuses through the public `set` API only.
"""

from __future__ import annotations

import asyncio
from typing import Any

from grpc_health.v1 import health, health_pb2

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class HealthServicer(health.aio.HealthServicer):
    """grpc_health's aio servicer; Watch ends after reporting NOT_SERVING at shutdown."""

    def __init__(self) -> None:
        super().__init__()
        self._statuses: dict[str, int] = {"": SERVING}
        self._changed = asyncio.Condition()
        self._shutting_down = False

    async def set(self, service: str, status: int) -> None:
        await super().set(service, status)
        async with self._changed:
            if not self._shutting_down:
                self._statuses[service] = status
                self._changed.notify_all()

    async def enter_graceful_shutdown(self) -> None:
        await super().enter_graceful_shutdown()
        async with self._changed:
            self._shutting_down = True
            self._changed.notify_all()

    def _status(self, service: str) -> int:
        if self._shutting_down:
            return NOT_SERVING
        return self._statuses.get(service, SERVICE_UNKNOWN)

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: Any) -> None:  # noqa: N802
        last: int | None = None
        while True:
            async with self._changed:  # wait without holding the lock across a (slow) write
                await self._changed.wait_for(lambda: self._shutting_down or self._status(request.service) != last)
                status, stopping = self._status(request.service), self._shutting_down
            if status != last:
                await context.write(health_pb2.HealthCheckResponse(status=status))
                last = status
            if stopping:
                return
