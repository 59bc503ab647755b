"""The package ships py.typed, so `mypy gym_metrics` (pyproject's [tool.mypy]) must be clean."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from _ci import missing

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # ~8 s without mypy's cache
@pytest.mark.timeout(600)
def test_mypy_reports_no_errors() -> None:
    if importlib.util.find_spec("mypy") is None:
        missing("mypy is not installed (it comes with the dev extra: pip install -e '.[dev]')")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "gym_metrics"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert proc.returncode == 0, f"mypy gym_metrics (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
    assert "Success: no issues found" in proc.stdout, proc.stdout
