"""Every failure path of the reward client settles (issue 36, item 4): an error after the answer
(recording to a path that cannot be written) reaches the trainer as an error naming the path,
from `score` and `score_async` alike, instead of leaving them waiting forever; a client that
gets no answer says whom it waited for and how long."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gym_metrics.integrations import RewardClient
from gym_metrics.integrations._client import RewardFailure
from gym_metrics.testing import serve_environment

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
