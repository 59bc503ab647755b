"""`collect --count-failure-classes-as-zero CLASS ...` as NeMo Gym 0.7.0's
`count_failure_classes_as_zero`: of the failures sidecar, each rollout's last attempt of a class
asked for and not scored in the output joins the metrics, its diagnostics left out, its reward 0
unless it has one (the rows equal NeMo Gym's own selection: tests/data/nemo_gym_configs/
benchmarks.json, "counted"); the rollouts file and the sidecar stay as written. `aggregate` of
several outputs with the flag follows `gym eval aggregate`'s rule ("aggregated": the metric input
NeMo Gym's own aggregation helper built from two outputs and their sidecars)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gym_metrics import cli
from gym_metrics.collector import counted_in_shards
from gym_metrics.collector._counted import _held, counted_failures, with_counted_failures
from gym_metrics.rollouts import read_rollouts

from _flaky_judge import FlakyJudge, flaky_rows
from _transport_helpers import server_in_thread

REFERENCE = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_configs" / "benchmarks.json").read_text())
COUNTED, AGGREGATED = REFERENCE["counted"], REFERENCE["aggregated"]


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


def _shards(folder: Path) -> list[Path]:
    """AGGREGATED's outputs and their failures sidecars written in `folder`."""
    paths = []
    for name, (rows, failures) in AGGREGATED["shards"].items():
        (folder / f"{name}_failures.jsonl").write_text("".join(json.dumps(r) + "\n" for r in failures))
        paths.append(folder / f"{name}.jsonl")
        paths[-1].write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


def _order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["agent_ref"]["name"], r["_ng_task_index"], r["_ng_rollout_index"]))


def test_the_rows_counted_across_outputs_are_gym_eval_aggregates(tmp_path: Path) -> None:
    """Each output's sidecar against its own rows, the last attempt standing across outputs, a
    rollout another output scored not counted, a row naming no agent left out: the rows NeMo
    Gym's aggregation added to its metric input."""
    paths = _shards(tmp_path)
    found = counted_in_shards([(read_rollouts(p).agents, p.with_name(p.stem + "_failures.jsonl")) for p in paths], AGGREGATED["classes"])
    added = [r for r in AGGREGATED["rows"] if "mask_sample" in r]  # (NeMo Gym's metric input: the outputs' rows, then these)
    assert _order(found) == _order(added) and len(added) == 2


def test_aggregate_counts_the_sidecars_failures(tmp_path: Path, capsys: Any) -> None:
    """`aggregate A B -o M --count-failure-classes-as-zero judge_failed`: each agent's metrics over
    NeMo Gym's metric input; without the flag, over the rows alone; the files unchanged."""
    paths = _shards(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    means = {}
    for stem, extra in (("plain", []), ("counted", ["--count-failure-classes-as-zero", "judge_failed"])):
        assert cli.main(["aggregate", *map(str, paths), "-o", str(tmp_path / f"{stem}.json"), *extra]) == 0
        metrics = json.loads((tmp_path / f"{stem}.json").read_text())
        means[stem] = {m["agent_ref"]["name"]: m["agent_metrics"]["mean/reward"] for m in metrics}
    expected: dict[str, list[float]] = {}
    for row in AGGREGATED["rows"]:
        expected.setdefault(row["agent_ref"]["name"], []).append(row["reward"])
    assert means["counted"] == {agent: sum(r) / len(r) for agent, r in expected.items()} == {"x": 0.6, "y": 0.375}
    assert means["plain"] == {"x": 0.75, "y": 0.5}
    assert "2 failed rollouts counted as 0 in the metrics (judge_failed; the files unchanged)" in capsys.readouterr().err
    assert all(p.read_bytes() == data for p, data in before.items())
    assert cli.main(["aggregate", str(paths[0]), "--partial-out", str(tmp_path / "p.parquet"), "--count-failure-classes-as-zero", "judge_failed"]) == 2
    assert "not with --partial-out or --ray" in capsys.readouterr().err


def test_a_class_no_failure_holds_is_named_with_the_classes_held(tmp_path: Path, capsys: Any) -> None:
    """A typo (`judge_faild`) counted nothing, silently: NeMo Gym takes any string, so it is not
    refused, but each asked class no failed rollout holds is named, with those the sidecar holds."""
    rows = tmp_path / "in.jsonl"
    rows.write_text("\n".join(flaky_rows(8)) + "\n")
    with server_in_thread(FlakyJudge()) as address:
        flags = ["--count-failure-classes-as-zero", "judge_faild", "judge_failed"]
        assert cli.main(["collect", "--server", address, "--input", str(rows), "--output", str(tmp_path / "o.jsonl"), *flags]) == 0
    err = capsys.readouterr().err
    assert "collect: no failed rollout of class 'judge_faild' (the failures hold: judge_failed)" in err, err
    assert "class 'judge_failed'" not in err and "2 failed rollouts counted as 0" in err


def test_aggregate_names_a_class_no_sidecar_holds_and_is_quiet_without_failures(tmp_path: Path, capsys: Any) -> None:
    paths = _shards(tmp_path)
    assert cli.main(["aggregate", *map(str, paths), "-o", str(tmp_path / "m.json"), "--count-failure-classes-as-zero", "judge_fail"]) == 0
    held = sorted({str(r["_ng_failure_class"]) for _, failures in AGGREGATED["shards"].values() for r in failures if "_ng_failure_class" in r})
    assert f"aggregate: no failed rollout of class 'judge_fail' (the failures hold: {', '.join(held)})" in capsys.readouterr().err
    clean = tmp_path / "clean.jsonl"  # no sidecar: nothing to match, no warning
    clean.write_text(json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}) + "\n")
    assert cli.main(["aggregate", str(clean), "-o", str(tmp_path / "c.json"), "--count-failure-classes-as-zero", "judge_fail"]) == 0
    assert "no failed rollout of class" not in capsys.readouterr().err
