"""gym_metrics.compare: verdict rules, the registry of methods (a new method is one class that
`compare`'s text, JSON and verdict render without naming it), the one result type and the old
names that still work."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from gym_metrics.rollouts import RolloutColumns
from gym_metrics.cli import main
from gym_metrics.compare import (
    METHODS,
    CompareMethod,
    CompareOptions,
    Comparison,
    ComparisonReport,
    combine,
    compare_paired,
    fail_if_worse_by,
    gate,
    register_method,
    require_better_by,
    task_rewards,
)
from gym_metrics.errors import NotFoundError


@pytest.mark.parametrize(
    ("low", "high", "worse", "better"),
    [
        (-0.08, -0.03, "FAIL", "FAIL"),  # clearly worse than -0.02
        (-0.01, 0.04, "PASS", "INCONCLUSIVE"),  # no loss of 0.02; a gain of 0.02 not settled
        (-0.03, 0.01, "INCONCLUSIVE", "FAIL"),  # might be worse by 0.02; no gain of 0.02
        (0.03, 0.05, "PASS", "PASS"),  # better by more than 0.02
    ],
)
def test_verdict_rules(low: float, high: float, worse: str, better: str) -> None:
    assert fail_if_worse_by(0.02, low, high, "x").status == worse
    assert require_better_by(0.02, low, high, "x").status == better


def test_combined_verdicts_and_exit_codes() -> None:
    passing, failing = fail_if_worse_by(0.02, 0.0, 0.1, "x"), fail_if_worse_by(0.02, -0.2, -0.1, "y")
    unsure = fail_if_worse_by(0.02, -0.1, 0.1, "z")
    assert combine([passing, passing], 0.975).exit_code == 0
    assert combine([passing, failing, unsure], 0.98).status == "FAIL"
    assert combine([passing, unsure], 0.975).exit_code == 3
    assert combine([failing], 0.95).to_dict()["exit_code"] == 1


@pytest.fixture
def rollouts(tmp_path: Path) -> Path:
    """Two agents, 6 tasks x 2 rollouts: a passes every task, b every other one."""
    rows = [
        {"agent_ref": {"name": name}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float(name == "a" or t % 2 == 0)}
        for name in ("a", "b") for t in range(6) for r in range(2)
    ]  # fmt: skip
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def restore_methods() -> Iterator[None]:
    saved = METHODS.snapshot()
    yield
    METHODS.restore(saved)


def test_a_registered_method_is_run_rendered_and_gated_by_name(
    rollouts: Path, restore_methods: None, capsys: pytest.CaptureFixture[str]
) -> None:
    @register_method("difference_only")
    class DifferenceOnly(CompareMethod):
        """The gap of the task means, with a fixed interval of +-0.1 (a stand-in for a new method)."""

        def run(self, agents: Mapping[str, RolloutColumns], names: Sequence[str], options: CompareOptions) -> ComparisonReport:
            (_, a), (_, b) = (task_rewards(agents[n]) for n in names[:2])
            d = float(a.values.mean() - b.values.mean())
            row = Comparison("mean_reward", names[0], names[1], float(a.values.mean()), float(b.values.mean()), d,
                             d - 0.1, d + 0.1, 0.05, len(a), (), (), stats={"width": 0.2})  # fmt: skip
            return ComparisonReport([row], "", 0.95, 0.05, 0.8, "difference only", self.name)

        def lines(self, report: ComparisonReport, c: Comparison) -> list[str]:
            return [f"{c.name}: {c.difference:+.3f} (width {c.width})"]

    assert METHODS.get("difference_only") is DifferenceOnly
    code = main(["compare", str(rollouts), "--agents", "a", "b", "--method", "difference_only", "--require-better-by", "0.3"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("mean_reward(reward): a - b: +0.500 (width 0.2)\nverdict: PASS")
    assert main(["compare", str(rollouts), "--agents", "a", "b", "--method", "difference_only", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["method"] == "difference only" and data["comparisons"][0]["difference"] == 0.5 and data["verdict"] is None


def test_an_unknown_method_is_named() -> None:
    with pytest.raises(NotFoundError, match="unknown compare method 'nope'; known: bootstrap, paired"):
        METHODS.get("nope")


def test_one_result_type_and_its_old_names(rollouts: Path) -> None:
    from gym_metrics.rollouts import read_rollouts

    agents = read_rollouts(rollouts).agents
    report = compare_paired(agents, ["a", "b"])
    c = report.comparisons[0]
    assert isinstance(c, Comparison) and c.difference == 0.5 and c.p_adjusted == c.p_value
    assert list(c.to_dict())[:3] == ["metric", "field", "agent_a"] and "stats" not in c.to_dict()
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        c.nope  # noqa: B018
    verdict = gate(report, "a", 0.1, None)  # the interval [-0.07, 1.07] lies above -0.1
    assert verdict is not None and verdict.status == "PASS" and verdict.checks[0].comparison == c.name


def test_the_old_module_warns_and_still_works() -> None:
    sys.modules.pop("gym_metrics.paired", None)
    with pytest.warns(DeprecationWarning, match=r"gym_metrics.paired is deprecated; use gym_metrics.compare \(removal in 0.3.0\)"):
        old = importlib.import_module("gym_metrics.paired")
    assert old.compare_paired is compare_paired and old.PairedReport is ComparisonReport
