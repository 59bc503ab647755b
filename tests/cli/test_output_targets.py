"""Where an output may go: `-o` naming a device or a named pipe is written in place (renaming a
temporary file over it replaced the device with a file: as root, the machine's /dev/null); a
directory or a folder that cannot be written is refused before any work, naming the flag; an
evaluate into a folder not made yet makes it (it lost a finished run); report and health
never write over their own input. Real CLI processes on real files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)


def gm(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gym_metrics.cli", *map(str, args)], capture_output=True, text=True, timeout=100)


@pytest.fixture
def rollouts(tmp_path: Path) -> Path:
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float((t + r) % 2)}
            for t in range(5) for r in range(2)]  # fmt: skip
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def metrics(tmp_path: Path, rollouts: Path) -> Path:
    out = tmp_path / "m.json"
    assert gm("aggregate", rollouts, "-q", "-o", out).returncode == 0
    return out


def test_a_fifo_output_is_written_in_place_not_replaced(tmp_path: Path, rollouts: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    run = gm("aggregate", rollouts, "-q", "-o", fifo)
    reader.join(timeout=60)
    assert run.returncode == 0, run.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still a pipe
    assert json.loads(got[0])[0]["agent_ref"]["name"] == "a"


@pytest.mark.parametrize("command", ["aggregate", "report", "evaluate", "merge"])
def test_a_device_output_stays_a_device(tmp_path: Path, rollouts: Path, metrics: Path, command: str) -> None:
    null = tmp_path / "null"
    if os.geteuid() == 0:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    else:  # a user cannot make a device node: a link to the machine's /dev/null is one too
        null.symlink_to("/dev/null")
    partial = tmp_path / "p.parquet"
    args = {
        "aggregate": ["aggregate", rollouts, "-q", "-o", null],
        "report": ["report", metrics, "-o", null],
        "evaluate": ["evaluate", "--scorer", "tool_call_accuracy", "--input", tmp_path / "rows.jsonl", "-o", null],
        "merge": ["merge", partial, "-o", null],
    }[command]
    (tmp_path / "rows.jsonl").write_text('{"user_input": [{"content": "", "type": "ai", "tool_calls": [{"name": "a", "args": {}}]}], "reference_tool_calls": [{"name": "a", "args": {}}]}\n')
    assert gm("aggregate", rollouts, "-q", "--partial-out", partial).returncode == 0
    run = gm(*args)
    assert run.returncode == 0, run.stderr
    assert stat.S_ISCHR(null.stat().st_mode) and (os.geteuid() == 0 or null.is_symlink())


def test_a_directory_or_unwritable_output_is_refused_before_any_work(tmp_path: Path, rollouts: Path) -> None:
    folder = tmp_path / "dir"
    folder.mkdir()
    run = gm("aggregate", rollouts, "-q", "-o", folder)
    assert run.returncode == 2 and f"--output {folder} is a directory" in run.stderr, run.stderr
    assert not list(tmp_path.glob(".*.tmp"))
    locked = tmp_path / "ro"
    locked.mkdir(mode=0o500)
    if os.geteuid() != 0:  # root writes anywhere
        run = gm("aggregate", rollouts, "-q", "-o", locked / "x.json")
        assert run.returncode == 2 and "is not writable" in run.stderr, run.stderr


def test_a_full_device_and_a_file_given_as_a_folder_are_named(tmp_path: Path, rollouts: Path) -> None:
    """A write that fails for want of space said "[Errno 28] No space left on device", naming no
    file; `demo --out-dir` or `health --output-dir` naming a file gave a raw "Not a directory"."""
    full = tmp_path / "full"
    if os.geteuid() == 0:
        os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))  # /dev/full: every write fails with ENOSPC
    else:
        full.symlink_to("/dev/full")
    run = gm("aggregate", rollouts, "-q", "-o", full)
    assert run.returncode == 2 and run.stderr == f"error: cannot write {full}: No space left on device\n", run.stderr
    afile = tmp_path / "afile"
    afile.write_text("")
    for args, flag in ((("demo", "--out-dir", afile), "--out-dir"), (("health", rollouts, "--output-dir", afile), "--output-dir")):
        run = gm(*args)
        assert run.returncode == 2 and run.stderr == f"error: {flag} {afile} is not a directory\n", run.stderr
    assert afile.read_text() == ""


def test_evaluate_makes_the_output_folder_and_writes_with_the_usual_mode(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text('{"user_input": [{"content": "", "type": "ai", "tool_calls": [{"name": "a", "args": {}}]}], "reference_tool_calls": [{"name": "a", "args": {}}]}\n')
    out = tmp_path / "new" / "deeper" / "x.json"
    run = gm("evaluate", "--scorer", "tool_call_accuracy", "--input", tmp_path / "rows.jsonl", "-o", out)
    assert run.returncode == 0, run.stderr
    assert json.loads(out.read_text())["row_scores"] and stat.S_IMODE(out.stat().st_mode) & 0o044  # not mkstemp's 0600


def test_report_and_health_never_write_over_their_input(tmp_path: Path, rollouts: Path, metrics: Path) -> None:
    before = metrics.read_bytes()
    run = gm("report", metrics, "-o", metrics)
    assert run.returncode == 2 and "would overwrite the input" in run.stderr, run.stderr
    other = tmp_path / "o.json"
    other.write_bytes(before)
    run = gm("report", metrics, "--compare", other, "-o", other)
    assert run.returncode == 2 and "would overwrite the input" in run.stderr, run.stderr
    assert metrics.read_bytes() == before == other.read_bytes()
    verdicts = tmp_path / "h" / "rollout_verdicts.jsonl"
    verdicts.parent.mkdir()
    verdicts.write_bytes(rollouts.read_bytes())
    run = gm("health", verdicts)
    assert run.returncode == 2 and "is one of the rollout files" in run.stderr, run.stderr
    assert verdicts.read_bytes() == rollouts.read_bytes()
