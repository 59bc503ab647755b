"""`gym-metrics aggregate --partial-out` and `gym-metrics merge` end to end: shards written by
separate commands merge into the bytes one `aggregate` writes; an environment whose
compute_metrics needs rows refuses partials without them, naming the flag that fixes it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from gym_metrics import cli

APP = '''
from typing import Any
from gym_metrics import SimpleResourcesServer

class RowsEnv(SimpleResourcesServer):
    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return {"longest_answer": max(len(r.get("answer", "")) for t in tasks for r in t)}
'''


def rollouts(path: Path, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    lines = [
        json.dumps({"agent_ref": {"name": agent}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float(rng.random() < 0.5),
                    "latency_s": round(rng.uniform(0, 3), 4), "answer": "x" * rng.randint(0, 40)}).encode() + b"\n"
        for agent in ("a", "b") for t in range(30) for r in range(4)
    ]  # fmt: skip
    rng.shuffle(lines)
    path.write_bytes(b"".join(lines))
    return lines


def test_partials_from_separate_commands_merge_to_one_aggregates_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = rollouts(tmp_path / "all.jsonl")
    (tmp_path / "one.jsonl").write_bytes(b"".join(lines[:100]))
    (tmp_path / "two.jsonl").write_bytes(b"".join(lines[100:]))
    assert cli.main(["aggregate", str(tmp_path / "all.jsonl"), "-o", str(tmp_path / "single.json"), "-q"]) == 0
    for name in ("one", "two"):
        assert cli.main(["aggregate", str(tmp_path / f"{name}.jsonl"), "--partial-out", str(tmp_path / f"{name}.parquet")]) == 0
    assert "partial" in capsys.readouterr().out
    assert cli.main(["merge", str(tmp_path / "two.parquet"), str(tmp_path / "one.parquet"), "-o", str(tmp_path / "merged.json")]) == 0
    assert (tmp_path / "merged.json").read_bytes() == (tmp_path / "single.json").read_bytes()
    # several inputs to one aggregate are one set of rows too
    assert cli.main(["aggregate", str(tmp_path / "two.jsonl"), str(tmp_path / "one.jsonl"), "-o", str(tmp_path / "both.json"), "-q"]) == 0
    assert (tmp_path / "both.json").read_bytes() == (tmp_path / "single.json").read_bytes()
    flags = ["--no-rollout-infos", "--expected-rollouts", "5", "--economics"]
    assert cli.main(["aggregate", str(tmp_path / "all.jsonl"), "-o", str(tmp_path / "s2.json"), "-q", *flags]) == 0
    assert cli.main(["merge", str(tmp_path / "one.parquet"), str(tmp_path / "two.parquet"), "-o", str(tmp_path / "m2.json"), "-q", *flags]) == 0
    assert (tmp_path / "m2.json").read_bytes() == (tmp_path / "s2.json").read_bytes()


def test_an_env_needing_rows_refuses_sample_only_partials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rollouts(tmp_path / "all.jsonl", seed=1)
    (tmp_path / "app.py").write_text(APP)
    env = f"{tmp_path / 'app.py'}:RowsEnv"
    assert cli.main(["aggregate", str(tmp_path / "all.jsonl"), "--partial-out", str(tmp_path / "p.parquet")]) == 0
    capsys.readouterr()
    assert cli.main(["merge", str(tmp_path / "p.parquet"), "-o", str(tmp_path / "m.json"), "--env", env]) == 2
    err = capsys.readouterr().err
    assert "holds only sample rows" in err and "--with-rows" in err and err.count("\n") == 1
    assert cli.main(["aggregate", str(tmp_path / "all.jsonl"), "--partial-out", str(tmp_path / "p.parquet"), "--env", env]) == 0
    assert cli.main(["merge", str(tmp_path / "p.parquet"), "-o", str(tmp_path / "m.json"), "--env", env, "-q"]) == 0
    assert cli.main(["aggregate", str(tmp_path / "all.jsonl"), "-o", str(tmp_path / "s.json"), "--env", env, "-q"]) == 0
    assert (tmp_path / "m.json").read_bytes() == (tmp_path / "s.json").read_bytes()
    assert json.loads((tmp_path / "m.json").read_text())[0]["agent_metrics"]["longest_answer"] > 0


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rollouts(tmp_path / "a.jsonl")
    assert cli.main(["aggregate", str(tmp_path / "a.jsonl"), "--with-rows"]) == 2
    assert "--with-rows goes with --partial-out" in capsys.readouterr().err
    for flags in (["-o", str(tmp_path / "m.json")], ["--report"], ["--economics", "--expected-rollouts", "4"]):  # they were ignored
        assert cli.main(["aggregate", str(tmp_path / "a.jsonl"), "--partial-out", str(tmp_path / "p.parquet"), *flags]) == 2
        assert "which --partial-out does not write: give them to `gym-metrics merge`" in capsys.readouterr().err
    assert not (tmp_path / "p.parquet").exists()
    assert cli.main(["aggregate", str(tmp_path / "a.jsonl"), str(tmp_path / "a.jsonl")]) == 2
    assert "several inputs" in capsys.readouterr().err
    assert cli.main(["merge", str(tmp_path / "absent.parquet"), "-o", str(tmp_path / "m.json")]) == 2
    assert capsys.readouterr().err == f"error: input file not found: {tmp_path / 'absent.parquet'}\n"
    assert cli.main(["merge", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "m.json")]) == 2
    assert "not a readable partial" in capsys.readouterr().err


def test_merge_writes_the_report_beside_the_metrics(tmp_path: Path) -> None:
    rollouts(tmp_path / "all.jsonl")
    assert cli.main(["aggregate", str(tmp_path / "all.jsonl"), "--partial-out", str(tmp_path / "p.parquet"), "-q"]) == 0
    assert cli.main(["merge", str(tmp_path / "p.parquet"), "-o", str(tmp_path / "run_aggregate_metrics.json"), "-q", "--report"]) == 0
    page = (tmp_path / "run_report.html").read_text()
    assert "<svg" in page and "<script" in page  # the report, not an empty file


def test_aggregate_refuses_one_file_given_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`aggregate a.jsonl ./a.jsonl` would count every rollout twice; it listed each row as a
    duplicate of itself. Refused before reading, naming both arguments."""
    rollouts(tmp_path / "all.jsonl")
    assert cli.main(["aggregate", str(tmp_path / "all.jsonl"), str(tmp_path / "." / "all.jsonl"), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "a file is given twice" in err and "rollouts[1]:" in err and "the same file as rollouts[0]" in err
    assert not (tmp_path / "m.json").exists()


def test_merge_warns_of_skipped_lines_naming_their_input_as_aggregate_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """merge said only "N bad lines skipped": the partial kept the lines without their file."""
    lines = rollouts(tmp_path / "all.jsonl")
    for name, part in (("one", lines[:50]), ("two", lines[50:100]), ("three", lines[100:])):
        (tmp_path / f"{name}.jsonl").write_bytes(b"".join(part[:2]) + b"{oops\n" + b"".join(part[2:]) + b'{"agent_ref": {"na')
    inputs = [str(tmp_path / f"{name}.jsonl") for name in ("one", "two", "three")]
    assert cli.main(["aggregate", *inputs, "-o", str(tmp_path / "single.json"), "--on-bad-line", "skip", "-q"]) == 0
    expected = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: skipped")]
    assert len(expected) == 6 and all(":line 3: json: " in w for w in expected[::2])
    assert cli.main(["aggregate", *inputs[:2], "--partial-out", str(tmp_path / "p12.parquet"), "--on-bad-line", "skip", "-q"]) == 0
    assert cli.main(["aggregate", inputs[2], "--partial-out", str(tmp_path / "p3.parquet"), "--on-bad-line", "skip", "-q"]) == 0
    capsys.readouterr()
    assert cli.main(["merge", str(tmp_path / "p12.parquet"), str(tmp_path / "p3.parquet"), "-o", str(tmp_path / "merged.json")]) == 0
    captured = capsys.readouterr()
    assert [line for line in captured.err.splitlines() if line.startswith("warning: skipped")] == expected
    assert "6 bad lines skipped" in captured.out
    assert (tmp_path / "merged.json").read_bytes() == (tmp_path / "single.json").read_bytes()


def test_only_a_missing_row_text_is_called_a_damaged_partial(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every LookupError was "a partial file is damaged", a KeyError of our own code too."""
    import gym_metrics.aggregate

    rollouts(tmp_path / "all.jsonl")
    assert cli.main(["aggregate", str(tmp_path / "all.jsonl"), "--partial-out", str(tmp_path / "p.parquet"), "-q"]) == 0
    capsys.readouterr()
    for raised, code, said in ((KeyError("mean/reward"), 1, "internal error"), (LookupError("a row that was not kept was read"), 2, "a partial file is damaged")):

        def failing(*args: object, exc: Exception = raised, **kwargs: object) -> None:
            raise exc

        monkeypatch.setattr(gym_metrics.aggregate, "aggregate_partials", failing)
        assert cli.main(["merge", str(tmp_path / "p.parquet"), "-o", str(tmp_path / "m.json")]) == code
        err = capsys.readouterr().err
        assert said in err and ("damaged" in err) == (code == 2), err
