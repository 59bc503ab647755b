"""`collect --report` writes the report beside the metrics file of a real collection."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gym_metrics import cli, resolve_server

from _transport_helpers import server_in_thread


@pytest.fixture
def math_server() -> Iterator[tuple[str, Path]]:
    """math_exact on 127.0.0.1:0 in a thread of its own (cli.main runs its loop here), and its sample."""
    env = resolve_server("math_exact")()
    assert env.sample is not None
    with server_in_thread(env) as address:
        yield address, env.sample


def test_collect_report_flag(tmp_path: Path, math_server: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    address, sample = math_server
    out = tmp_path / "run.jsonl"
    assert cli.main(["collect", "--server", address, "--input", str(sample), "--output", str(out), "--report"]) == 0
    page = tmp_path / "run_report.html"
    assert f"report   -> {page}" in capsys.readouterr().out
    html = page.read_text()
    assert 'data-chart="pass-at-k"' in html and 'id="task-data"' in html
