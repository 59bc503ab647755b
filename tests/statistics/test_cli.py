"""`gym-metrics compare` and `gym-metrics plan` end to end on small generated rollout files:
verdict exit codes (0 PASS, 1 FAIL, 3 INCONCLUSIVE, 2 bad input), the --json shape, two-file
input and its task check, McNemar, adjusted p-values."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gym_metrics.cli import main
from gym_metrics.statistics import holm, paired_difference


def rows(agent: str, rewards: np.ndarray, first_task: int = 0) -> list[dict[str, Any]]:
    return [
        {"agent_ref": {"name": agent}, "_ng_task_index": first_task + t, "_ng_rollout_index": r, "reward": float(v)}
        for t, task in enumerate(rewards)
        for r, v in enumerate(task)
    ]


def write(path: Path, *parts: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for part in parts for r in part))
    return path


def suite(tasks: int, repeats: int, shifts: Sequence[float], seed: int = 0) -> list[np.ndarray]:
    """Binary rewards of agents whose pass probability is a shared task skill + a shift."""
    rng = np.random.default_rng(seed)
    skill = rng.uniform(0.1, 0.9, tasks)[:, None]
    return [(rng.uniform(0, 1, (tasks, repeats)) < np.clip(skill + s, 0, 1)).astype(float) for s in shifts]


@pytest.fixture
def three(tmp_path: Path) -> Path:
    """a beats b by ~0.1, c is ~0.15 worse than b: 400 tasks x 4 repeats."""
    a, b, c = suite(400, 4, [0.1, 0.0, -0.15])
    return write(tmp_path / "r.jsonl", rows("a", a), rows("b", b), rows("c", c))


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_shape_and_numbers(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "compare", three, "--agents", "a", "b", "c", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["adjust"] == "holm" and data["confidence"] == 0.95 and data["verdict"] is None
    pairs = [(c["agent_a"], c["agent_b"]) for c in data["comparisons"]]
    assert pairs == [("a", "b"), ("a", "c"), ("b", "c")]
    first = data["comparisons"][0]
    assert set(first) >= {"difference", "standard_error", "ci_low", "ci_high", "df", "p_value", "p_adjusted", "mde",
                          "variance", "mcnemar", "common_tasks", "repeats_a", "repeats_b"}  # fmt: skip
    assert first["df"] == 399 and first["common_tasks"] == 400 and first["mcnemar"] is None
    a, b, _ = suite(400, 4, [0.1, 0.0, -0.15])
    ref = paired_difference(a.mean(1), b.mean(1))
    assert first["difference"] == pytest.approx(ref.difference) and first["p_value"] == pytest.approx(ref.p_value)
    raw = np.array([c["p_value"] for c in data["comparisons"]])
    assert [c["p_adjusted"] for c in data["comparisons"]] == pytest.approx(holm(raw).tolist())
    assert 0 < first["mde"] < 0.1


def test_bh_and_several_metrics(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "compare", three, "--agents", "a", "b", "--reducer", "mean_reward", "pass@2",
                       "--adjust", "bh", "--json")  # fmt: skip
    data = json.loads(out)
    assert code == 0 and data["adjust"] == "bh"
    assert [c["metric"] for c in data["comparisons"]] == ["mean_reward", "pass@2"]


@pytest.mark.parametrize(
    ("flags", "expected", "status"),
    [
        (["--agents", "a", "b", "--fail-if-worse-by", "0.02"], 0, "PASS"),
        (["--agents", "c", "b", "--fail-if-worse-by", "0.02"], 1, "FAIL"),
        (["--agents", "a", "b", "--require-better-by", "0.3"], 1, "FAIL"),
        (["--agents", "a", "b", "--require-better-by", "0.02"], 0, "PASS"),
        (["--agents", "a", "b", "c", "--fail-if-worse-by", "0.02"], 0, "PASS"),
        (["--agents", "c", "a", "b", "--fail-if-worse-by", "0.02"], 1, "FAIL"),
    ],
)
def test_verdict_exit_codes(three: Path, capsys: pytest.CaptureFixture[str], flags: list[str], expected: int, status: str) -> None:
    code, out, _ = cli(capsys, "compare", three, *flags)
    assert code == expected and f"verdict: {status}" in out
    code, out, _ = cli(capsys, "compare", three, *flags, "--json")
    verdict = json.loads(out)["verdict"]
    assert code == expected and verdict["status"] == status and verdict["exit_code"] == expected
    assert all(c["comparison"].startswith(f"mean_reward(reward): {flags[1]} - ") for c in verdict["checks"])


def test_inconclusive_when_the_data_cannot_tell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = suite(30, 1, [0.0, 0.0], seed=5)
    src = write(tmp_path / "small.jsonl", rows("a", a), rows("b", b))
    code, out, _ = cli(capsys, "compare", src, "--agents", "a", "b", "--fail-if-worse-by", "0.01")
    assert code == 3 and "verdict: INCONCLUSIVE" in out and "contains -0.01" in out
    assert "McNemar exact:" in out  # one binary rollout per task each


def test_bootstrap_method_keeps_working_and_gates(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "compare", three, "--agents", "a", "b", "--method", "bootstrap", "--resamples", "300",
                       "--fail-if-worse-by", "0.02", "--json")  # fmt: skip
    data = json.loads(out)
    assert code == 0 and data["method"].startswith("paired bootstrap") and data["verdict"]["status"] == "PASS"
    code, _, err = cli(capsys, "compare", three, "--agents", "a", "b", "c", "--method", "bootstrap")
    assert code == 2 and "two agents" in err


def test_a_bootstrap_gate_of_two_checks_uses_its_bonferroni_interval(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The verdict said "Bonferroni over 2 checks" and gated on the 95% interval; each check's
    interval is now the 97.5% percentile interval of the same resampled differences."""
    args = ["compare", three, "--agents", "a", "b", "--method", "bootstrap", "--resamples", "400", "--seed", "7", "--json"]
    _, out, _ = cli(capsys, *args)
    one = json.loads(out)
    _, out, _ = cli(capsys, *args, "--fail-if-worse-by", "0.02", "--require-better-by", "0.0")
    two = json.loads(out)
    assert two["verdict"]["confidence"] == 0.975 and "differences" not in two
    reasons = [c["reason"] for c in two["verdict"]["checks"]]
    low, high = (float(x) for x in reasons[0].split("[")[1].split("]")[0].split(", "))
    assert low < one["ci_low"] and high > one["ci_high"]  # wider than the 95% interval of the same resamples


