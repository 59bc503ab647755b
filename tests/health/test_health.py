"""Rollout health (issue 40 item 1): `gym-metrics health` writes, file for file and byte for byte,
what NeMo Gym 0.7.0's `run_health_checks` writes over the same rollout files
(tests/data/health: clean, without trajectories, one fault per task tripping 13 of the 14
checks, the faults with two checks ignored, a trajectory breaking each rule of NeMo Gym's
TrajectoryRecord schema in turn, and the shapes a trajectory reads as only once validated and
dumped (numeric strings, a model_ref's other keys, a payload too deep) or whose references,
gaps, call order and cut generations decide a verdict; recorded by
scripts/make_nemo_health_reference.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gym_metrics.health import CHECKS, check_health

DATA = (Path(__file__).parents[1] / "data" / "health").resolve()
IGNORED = ["model_call_failed", "rollout_ended_on_failed_model_call"]
RUNS = [("clean", ()), ("no_trajectory", ()), ("faults", ()), ("faults.ignored", IGNORED), ("schema", ()), ("shapes", ())]


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


async def test_collect_health_checks_the_rollouts_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`collect --trajectory --health`: the reports beside the rollouts, the line printed, each
    rollout checked with the evidence its trajectory gives (healthy, not unobserved)."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "collector"))
    from test_collect_generate import collect_with_trajectory_and_health

    out = tmp_path / "run" / "out.jsonl"
    out.parent.mkdir()
    await collect_with_trajectory_and_health(tmp_path, out, 3)
    printed = capsys.readouterr().out
    assert "Rollout health: 3 checked, " in printed and f"Quality summary: {out.parent / 'quality_summary.json'}" in printed
    verdicts = [json.loads(line) for line in (out.parent / "rollout_verdicts.jsonl").read_text().splitlines()]
    assert [v["_ng_task_index"] for v in verdicts] == [0, 1, 2]
    assert all("record_unreadable" not in v["unobserved"] and "model_call_failed" not in v["unobserved"] for v in verdicts)


def test_indexes_are_typed_as_nemo_gym_types_them(tmp_path: Path) -> None:
    """A whole float or a bool is that int (so 1.0 and true are task 1, duplicates of it);
    a null index is refused naming the line, where NeMo Gym's whole run fails."""
    rows = [{"_ng_task_index": 1, "_ng_rollout_index": 0}, {"_ng_task_index": 1.0, "_ng_rollout_index": 0}, {"_ng_task_index": True, "_ng_rollout_index": 0}]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    health = check_health(tmp_path / "r.jsonl")
    verdicts = [json.loads(line) for line in health.verdicts_path.read_text().splitlines()]
    assert [(v["_ng_task_index"], v["rollout_id"]) for v in verdicts] == [(1, "1-0"), (1, "1.0-0"), (1, "True-0")]
    assert all(f["check"] == "rollout_duplicate_identity" and f["detail"] == {"duplicate_count": 3} for v in verdicts for f in v["findings"])
    (tmp_path / "bad.jsonl").write_text(json.dumps({"_ng_task_index": None}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl line 1: _ng_task_index is None"):
        check_health(tmp_path / "bad.jsonl")
