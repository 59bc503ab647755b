"""A resumed collect runs the failures sidecar's rollouts again as NeMo Gym 0.7.0's resumed
collection does: each rollout not in the output is run again with `_ng_attempt_index` (its failed
attempts so far) unless one of its attempts was terminal or it has had
`NEMO_GYM_MAX_ROLLOUT_ATTEMPTS` (3) of them; the rows NeMo Gym's own `_load_from_cache` dispatches
are recorded by scripts/make_nemo_resume_reference.py. `--reverify-failed` verifies each rollout
of a sidecar holding several attempts once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import cli
from gym_metrics.collector import child_argv
from gym_metrics.collector._shard import Shard

from _flaky_judge import FlakyJudge, flaky_rows as rows
from _transport_helpers import server_in_thread

REFERENCE = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_resume.json").read_text())


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("case", sorted(REFERENCE["cases"]))
@pytest.mark.parametrize("given_by", ["env", "flag"])
def test_resume_runs_the_rollouts_nemo_gym_runs_again(case: str, given_by: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = REFERENCE["cases"][case]["max_attempts_env"]
    expected = REFERENCE["cases"][case]["dispatched"]
    tasks = tmp_path / "in.jsonl"
    _jsonl(tasks, [row | {"response": {"output": []}} for row in REFERENCE["input"]])
    _jsonl(tmp_path / "out.jsonl", REFERENCE["output"])
    _jsonl(tmp_path / "out_failures.jsonl", REFERENCE["sidecar"])
    monkeypatch.delenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", raising=False)
    flag = []
    if limit is not None and given_by == "env":
        monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", limit)
    elif limit is not None:
        flag = ["--max-rollout-attempts", limit]
    with server_in_thread(FlakyJudge()) as address:
        argv = ["collect", "--server", address, "--input", str(tasks), "--output", str(tmp_path / "out.jsonl"), "--resume", *flag]
        assert cli.main(argv) == 0
    ran = _read(tmp_path / "out.jsonl")[len(REFERENCE["output"]):]
    keys = ("_ng_task_index", "_ng_rollout_index", "_ng_attempt_index")
    assert [{k: r[k] for k in keys if k in r} for r in ran] == expected
    assert _read(tmp_path / "out_failures.jsonl") == REFERENCE["sidecar"]  # the earlier attempts stay


def test_a_rollout_that_keeps_failing_is_attempted_up_to_the_limit(tmp_path: Path) -> None:
    """The judge stays down for every fourth row: a cut run, then resumes, each run again until
    its third attempt, each attempt a row of the sidecar (`_ng_attempt_index` 1, 2); the metrics
    are the uncut run's; `--reverify-failed` verifies each of them once."""
    whole, first = tmp_path / "in.jsonl", tmp_path / "first.jsonl"
    whole.write_text("\n".join(rows(40)) + "\n")
    first.write_text("\n".join(rows(40)[:17]) + "\n")  # what a run cut after 17 rows wrote
    with server_in_thread(FlakyJudge()) as address:
        assert cli.main(["collect", "--server", address, "--input", str(whole), "--output", str(tmp_path / "clean.jsonl")]) == 0
        assert cli.main(["collect", "--server", address, "--input", str(first), "--output", str(tmp_path / "cut.jsonl")]) == 0
        resume = ["collect", "--server", address, "--input", str(whole), "--output", str(tmp_path / "cut.jsonl"), "--resume"]
        for _ in range(3):
            assert cli.main(resume) == 0
        attempts: dict[int, list[int]] = {}
        for row in _read(tmp_path / "cut_failures.jsonl"):
            attempts.setdefault(row["_ng_task_index"], []).append(row.get("_ng_attempt_index", 0))
        assert attempts == {task: [0, 1, 2] for task in range(0, 40, 4)}
        assert (tmp_path / "cut_aggregate_metrics.json").read_bytes() == (tmp_path / "clean_aggregate_metrics.json").read_bytes()
        again = ["collect", "--server", address, "--output", str(tmp_path / "cut.jsonl"), "--reverify-failed"]
        assert cli.main(again) == 0  # they failed again (the judge is still down): each once in the new sidecar
    assert sorted(r["_ng_task_index"] for r in _read(tmp_path / "cut_failures.jsonl")) == list(range(0, 40, 4))


def test_a_shard_of_a_run_not_resumed_attempts_each_rollout_once(tmp_path: Path) -> None:
    """A shard always continues its file (started again after a crash): in a run the user did
    not resume, its failed rollouts are not run again."""
    final = tmp_path / "out.jsonl"
    fresh = child_argv(["collect", "--processes", "2", "--output", str(final)], Shard(0, 2), final)
    assert fresh[-3:] == ["--resume", "--max-rollout-attempts", "1"]
    resumed = child_argv(["collect", "--processes", "2", "--output", str(final), "--resume"], Shard(0, 2), final)
    assert "--max-rollout-attempts" not in resumed


@pytest.mark.parametrize(
    ("argv_tail", "env", "words"),
    [
        (["--max-rollout-attempts", "2"], None, "give it with --resume"),
        (["--resume"], "zero", "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"),
        (["--resume"], "0", "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"),
    ],
)
def test_bad_attempt_limits_are_refused(
    argv_tail: list[str], env: str | None, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if env is not None:
        monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", env)
    (tmp_path / "in.jsonl").write_text(rows(1)[0] + "\n")
    code = cli.main(["collect", "--server", "127.0.0.1:1", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "o.jsonl"), *argv_tail])
    assert code == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_an_agent_whose_every_rollout_is_in_the_sidecar_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its judge down for every row (a judged config served without its judge): nothing scored,
    the metrics empty, and collect said success (exit 0)."""
    rows_in = tmp_path / "in.jsonl"
    rows_in.write_text("".join(json.dumps({**json.loads(line), "judge_down": True}) + "\n" for line in rows(6)))
    with server_in_thread(FlakyJudge()) as address:
        code = cli.main(["collect", "--server", address, "--input", str(rows_in), "--output", str(tmp_path / "out.jsonl")])
    err = capsys.readouterr().err
    assert code == 3
    assert f"error: agent a: 6 of 6 rollouts failed verification (judge_failed: 6) — none scored: see {tmp_path / 'out_failures.jsonl'}" in err


def test_a_sidecar_the_columnar_reader_refuses_is_read_row_by_row(tmp_path: Path) -> None:
    """The sidecar is read column-wise (its rows' responses never parsed); a field of another
    type than that reader expects (a terminal mark written as text) is read row by row, alike."""
    from gym_metrics.collector._outfile import _sidecar_attempts

    plain = tmp_path / "plain.jsonl"
    _jsonl(plain, REFERENCE["sidecar"])
    odd = tmp_path / "odd.jsonl"
    _jsonl(odd, [*REFERENCE["sidecar"], {"_ng_task_index": 9, "_ng_rollout_index": 0, "_ng_failure_terminal": "yes"}])

    def expected(default: str) -> list[tuple[tuple[str, int, int] | None, bool]]:
        return [((r.get("agent_ref", {}).get("name", default), r["_ng_task_index"], 0) if "_ng_task_index" in r else None, bool(r.get("_ng_failure_terminal")))
                for r in REFERENCE["sidecar"]]  # fmt: skip

    assert _sidecar_attempts(plain, None) == expected("")
    assert _sidecar_attempts(odd, "dflt") == [*expected("dflt"), (("dflt", 9, 0), True)]
