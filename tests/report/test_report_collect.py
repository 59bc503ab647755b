"""`collect --report` writes the report beside the metrics file of a real collection."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import cli, resolve_server
from gym_metrics._transport import ServerConfig, start_server


@pytest.fixture
def math_server() -> Iterator[tuple[str, Path]]:
    """math_exact on 127.0.0.1:0 in a thread of its own (cli.main runs its loop here), and its sample."""
    env = resolve_server("math_exact")()
    assert env.sample is not None
    loop = asyncio.new_event_loop()
    started: dict[str, Any] = {}
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        started["server"] = loop.run_until_complete(start_server(env, ServerConfig(port=0, log_requests=False)))
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(30)
    yield started["server"].address, env.sample
    asyncio.run_coroutine_threadsafe(started["server"].stop(0), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


def test_collect_report_flag(tmp_path: Path, math_server: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    address, sample = math_server
    out = tmp_path / "run.jsonl"
    assert cli.main(["collect", "--server", address, "--input", str(sample), "--output", str(out), "--report"]) == 0
    page = tmp_path / "run_report.html"
    assert f"report   -> {page}" in capsys.readouterr().out
    html = page.read_text()
    assert 'data-chart="pass-at-k"' in html and 'id="task-data"' in html
