"""Every failure path of the reward client settles (issue 36, item 4): an error after the answer
(recording to a path that cannot be written) reaches the trainer as an error naming the path,
from `score` and `score_async` alike, instead of leaving them waiting forever; a client that
gets no answer says whom it waited for and how long."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.integrations import RewardClient
from gym_metrics.integrations._client import RewardFailure
from gym_metrics.testing import serve_environment

from _transport_helpers import server_in_thread

pytestmark = pytest.mark.timeout(60)
ROW = {"responses_create_params": {"input": "What is 2+2?"}, "expected_answer": "4"}


def test_a_recording_that_fails_fails_the_call_instead_of_hanging(tmp_path: Path) -> None:
    unwritable = tmp_path / "a-directory.jsonl"
    unwritable.mkdir()  # opening it to append fails

    async def run() -> None:
        async with serve_environment("math_exact") as server:
            client = RewardClient(server.address, record=unwritable, timeout_s=20)
            try:
                with pytest.raises(RewardFailure, match=f"recording to {unwritable} failed: IsADirectoryError"):
                    await asyncio.wait_for(client.score_async([(ROW, ["4", "5"])]), 10)
                started = time.monotonic()
                with pytest.raises(RewardFailure, match="recording to"):
                    await asyncio.to_thread(client.score, [(ROW, ["4"])])
                assert time.monotonic() - started < 10
                unwritable.rmdir()  # the path becomes writable: the client goes on
                [scored] = await asyncio.wait_for(client.score_async([(ROW, ["4", "5"])]), 10)
                assert scored.rewards == [1.0, 0.0] and len(unwritable.read_text().splitlines()) == 2
            finally:
                client.close()

    asyncio.run(run())


@pytest.mark.slow
def test_no_answer_in_time_names_the_server_and_the_wait() -> None:
    """The client's own loop stuck (nothing can answer): `score` gives up after timeout_s + 5 s
    with a message, not a bare TimeoutError()."""
    client = RewardClient("127.0.0.1:9", timeout_s=0.5)
    try:
        client._loop.call_soon_threadsafe(time.sleep, 7)
        with pytest.raises(TimeoutError, match=r"no rewards from 127\.0\.0\.1:9 within 5\.5 s \(timeout_s 0\.5\)"):
            client.score([(ROW, ["4"])])
    finally:
        time.sleep(2)  # the stuck loop frees up before close
        client.close()



def _slow_math(seconds: float) -> Any:
    """math_exact whose verify takes `seconds` (a judge, a sandbox), counting its calls."""
    from gym_metrics.environments import resolve_server

    base = resolve_server("math_exact")

    class SlowMath(base):  # type: ignore[misc, valid-type]
        calls = 0

        async def verify(self, *args: Any, **kwargs: Any) -> Any:
            SlowMath.calls += 1
            await asyncio.sleep(seconds)
            return await super().verify(*args, **kwargs)

    return SlowMath()


def test_many_groups_past_the_message_limit_go_as_several_calls_and_one_json_cannot_hold_fails_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's reward loop submits a step's samples one by one: 4,096 of 20 KB were packed into one
    80 MB call, which failed every sample; one sample whose row held bytes failed all 32 sent
    with it, saying only `Type is not JSON serializable`."""
    import gym_metrics.integrations._client as client_module

    monkeypatch.setattr(client_module, "MAX_CALL_BYTES", 256 << 10)
    padded = {**ROW, "notes": "x" * 20_000}

    async def run() -> None:
        async with serve_environment("math_exact", max_message_bytes=1 << 20) as server:  # 60 groups: 1.2 MB together
            client = RewardClient(server.address, timeout_s=20)
            try:
                groups = [(padded, ["4"]) for _ in range(60)] + [({**ROW, "extra_info": {"raw": b"\x00"}}, ["4", "5"])]
                scored = await asyncio.wait_for(client.score_async(groups), 30)
            finally:
                client.close()
        assert [s.rewards for s in scored[:60]] == [[1.0]] * 60 and not any(f for s in scored[:60] for f in s.failed)
        assert scored[60].failed == [True, True] and "row['extra_info']['raw']: bytes" in scored[60].errors[0]

    asyncio.run(run())


