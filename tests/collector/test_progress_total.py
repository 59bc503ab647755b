"""The total collect's progress bar expects: the input's lines counted (small files) or sampled
over the whole file (big ones), so one huge line does not make the bar's total a small fraction
of the input; when the count still falls short the bar drops its total instead of passing 100%."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from gym_metrics._util import progress as progress_module
from gym_metrics._util.progress import estimate_lines
from gym_metrics.collector import Progress, estimate_total


def _rows(n: int, first_line_bytes: int = 0) -> bytes:
    head = json.dumps({"prompt": "x" * first_line_bytes}).encode() + b"\n" if first_line_bytes else b""
    return head + b"".join(json.dumps({"question": f"q{i}", "expected_answer": str(i)}).encode() + b"\n" for i in range(n))


def test_a_huge_first_line_does_not_shrink_the_total(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(_rows(20_000, first_line_bytes=3 << 20))  # a 3 MiB task, then 20,000 small ones
    assert estimate_lines(path) == 20_001  # it was 4: the file's size over its first MiB, one partial line
    assert estimate_total(path, 4) == 80_004


def test_a_file_without_a_last_newline_counts_its_last_line(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(_rows(3).rstrip(b"\n"))
    assert estimate_lines(path) == 3
    path.write_bytes(b"")
    assert estimate_lines(path) is None


def test_big_files_are_sampled_over_their_whole_length(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the exact-count size the lines are estimated from windows spread over the file: a
    file whose first half holds long lines and second half short ones lands near its count."""
    monkeypatch.setattr(progress_module, "EXACT_COUNT_BYTES", 1 << 20)
    monkeypatch.setattr(progress_module, "SAMPLE_BYTES", 64 << 10)
    long = b"".join(json.dumps({"p": "y" * 990}).encode() + b"\n" for _ in range(4_000))
    short = _rows(100_000)
    path = tmp_path / "in.jsonl"
    path.write_bytes(long + short)
    estimated = estimate_lines(path)
    assert estimated is not None and abs(estimated - 104_000) / 104_000 < 0.25
    assert estimated != 104_000  # sampled, not counted


def test_the_bar_drops_a_total_the_run_passed() -> None:
    progress = Progress(2, stream=io.StringIO())
    progress.add("a", 1.0)
    assert "[##########          ] 1/2 rollouts" in progress.summary()
    progress.add("a", 1.0)
    progress.add("a", 0.0)
    summary = progress.summary()
    assert summary.startswith("3 rollouts, ") and "/2" not in summary and "[" not in summary