def test_two_files_match_tasks_and_refuse_a_mismatch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = suite(50, 1, [0.2, 0.0], seed=2)
    fa = write(tmp_path / "A.jsonl", rows("model", a))
    fb = write(tmp_path / "B.jsonl", rows("model", b[:-3]), rows("model", b[-1:], first_task=90))
    code, _, err = cli(capsys, "compare", fa, fb)
    assert code == 2 and err.count("\n") == 1
    assert f"{fa} and {fb} hold different tasks" in err and "3 only in" in err and "1 only in" in err and "--common-tasks" in err
    code, out, _ = cli(capsys, "compare", fa, fb, "--common-tasks", "--json")
    data = json.loads(out)["comparisons"][0]
    assert code == 0 and data["common_tasks"] == 47 and (data["agent_a"], data["agent_b"]) == (str(fa), str(fb))
    assert data["mcnemar"] is not None and data["mcnemar"]["p_value"] <= 1
    fb2 = write(tmp_path / "B2.jsonl", rows("other", b))
    code, out, _ = cli(capsys, "compare", fa, fb2, "--agents", "new", "old", "--json")
    assert code == 0 and json.loads(out)["comparisons"][0]["agent_a"] == "new"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agents", "a", "zz"], "unknown agent 'zz'"),
        (["--agents", "a"], "at least two distinct agents"),
        ([], "name the agents to compare with --agents A B [...] (it holds a, b, c)"),
        (["--agents", "a", "b", "--fail-if-worse-by", "-1"], "must be a finite number >= 0"),
        (["--agents", "a", "b", "--alpha", "2"], "must be between 0 and 1"),
        (["--agents", "a", "b", "--method", "bootstrap", "--alpha", "0.1"], "the bootstrap's interval is always 95%"),
    ],
)
def test_bad_input_exits_2_in_one_line(three: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = cli(capsys, "compare", three, *args)
    assert code == 2 and message in err and "Traceback" not in err


def test_a_file_of_one_agent_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was "name the agents to compare with --agents A B" for a file holding one agent."""
    a, _ = suite(5, 1, [0.0, 0.0])
    code, _, err = cli(capsys, "compare", write(tmp_path / "A.jsonl", rows("a", a)))
    assert code == 2 and "holds 1 agent (a): compare needs two (give a second rollouts file)" in err


def test_a_bad_line_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = suite(5, 1, [0.0, 0.0])
    fa = write(tmp_path / "A.jsonl", rows("a", a))
    fb = tmp_path / "B.jsonl"
    fb.write_text("".join(json.dumps(r) + "\n" for r in rows("b", b)) + "{not json\n")
    code, _, err = cli(capsys, "compare", fa, fb)
    assert code == 2 and str(fb) in err and "line 6" in err
    code, _, err = cli(capsys, "compare", fa, tmp_path / "missing.jsonl")
    assert code == 2 and err == f"error: input file not found: {tmp_path / 'missing.jsonl'}\n"


def test_plan_table_and_json(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "plan", "--baseline-rollouts", three, "--agents", "b", "--mde", "0.02", "--repeats", "3")
    assert code == 0 and "tasks needed" in out and "3 *" in out and "assumed task correlation 0.5" in out
    code, out, _ = cli(capsys, "plan", "--baseline-rollouts", three, "--agents", "a", "b", "--mde", "0.05", "--json")
    data = json.loads(out)
    assert code == 0 and data["agents"] == ["a", "b"] and data["correlation"] is None
    assert [r["repeats"] for r in data["rows"]] == [1, 2, 4, 8, 16, 32]
    tasks = [r["tasks"] for r in data["rows"]]
    assert tasks == sorted(tasks, reverse=True)
    code, _, err = cli(capsys, "plan", "--baseline-rollouts", three, "--mde", "0.02")
    assert code == 2 and "holds 3 agents" in err
    code, _, err = cli(capsys, "plan", "--baseline-rollouts", three, "--agents", "b", "--mde", "0")
    assert code == 2 and "--mde" in err


def test_json_prints_alpha_as_given(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """1 - (1 - 0.05) is 0.050000000000000044 in floats: the report keeps the alpha given."""
    for alpha in ("0.05", "0.1", "0.01"):
        code, out, _ = cli(capsys, "compare", three, "--agents", "a", "b", "--alpha", alpha, "--json")
        assert code == 0
        assert f'"alpha": {alpha}' in out
        data = json.loads(out)
        assert data["alpha"] == float(alpha) and data["confidence"] == 1 - float(alpha)


def test_lines_skipped_by_on_bad_line_skip_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compare and plan skipped bad lines without a word, where the docs (and aggregate) list them."""
    a, b = suite(20, 2, [0.0, 0.0])
    path = write(tmp_path / "r.jsonl", rows("a", a), rows("b", b))
    with path.open("a") as f:
        f.write("{not json\n")
    for args in (("compare", path, "--agents", "a", "b"), ("plan", "--baseline-rollouts", path, "--agents", "a", "--mde", "0.1")):
        code, _, err = cli(capsys, *args, "--on-bad-line", "skip")
        assert code == 0 and f"warning: skipped {path}:line 81" in err, err


def test_a_baseline_without_spread_cannot_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """B = A - 0.25 on every task (the sd of the differences is float noise, ~1e-17), or one
    agent passing every rollout: the variance model has nothing to work with, and plan said 2 or
    3 tasks detect any difference. It says it cannot plan, naming why (exit 2)."""
    base = np.random.default_rng(3).uniform(0.3, 0.9, (50, 1))
    gap = write(tmp_path / "gap.jsonl", rows("a", base), rows("b", base - 0.25))
    code, _, err = cli(capsys, "plan", "--baseline-rollouts", gap, "--agents", "a", "b", "--mde", "0.1", "--json")
    assert code == 2 and "the baseline shows no spread in 'reward'" in err and "differ by the same amount on every task" in err
    saturated = write(tmp_path / "saturated.jsonl", rows("base", np.ones((20, 4))))
    code, _, err = cli(capsys, "plan", "--baseline-rollouts", saturated, "--mde", "0.01")
    assert code == 2 and "every task's rollouts score alike" in err


def test_a_difference_without_spread_has_no_interval_p_or_mde_and_gates_inconclusive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two tasks that A fails and B passes: every per-task difference is -1, so se is 0; compare
    printed the interval [-1, -1], p 0 and MDE 0 and FAILED the gate, while McNemar's exact p is
    0.5 (statsmodels' too). No spread, no t test: n/a (null in JSON), said why, INCONCLUSIVE;
    the other comparisons' p-values are adjusted among the tests made."""
    path = write(tmp_path / "r.jsonl", rows("new", np.zeros((2, 1))), rows("old", np.ones((2, 1))), rows("mid", np.array([[1.0], [0.0]])))
    code, out, _ = cli(capsys, "compare", path, "--agents", "new", "old", "--fail-if-worse-by", "0.5")
    assert code == 3, out
    assert "CI [n/a, n/a]" in out and "p n/a" in out and "|difference| >= n/a" in out
    assert "every one of the 2 tasks differs by the same amount" in out and "INCONCLUSIVE" in out and "McNemar exact" in out
    code, out, _ = cli(capsys, "compare", path, "--agents", "new", "old", "mid", "--json")
    by_pair = {(c["agent_a"], c["agent_b"]): c for c in json.loads(out)["comparisons"]}
    flat = by_pair[("new", "old")]
    assert (flat["difference"], flat["ci_low"], flat["ci_high"], flat["p_value"], flat["p_adjusted"], flat["mde"]) == (-1.0, None, None, None, None, None)
    assert flat["mcnemar"]["p_value"] == 0.5
    made = [c for c in by_pair.values() if c["p_value"] is not None]
    assert len(made) == 2 and [c["p_adjusted"] for c in made] == pytest.approx(list(holm(np.array([c["p_value"] for c in made]))))