def test_a_server_that_takes_less_than_the_client_sends_gets_halves_and_a_group_too_big_fails_alone() -> None:
    """Against `serve --max-message-mb 1` the client packed 200 groups of 8 KB (each fine alone)
    into one 1.6 MB call, which the server refused: all 200 raised, whatever `on_failure` said.
    The refused call is now split and sent again, later calls are cut smaller, and a group the
    server refuses alone fails its completions, named."""
    long = "The answer is 4. " + "x" * 8000

    async def run() -> None:
        async with serve_environment("math_exact", max_message_bytes=1 << 20) as server:
            client = RewardClient(server.address, timeout_s=20)
            try:
                scored = await asyncio.wait_for(client.score_async([(ROW, [long]) for _ in range(200)]), 30)
                assert client.max_call_bytes < 1 << 20
                huge, small = await asyncio.wait_for(client.score_async([(ROW, ["4" + " " * (2 << 20)]), (ROW, ["4"])]), 30)
            finally:
                client.close()
        assert [s.rewards for s in scored] == [[1.0]] * 200 and not any(f for s in scored for f in s.failed)
        assert huge.failed == [True] and "is over what" in huge.errors[0] and "--max-message-mb" in huge.errors[0]
        assert small.rewards == [1.0] and small.failed == [False]

    asyncio.run(run())


def test_a_call_past_its_deadline_is_not_sent_again() -> None:
    """A server slower than timeout_s was retried as 'unavailable' nine times (nine verifies,
    about nine deadlines of waiting); it answers TimeoutError after one."""
    env = _slow_math(3.0)

    async def run() -> None:
        async with serve_environment(env) as server:
            client = RewardClient(server.address, timeout_s=0.5)
            try:
                started = time.monotonic()
                with pytest.raises(TimeoutError, match=r"did not answer within timeout_s 0\.5 s: its verify is slower"):
                    await asyncio.wait_for(client.score_async([(ROW, ["4"])]), 20)
                assert time.monotonic() - started < 3
            finally:
                client.close()
        assert type(env).calls == 1

    asyncio.run(run())


def test_a_late_call_raises_in_the_sync_path_too() -> None:
    """`score` (TRL's, verl's and NeMo RL's sync reward functions) took the late call's
    TimeoutError for 'not done yet' (since Python 3.11 the two are one class) and spun forever."""
    env = _slow_math(3.0)
    with server_in_thread(env) as address:
        client = RewardClient(address, timeout_s=0.5)
        outcome: list[BaseException] = []
        waiter = threading.Thread(target=lambda: _raised(lambda: client.score([(ROW, ["4"])]), outcome), daemon=True)
        try:
            waiter.start()
            waiter.join(20)
            assert not waiter.is_alive(), "score() did not return"
            assert isinstance(outcome[0], TimeoutError) and "its verify is slower" in str(outcome[0])
        finally:
            client.close()


def _raised(call: Any, into: list[BaseException]) -> None:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 (the test reads what it was)
        into.append(exc)


def test_a_client_closed_is_made_again_on_use_by_what_held_it() -> None:
    """A reward function made before `close()` held the stopped client: it waited forever."""
    from gym_metrics.integrations.trl import reward_function
    from gym_metrics.integrations._client import reward_client

    async def run() -> None:
        async with serve_environment("math_exact") as server:
            score = reward_function(server.address)
            columns = {"expected_answer": ["4", "4"], "completion_ids": [[1], [1]]}
            assert await asyncio.to_thread(score, ["What is 2+2?"] * 2, ["4", "5"], **columns) == [1.0, 0.0]
            await asyncio.to_thread(reward_client(server.address).close)
            assert await asyncio.wait_for(asyncio.to_thread(score, ["What is 2+2?"] * 2, ["4", "5"], **columns), 20) == [1.0, 0.0]
            await asyncio.to_thread(reward_client(server.address).close)

    asyncio.run(run())


def test_a_process_forked_after_grpc_was_used_is_refused_at_once() -> None:
    """gRPC cannot run in a child forked after its parent used it (the child hung, or aborted in
    grpc's core): the child is told so and what to do."""
    import multiprocessing

    def child(address: str, answers: "multiprocessing.Queue[str]") -> None:
        try:
            RewardClient(address).score([(ROW, ["4"])])
            answers.put("scored")
        except RewardFailure as exc:
            answers.put(str(exc))

    async def run() -> None:
        async with serve_environment("math_exact") as server:
            client = RewardClient(server.address)
            try:
                assert (await client.score_async([(ROW, ["4"])]))[0].rewards == [1.0]
                fork = multiprocessing.get_context("fork")
                answers = fork.Queue()
                process = fork.Process(target=child, args=(server.address, answers))
                process.start()
                said = await asyncio.to_thread(answers.get, True, 30)
                await asyncio.to_thread(process.join, 10)
            finally:
                client.close()
        assert "forked from one that had used gRPC" in said and "'spawn'" in said

    asyncio.run(run())


