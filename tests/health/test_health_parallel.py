"""A large run is checked in byte ranges by worker processes (issue 40: "1M rollouts in seconds"):
the reports are the ones a single pass writes, byte for byte, NeMo Gym's on the recorded cases;
lines and positions are counted over the whole run; an error names the line a single pass names."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

import gym_metrics.health._read as read
from gym_metrics.health import check_health

from test_health import DATA, IGNORED

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def in_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run in worker processes, each file cut into several ranges, however small."""
    monkeypatch.setattr(read, "PARALLEL_BYTES", 0)


def _reports(out: Path) -> tuple[bytes, bytes]:
    return (out / "quality_summary.json").read_bytes(), (out / "rollout_verdicts.jsonl").read_bytes()


@pytest.mark.parametrize(("name", "ignored"), [("faults", ()), ("faults", IGNORED)], ids=["faults", "faults.ignored"])
def test_workers_write_nemo_gyms_reports(name: str, ignored: tuple[str, ...], in_ranges: None, tmp_path: Path) -> None:
    health = check_health(DATA / f"{name}.jsonl", output_dir=tmp_path, ignore=ignored, workers=3)
    reference = DATA / f"{name}{'.ignored' if ignored else ''}.nemo"
    assert health.summary_path.read_text().replace(str(DATA), "<data>") == (reference / "quality_summary.json").read_text()
    assert health.verdicts_path.read_text().replace(str(DATA), "<data>") == (reference / "rollout_verdicts.jsonl").read_text()


def test_ranges_count_lines_and_positions_over_the_whole_run(in_ranges: None, tmp_path: Path) -> None:
    """Blank and unreadable lines, rows whose task is their position, several files: what the
    workers find is what one pass finds (and the digests come back in the run's order)."""
    clean = (DATA / "clean.jsonl").read_bytes().splitlines()
    faults = (DATA / "faults.jsonl").read_bytes().splitlines()
    no_index = [orjson.dumps({k: v for k, v in json.loads(line).items() if k != "_ng_task_index"}) for line in clean[:3]]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(b"\n".join([*faults[:9], b"", b"   ", b"{broken", *no_index, b"[1]", *clean]) + b"\n")
    second.write_bytes(b"\n".join([*no_index, b"", *faults[9:], b"null"]))  # no newline at the end
    one = check_health([first, second], output_dir=tmp_path / "one", workers=1)
    many = check_health([first, second], output_dir=tmp_path / "many", workers=4)
    assert _reports(tmp_path / "many") == _reports(tmp_path / "one")
    assert many.rollouts == one.rollouts and len(many.rollouts) == one.summary["run"]["artifacts"]["records"]
    verdicts = (tmp_path / "one" / "rollout_verdicts.jsonl").read_text()
    assert '"__unreadable_record__:input-0:line-12"' in verdicts and '"__unreadable_record__:input-1:line-' in verdicts


def test_a_bad_index_in_a_later_range_names_its_line_in_the_file(in_ranges: None, tmp_path: Path) -> None:
    rows = [orjson.dumps({"_ng_task_index": n, "_ng_rollout_index": 0, "pad": "x" * 200}) for n in range(200)]
    rows[150] = orjson.dumps({"_ng_task_index": [150], "_ng_rollout_index": 0})
    (tmp_path / "r.jsonl").write_bytes(b"\n\n".join(rows) + b"\n")
    with pytest.raises(ValueError, match=r"r.jsonl line 301: _ng_task_index is \[150\], not an integer or a string"):
        check_health(tmp_path / "r.jsonl", workers=2)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        check_health(tmp_path / "r.jsonl", workers=0)


def test_a_line_ending_in_a_form_feed_is_read_as_nemo_gym_reads_it(tmp_path: Path) -> None:
    """NeMo Gym strips a line's ASCII whitespace (\\x0b and \\x0c too) before parsing it: both
    rows are records (unobserved: no trajectory), neither unreadable (NeMo Gym 0.7.0, probed)."""
    (tmp_path / "r.jsonl").write_bytes(b'{"_ng_task_index":1}\x0c\n{"_ng_task_index":2}\x0b\n')
    run = check_health(tmp_path / "r.jsonl").summary["run"]
    assert run["verdicts"] == {"healthy": 0, "unhealthy": 0, "unobserved": 2} and run["issues"]["record_unreadable"] == 0
