"""`gym-metrics collect` runs with fewer garbage-collector passes (objects alive at its start
frozen, a young generation of 10,000) and puts the collector back as it was when it ends."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gym_metrics import cli
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.environments import SimpleResourcesServer

from _transport_helpers import server_in_thread


class GcProbe(SimpleResourcesServer):
    """Records the collector's settings while verifying (the server runs in this process)."""

    name = "gc_probe"
    seen: list[tuple[tuple[int, int, int], int]] = []

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        self.seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return BaseVerifyResponse(reward=1.0)


@pytest.fixture
def server() -> Iterator[str]:
    """GcProbe on 127.0.0.1:0 in a thread of its own, so `cli.main` can run its event loop here."""
    with server_in_thread(GcProbe()) as address:
        yield address


def test_collect_tunes_the_collector_and_restores_it(tmp_path: Path, server: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, "t": t}) + "\n" for t in range(20)))
    out = tmp_path / "out.jsonl"
    GcProbe.seen.clear()
    before = gc.get_threshold(), gc.get_freeze_count()
    assert cli.main(["collect", "--server", server, "--input", str(src), "--output", str(out)]) == 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
    assert len(GcProbe.seen) == 20
    assert all(threshold == (10_000, 10, 10) and frozen > 0 for threshold, frozen in GcProbe.seen)
    assert [json.loads(line)["reward"] for line in out.read_text().splitlines()] == [1.0] * 20
