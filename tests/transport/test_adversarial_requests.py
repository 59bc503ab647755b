"""Request shapes that once stalled or exhausted a server (issue 36, item 2), sent to a real
`gym-metrics serve` process: each is refused with the limit it is past, named, before the work
is built, so the work a request may ask of the event loop stays short. A health prober on a fixed
cadence runs through the whole file: p99 under 100 ms (the last test)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import orjson
import pytest

from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc

sys.path.insert(0, str(Path(__file__).parents[1]))
from _health_probe import HealthProber  # noqa: E402

ROOT = Path(__file__).parents[2]
BODY = {"responses_create_params": {"input": "count"}, "response": {"output": []}, "expected_count": 0}
MB = 1 << 20

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow, pytest.mark.alone]  # alone: it measures latency


class Server:
    def __init__(self, address: str, http_port: int) -> None:
        self.address, self.http_url = address, f"http://127.0.0.1:{http_port}"
        self.channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 128 * MB)])
        self.stub = resources_pb2_grpc.ResourcesServiceStub(self.channel)
        self.health = HealthProber(address)

    def refused(self, call: grpc.UnaryUnaryMultiCallable, request: object, *, seconds: float = 10) -> grpc.RpcError:
        """The error the server answers `request` with (it must not be answered)."""
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            call(request, timeout=30)
        assert time.monotonic() - started < seconds, "refused, but only after building the work"
        return caught.value


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    err = tmp_path_factory.mktemp("serve") / "serve.err"
    with open(err, "wb") as stderr:  # a file, not a pipe: what the server logs can never block it
        proc = subprocess.Popen(
            [sys.executable, "-m", "gym_metrics.cli", "serve", "tests/_tool_envs.py:PaddedCounter", "--port", "0", "--http-port", "0"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"listening on (\S+:\d+).*rewards over HTTP on port (\d+)", err.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        running = Server(found[1], int(found[2]))
        yield running
        running.health.stop()
        running.channel.close()
    finally:
        proc.terminate()
        proc.wait(30)


def test_score_groups_counts_groups_not_completions(server: Server) -> None:
    """1M empty groups (2 MB) once stalled the server 12 s: groups are counted before any is built.
    (300,000 here: decoding a message of 1M groups alone takes grpc about 100 ms on a slow core.)"""
    request = pb.ScoreGroupsRequest(groups=[pb.CompletionGroup(row_json="{}")] * 300_000)
    for _ in range(3):
        error = server.refused(server.stub.ScoreGroups, request)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "300,000 groups" in error.details() and "MAX_GROUPS_PER_CALL" in error.details()


def test_one_session_calls_message_carries_a_bounded_number_of_calls(server: Server) -> None:
    """A message of 1M calls once held the loop 17 s (eager calls never yield): past 4,096 the
    stream ends naming the limit; 4,096 calls that never suspend are all answered."""
    closes = [pb.SessionCall(id=i, close=pb.CloseSessionRequest(session_id=f"gone-{i}")) for i in range(4096)]
    answers = [a for message in server.stub.SessionCalls(iter([pb.SessionCallsRequest(calls=closes)]), timeout=60) for a in message.answers]
    assert sorted(a.id for a in answers) == list(range(4096)) and not any(a.close.closed for a in answers)
    for extra in (1, 100_000):
        too_many = [*closes, *(pb.SessionCall(id=4096 + i, close=pb.CloseSessionRequest(session_id="x")) for i in range(extra))]
        with pytest.raises(grpc.RpcError) as caught:
            list(server.stub.SessionCalls(iter([pb.SessionCallsRequest(calls=too_many)]), timeout=60))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"{4096 + extra:,} calls" in caught.value.details() and "MAX_CALLS_PER_MESSAGE" in caught.value.details()


def padded(items: int) -> bytes:
    """A verify body whose `pad` holds `items` empty objects (2 bytes each, 64+ once parsed)."""
    return orjson.dumps(BODY)[:-1] + b',"pad":[' + b"{}," * (items - 1) + b"{}]}"


def test_tool_arguments_past_the_item_bound_are_refused(server: Server) -> None:
    """60 MB of `{}` in CallTool arguments once took 3.1 GB and 12 s of the loop."""
    session = server.stub.SeedSession(pb.SeedSessionRequest(body_json='{"initial_count": 2}')).session_id
    arguments = b'{"count": 1, "pad": [' + b"{}," * 300_000 + b"{}]}"
    for _ in range(3):
        error = server.refused(server.stub.CallTool, pb.CallToolRequest(session_id=session, name="add_padded", arguments_json=arguments))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "arguments_json" in error.details() and "300,003 objects and lists" in error.details() and "MAX_JSON_CONTAINERS" in error.details()
    answer = server.stub.CallTool(pb.CallToolRequest(session_id=session, name="increment_counter", arguments_json='{"count": 1}'))
    assert not answer.failed  # the session is as it was
    assert orjson.loads(server.stub.CallTool(pb.CallToolRequest(session_id=session, name="get_counter_value")).output) == {"count": 3}


def test_a_session_keeps_a_bounded_row(server: Server) -> None:
    """A session once kept 1.45 GB until it closed: its row's text and items are bounded."""
    big = orjson.dumps({"initial_count": 0, "note": "x" * (17 * MB)})
    error = server.refused(server.stub.SeedSession, pb.SeedSessionRequest(body_json=big))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "MAX_ROW_BYTES" in error.details()
    many = b'{"initial_count": 0, "pad": [' + b"{}," * 300_000 + b"{}]}"
    error = server.refused(server.stub.SeedSession, pb.SeedSessionRequest(body_json=many))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "MAX_JSON_CONTAINERS" in error.details()


