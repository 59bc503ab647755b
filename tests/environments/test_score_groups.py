"""ScoreGroups over a real gRPC server: one prompt's completions scored at once through the
environment's verify (math_exact), rewards in completion order, every failure flagged beside
its reward, a bad group never failing another; completions in sessions."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import grpc
import pytest

from gym_metrics import ResourcesClient
from gym_metrics.environments import MAX_COMPLETIONS_PER_CALL
from gym_metrics.errors import InvalidInputError
from gym_metrics.testing import serve_environment

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import Counter  # noqa: E402

pytestmark = pytest.mark.timeout(60)
ROW = {"responses_create_params": {"input": "What is 2+2?"}, "expected_answer": "4"}


async def test_a_group_is_scored_in_completion_order() -> None:
    async with serve_environment("math_exact") as server, ResourcesClient(server.address) as client:
        plain = await client.verify({**ROW, "response": {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "The answer is 4."}]}]}})
        [group, other] = await client.score_groups([
            (ROW, ["The answer is 4.", "It is 5.", "Answer: 4", {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"}]}]}]),
            ({**ROW, "expected_answer": "5"}, ["It is 5.", "I think 4"]),
        ])  # fmt: skip
    assert group.rewards == [1.0, 0.0, 1.0, 1.0] and group.failed == [False] * 4
    assert other.rewards == [1.0, 0.0]
    first = group.responses()[0]
    assert first is not None and first["reward"] == plain["reward"] == 1.0 and first["extracted_answer"] == plain["extracted_answer"]


async def test_failures_are_flagged_beside_the_rewards_never_a_silent_zero() -> None:
    async with serve_environment("math_exact") as server, ResourcesClient(server.address) as client:
        bad_row, no_answer, good = await client.score_groups(
            [("[1, 2]", ["4"]), ({"responses_create_params": {}}, ["4", "5"]), (ROW, ["4"])], omit_responses=True
        )
        with pytest.raises(InvalidInputError, match="split the call"):
            await client.score_groups([(ROW, ["4"] * (MAX_COMPLETIONS_PER_CALL + 1))])
    assert bad_row.failed == [True] and bad_row.error_kind == ["invalid_request"] and "row_json" in bad_row.error_message[0]
    assert no_answer.failed == [True, True] and "expected_answer" in no_answer.error_message[0]
    assert good.rewards == [1.0] and good.failed == [False] and good.response_json == [""]  # omitted


async def test_completions_verified_in_their_sessions() -> None:
    async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
        sessions = [await client.seed_session({"initial_count": n}) for n in (1, 2)]
        await client.call_tool(sessions[1], "increment_counter", {"count": 4})
        row = {"expected_count": 6, "responses_create_params": {"input": "count"}}
        [group] = await client.score_groups([(row, ["done", "done"])], sessions=[sessions])
        assert group.rewards == [0.0, 1.0] and len(server.handler.sessions.store) == 0  # each verify ended its session


class SlowCounter(Counter):
    """Verify takes 30 s when the expected count is -1, and raises when it is -2."""

    async def verify(self, body, session=None):  # type: ignore[no-untyped-def, override]
        if body.expected_count == -1:
            await asyncio.sleep(30)
        if body.expected_count == -2:
            raise RuntimeError("verify broke in its session")
        return await super().verify(body, session)


async def test_an_undecodable_completion_fails_alone_in_its_place() -> None:
    """A completion that is not JSON in the middle of a group (issue 36, item 7): it fails at its
    own position, and those after it keep theirs."""
    from gym_metrics.v1 import resources_pb2 as pb
    from gym_metrics.v1 import resources_pb2_grpc

    async with serve_environment("math_exact") as server, grpc.aio.insecure_channel(server.address) as channel:
        stub = resources_pb2_grpc.ResourcesServiceStub(channel)
        group = pb.CompletionGroup(row_json=json.dumps(ROW), completion_json=['"4"', "{not json", '"5"', '"Answer: 4"'])
        [scored] = (await stub.ScoreGroups(pb.ScoreGroupsRequest(groups=[group], omit_responses=True))).groups
    assert list(scored.rewards) == [1.0, 0.0, 0.0, 1.0] and list(scored.failed) == [False, True, False, False]
    assert "completion_json[1] is not JSON" in scored.error_message[1] and scored.error_message[2] == ""


async def test_a_verify_that_raises_in_its_session_is_flagged_not_a_zero() -> None:
    async with serve_environment(SlowCounter()) as server, ResourcesClient(server.address) as client:
        sessions = [await client.seed_session({"initial_count": 2}) for _ in range(2)]
        [group] = await client.score_groups(
            [({"expected_count": -2, "responses_create_params": {"input": "count"}}, ["done", "done"])], sessions=[sessions]
        )
        assert group.failed == [True, True] and group.error_kind == ["verify_failed"] * 2
        assert all("verify broke in its session" in m for m in group.error_message)
        assert len(server.handler.sessions.store) == 0  # the failed verifies ended their sessions too


async def test_a_completion_in_a_session_keeps_the_verify_time_budget() -> None:
    """ScoreGroups in sessions once ignored the verify time budget: the slow completion is a
    timeout beside the others' rewards, in about the budget, not 30 s later."""
    async with serve_environment(SlowCounter(), servicer_options={"verify_timeout_s": 0.5}) as server, ResourcesClient(server.address) as client:
        sessions = [await client.seed_session({"initial_count": 2}) for _ in range(2)]
        started = time.monotonic()
        [slow, fine] = await client.score_groups(
            [({"expected_count": -1, "responses_create_params": {"input": "count"}}, ["done"]),
             ({"expected_count": 2, "responses_create_params": {"input": "count"}}, ["done"])],
            sessions=[sessions[:1], sessions[1:]],
        )  # fmt: skip
        assert time.monotonic() - started < 10
        assert slow.failed == [True] and slow.error_kind == ["timeout"] and "exceeded 0.5 s" in slow.error_message[0]
        assert fine.rewards == [1.0] and fine.failed == [False]
        assert len(server.handler.sessions.store) == 0  # the timed-out verify's session was closed too
