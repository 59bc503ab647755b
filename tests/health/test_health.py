"""Rollout health (issue 40 item 1): `gym-metrics health` writes, file for file and byte for byte,
what NeMo Gym 0.7.0's `run_health_checks` writes over the same rollout files
(tests/data/health: clean, without trajectories, one fault per task tripping 13 of the 14
checks, and the faults with two checks ignored; recorded by scripts/make_nemo_health_reference.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gym_metrics.health import CHECKS, check_health

DATA = (Path(__file__).parents[1] / "data" / "health").resolve()
IGNORED = ["model_call_failed", "rollout_ended_on_failed_model_call"]
RUNS = [("clean", ()), ("no_trajectory", ()), ("faults", ()), ("faults.ignored", IGNORED)]


@pytest.mark.parametrize(("name", "ignored"), RUNS, ids=[r[0] for r in RUNS])
def test_the_reports_are_nemo_gyms(name: str, ignored: tuple[str, ...], tmp_path: Path) -> None:
    health = check_health(DATA / f"{name.split('.')[0]}.jsonl", output_dir=tmp_path, ignore=ignored)
    written = {"quality_summary.json": health.summary_path.read_text(), "rollout_verdicts.jsonl": health.verdicts_path.read_text(),
               "report.txt": health.line() + "\n"}  # fmt: skip
    for file, text in written.items():
        assert text.replace(str(tmp_path), "<dir>").replace(str(DATA), "<data>") == (DATA / f"{name}.nemo" / file).read_text(), file


def test_the_fault_cases_trip_every_check_but_one() -> None:
    """The reference is not a file of passes: each check but check_execution_error fires."""
    summary = json.loads((DATA / "faults.nemo" / "quality_summary.json").read_text())
    assert [c for c in CHECKS if not summary["run"]["issues"][c]] == ["check_execution_error"]
    assert json.loads((DATA / "clean.nemo" / "quality_summary.json").read_text())["run"]["verdicts"]["healthy"] == 6


def test_the_command_prints_the_report_and_refuses_an_unknown_check(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "gym_metrics.cli", "health", str(DATA / "faults.jsonl"), "-o", str(tmp_path)]
    done = subprocess.run([*cli, "--ignore", "model_call_failed,rollout_ended_on_failed_model_call"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (DATA / "faults.ignored.nemo" / "report.txt").read_text().splitlines()[0]
    assert (tmp_path / "quality_summary.json").exists() and (tmp_path / "rollout_verdicts.jsonl").exists()
    bad = subprocess.run([*cli, "--ignore", "no_such_check"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Unknown rollout health check(s): no_such_check" in bad.stderr and "Traceback" not in bad.stderr
