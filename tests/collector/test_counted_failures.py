"""`collect --count-failure-classes-as-zero CLASS ...` as NeMo Gym 0.7.0's
`count_failure_classes_as_zero`: of the failures sidecar, each rollout's last attempt of a class
asked for and not scored in the output joins the metrics, its diagnostics left out, its reward 0
unless it has one (the rows equal NeMo Gym's own selection: tests/data/nemo_gym_configs/
benchmarks.json, "counted"); the rollouts file and the sidecar stay as written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gym_metrics import cli
from gym_metrics.collector._counted import _held, counted_failures, with_counted_failures
from gym_metrics.rollouts import read_rollouts

from _flaky_judge import FlakyJudge, flaky_rows
from _transport_helpers import server_in_thread

COUNTED = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_configs" / "benchmarks.json").read_text())["counted"]


def test_the_rows_counted_are_nemo_gyms(tmp_path: Path) -> None:
    """The rows, against an output holding the rollouts NeMo Gym's selection was told were scored."""
    sidecar, out = tmp_path / "out_failures.jsonl", tmp_path / "out.jsonl"
    sidecar.write_text("".join(json.dumps(r) + "\n" for r in COUNTED["sidecar"]))
    out.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": 1.0}) + "\n"
                           for t, r in [*COUNTED["scored"], [9, 0]]))  # fmt: skip
    columns = read_rollouts(out).agents
    found = counted_failures(sidecar, COUNTED["classes"], lambda keys: _held(columns.values(), keys))
    assert sorted(found, key=lambda r: (r["_ng_task_index"], r["_ng_rollout_index"])) == COUNTED["rows"]
    merged, counted = with_counted_failures(columns, out, sidecar, COUNTED["classes"], None)
    assert counted == len(COUNTED["rows"]) and len(merged["a"].task_index) == len(COUNTED["scored"]) + 1 + counted


def test_counted_failures_lower_the_score_and_change_no_file(tmp_path: Path, capsys: Any) -> None:
    rows = tmp_path / "in.jsonl"
    rows.write_text("\n".join(flaky_rows(40)) + "\n")
    with server_in_thread(FlakyJudge()) as address:
        for stem, extra in (("plain", []), ("counted", ["--count-failure-classes-as-zero", "judge_failed"]), ("other", ["--count-failure-classes-as-zero", "x"])):
            assert cli.main(["collect", "--server", address, "--input", str(rows), "--output", str(tmp_path / f"{stem}.jsonl"), *extra]) == 0
    means = {stem: json.loads((tmp_path / f"{stem}_aggregate_metrics.json").read_text())[0]["agent_metrics"]["mean/reward"] for stem in ("plain", "counted", "other")}
    assert means == {"plain": 1.0, "counted": 30 / 40, "other": 1.0}
    for name in ("{}.jsonl", "{}_failures.jsonl"):
        assert (tmp_path / name.format("counted")).read_bytes() == (tmp_path / name.format("plain")).read_bytes()
    assert "10 failed rollouts counted as 0 in the metrics (judge_failed; the files unchanged)" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.jsonl.counted.*"))  # the metric input's scratch file is gone
