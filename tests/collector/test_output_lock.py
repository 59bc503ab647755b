"""The lock a collect holds on its output (`.<name>.lock`) is removed when the run lets go of
it, however the run ends; a run that opened the lock file just before its holder let go never
holds a removed file while a third run holds the new one."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path
from typing import IO, Any

import pytest

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics._util.exclusive import Exclusive, hold_exclusive
from gym_metrics.cli import main as cli_main
from gym_metrics.errors import GymMetricsError
from gym_metrics_servers.math_exact import SAMPLE_PATH, MathExactServer

pytestmark = pytest.mark.timeout(60)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".lock"))


async def test_a_finished_run_and_one_that_cannot_reach_its_server_leave_no_lock(tmp_path: Path) -> None:
    running = await start_server(MathExactServer(), ServerConfig(port=0, log_requests=False))
    try:
        done = await asyncio.to_thread(cli_main, ["collect", "--server", running.address, "--input", str(SAMPLE_PATH), "--output", str(tmp_path / "done.jsonl")])
    finally:
        await running.stop(0)
    assert done == 0 and (tmp_path / "done_aggregate_metrics.json").exists()
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    unreachable = await asyncio.to_thread(cli_main, ["collect", "--server", f"127.0.0.1:{port}", "--input", str(SAMPLE_PATH),
                                                     "--output", str(tmp_path / "lost.jsonl"), "--connect-timeout", "1"])  # fmt: skip
    assert unreachable == 4
    assert leftovers(tmp_path) == []


def test_a_held_lock_refuses_others_and_is_gone_once_let_go(tmp_path: Path) -> None:
    path = tmp_path / ".out.jsonl.lock"
    held = hold_exclusive(path, "busy")
    with pytest.raises(GymMetricsError, match="busy"):
        hold_exclusive(path, "busy")
    held.close()
    held.close()  # (twice: nothing more)
    assert not path.exists()
    again = hold_exclusive(path, "busy")
    assert path.exists()
    again.close()


class _LetGoOnOpen(type(Path())):  # type: ignore[misc]
    """A lock path whose first open() makes `holder` let go right after the file is opened: the
    opener then locks a file no longer at the path (removed, or replaced by a third run's)."""

    holder: Exclusive | None = None
    third: list[Exclusive] = []

    def open(self, *args: Any, **kwargs: Any) -> IO[Any]:  # type: ignore[override]
        handle = super().open(*args, **kwargs)
        holder, type(self).holder = type(self).holder, None
        if holder is not None:
            holder.close()
            type(self).third.append(hold_exclusive(Path(self), "busy"))  # a third run takes the lock at the path
        return handle


def test_a_run_that_opened_the_file_as_its_holder_let_go_does_not_share_the_lock(tmp_path: Path) -> None:
    path = _LetGoOnOpen(tmp_path / ".out.jsonl.lock")
    _LetGoOnOpen.holder = hold_exclusive(Path(path), "busy")
    with pytest.raises(GymMetricsError, match="busy"):  # the third run holds the file now at the path
        hold_exclusive(path, "busy")
    [third] = _LetGoOnOpen.third
    third.close()
    with contextlib.closing(hold_exclusive(Path(path), "busy")):
        pass