def test_verify_bodies_are_bounded_in_items_and_nesting(server: Server) -> None:
    error = server.refused(server.stub.Verify, pb.VerifyRequest(body_json=padded(300_000)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "MAX_JSON_CONTAINERS" in error.details()
    numbers = orjson.dumps(BODY)[:-1] + b',"pad":[' + b"7," * 1_100_000 + b"7]}"
    error = server.refused(server.stub.Verify, pb.VerifyRequest(body_json=numbers))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "1,100,00" in error.details() and "MAX_JSON_VALUES" in error.details()
    deep = orjson.dumps(BODY)[:-1] + b',"pad":' + b"[" * 300 + b"]" * 300 + b"}"
    error = server.refused(server.stub.Verify, pb.VerifyRequest(body_json=deep))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "200 levels" in error.details()


def test_documents_just_under_the_bounds_are_served(server: Server) -> None:
    """The bounds refuse nothing a fair request holds: 99,000 objects in a tool's arguments,
    200,000 numbers (a long rollout's token ids) in a verify body."""
    session = server.stub.SeedSession(pb.SeedSessionRequest(body_json='{"initial_count": 0}')).session_id
    arguments = b'{"count": 5, "pad": [' + b"{}," * 98_999 + b"{}]}"
    for _ in range(3):
        assert not server.stub.CallTool(pb.CallToolRequest(session_id=session, name="add_padded", arguments_json=arguments)).failed
    assert orjson.loads(server.stub.CallTool(pb.CallToolRequest(session_id=session, name="get_counter_value")).output) == {"count": 15}
    token_ids = orjson.dumps({**BODY, "expected_count": -1, "pad": list(range(200_000))})
    assert server.stub.Verify(pb.VerifyRequest(body_json=token_ids), timeout=60).reward == 1.0


def test_the_http_door_counts_items_before_it_builds_groups(server: Server) -> None:
    """1.5M empty groups over HTTP once came back as a 115 MB answer after 13.6 s."""
    body = b'{"groups": [' + b'{"row": {}, "completions": []},' * 1_499_999 + b'{"row": {}, "completions": []}]}'
    started = time.monotonic()
    answer = httpx.post(f"{server.http_url}/score_groups", content=body, headers={"content-type": "application/json"}, timeout=60)
    assert time.monotonic() - started < 10
    assert answer.status_code == 400 and "4,500,002 objects and lists" in answer.json()["error"], answer.text[:300]
    assert "MAX_BODY_CONTAINERS" in answer.json()["error"]


def test_the_server_kept_answering_health_checks(server: Server) -> None:
    """Last in the file: the prober ran through every case above (about two seconds of them)."""
    server.health.assert_p99_under(100, min_checks=50)
