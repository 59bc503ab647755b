"""A SeedSession whose deadline runs out around the time its session is seeded leaves no session
behind: one seeded with less than SEED_ANSWER_MARGIN_S of the deadline left is closed and the
call fails DEADLINE_EXCEEDED. Before, such an answer reached a client that had given up: nobody
knew the session's id, and it held a place of `--max-sessions` until its TTL (about one call in
twenty of deadlines near the call's own latency)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc as pbg

from _transport_helpers import serve_process

CALLS, ROOM = 500, 500

pytestmark = pytest.mark.alone  # (timing: an answer delayed past the margin by a loaded machine would still come too late)


async def test_seeds_answered_too_late_leave_no_session() -> None:
    with serve_process("math_exact", "--max-sessions", str(ROOM)) as address:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = pbg.ResourcesServiceStub(channel)
            await stub.GetServerInfo(pb.GetServerInfoRequest())
            for deadline in [0.001, 0.002, 0.003, 0.005, 0.008] * (CALLS // 125):  # near the call's own latency
                answers = await asyncio.gather(*(stub.SeedSession(pb.SeedSessionRequest(body_json="{}"), timeout=deadline) for _ in range(25)), return_exceptions=True)
                for answer in answers:
                    if isinstance(answer, grpc.aio.AioRpcError):
                        assert answer.code() is grpc.StatusCode.DEADLINE_EXCEEDED, answer
                    else:  # a session its client knows: closed at once
                        await stub.CloseSession(pb.CloseSessionRequest(session_id=answer.session_id))
            room = []
            while len(room) < ROOM:  # every place free: no session was left behind
                try:
                    room.append((await stub.SeedSession(pb.SeedSessionRequest(body_json="{}"), timeout=10)).session_id)
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED, f"{ROOM - len(room)} sessions left behind"
                    raise