RANK = """
import sys
from gym_metrics.integrations import RewardClient
client = RewardClient(sys.argv[1], record=sys.argv[2])
for step in range(10):
    client.score([({"responses_create_params": {"input": "What is 2+2?"}, "expected_answer": sys.argv[3]}, ["4", "5"])], step=step)
client.close()
"""


def test_ranks_recording_to_one_file_number_their_groups_in_turn(tmp_path: Path) -> None:
    """TRL's ranks each count the file's lines at start: both wrote task 0, 1, ... and
    `aggregate` refused the file for its repeated keys."""
    import json
    import subprocess
    import sys

    record = tmp_path / "train.jsonl"

    async def run() -> None:
        async with serve_environment("math_exact") as server:
            ranks = [await asyncio.create_subprocess_exec(sys.executable, "-c", RANK, server.address, str(record), answer, cwd=tmp_path)
                     for answer in ("4", "5")]  # fmt: skip
            assert [await asyncio.wait_for(rank.wait(), 50) for rank in ranks] == [0, 0]

    asyncio.run(run())
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows]
    assert len(rows) == 40 and sorted(keys) == [(t, i) for t in range(20) for i in (0, 1)]
    aggregated = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "aggregate", str(record)], capture_output=True, text=True, timeout=60)
    assert aggregated.returncode == 0, aggregated.stderr


def test_the_adaptors_take_a_deadline_and_refuse_what_would_fail_every_sample() -> None:
    """timeout_s could only be set on the client by hand; verl's reward_kwargs without `server`
    was a TypeError of an internal function and a misspelt key was passed over (every sample
    failed on a missing label); a URL for the server retried 5 s, then failed as a misformatted name."""
    from gym_metrics.integrations import trl, verl
    from gym_metrics.integrations._client import reward_client

    trl.reward_function(server="127.0.0.1:9", timeout_s=7)
    assert reward_client("127.0.0.1:9").timeout_s == 7.0
    verl.reward_function("127.0.0.1:9", timeout_s=9)
    assert reward_client("127.0.0.1:9").timeout_s == 9.0
    with pytest.raises(ValueError, match=r"needs `server: HOST:PORT` in custom_reward_function.reward_kwargs"):
        verl.compute_score("src", "4", "4", {})
    with pytest.raises(ValueError, match=r"reward_kwargs has 'answer_feild': did you mean 'answer_field'\?"):
        verl.compute_score("src", "4", "4", {}, server="127.0.0.1:9", answer_feild="x")
    with pytest.raises(ValueError, match=r"give HOST:PORT .* without a scheme"):
        trl.reward_function(server="http://127.0.0.1:50051")
    with pytest.raises(ValueError, match="timeout_s must be a positive number"):
        reward_client("127.0.0.1:9", timeout_s=0)
    reward_client("127.0.0.1:9").close()


def test_an_answer_that_does_not_match_the_groups_sent_fails_instead_of_hanging_or_shifting() -> None:
    """A server (another version, a proxy) answering no groups left TRL's reward function waiting
    forever, timeout_s or not; one answering a reward fewer than completions shifted the next
    group's rewards onto this group's completions (4 completions, 3 rewards back)."""
    import grpc

    from gym_metrics.integrations.trl import reward_function
    from gym_metrics.v1 import resources_pb2 as pb, resources_pb2_grpc as pbg

    mode: list[str] = []

    class Short(pbg.ResourcesServiceServicer):  # type: ignore[misc]
        async def ScoreGroups(self, request: Any, context: Any) -> Any:
            out = pb.ScoreGroupsResponse()
            for group in request.groups if mode[-1] == "a reward short" else ():
                n = len(group.completion_json) - 1
                out.groups.add(rewards=[1.0] * n, failed=[False] * n, error_kind=[0] * n, error_message=[""] * n, response_json=[""] * n)
            return out

    async def run() -> None:
        server = grpc.aio.server()
        pbg.add_ResourcesServiceServicer_to_server(Short(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            score = reward_function(f"127.0.0.1:{port}", timeout_s=5)
            columns = {"expected_answer": ["4", "4", "6", "6"]}
            for mode_, said in (("no groups", r"answered 0 groups for the 2 sent"), ("a reward short", r"answered group 0 of the call with 1 rewards for its 2")):
                mode.append(mode_)
                with pytest.raises(RewardFailure, match=said):
                    await asyncio.wait_for(asyncio.to_thread(score, ["2+2?", "2+2?", "3+3?", "3+3?"], ["4", "5", "6", "7"], **columns), 20)
        finally:
            await server.stop(0)

    asyncio.run(run())
