"""A first report without surprises (issue 24, item 7): a verdict only when one is asked for
(--compare, --fail-if-worse-by, --require-better-by), lines drawn in x order, and an interval
of a reward bounded in [0, 1] neither drawn nor printed past the bound."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from gym_metrics.cli import main

from _report_sample import write_rollouts

BRACKETS = re.compile(r"\[(-?[0-9.]+(?:e-?\d+)?), (-?[0-9.]+(?:e-?\d+)?)\]")


def _report(capsys: pytest.CaptureFixture[str], *args: object) -> str:
    out = Path(str(args[0])).with_name("page.html")
    code = main(["report", *map(str, args), "-o", str(out)])
    html = out.read_text()
    shown = re.search(r"Verdict: (\w+)", html)
    assert code == {"FAIL": 1, "INCONCLUSIVE": 3}.get(shown[1] if shown else "", 0)  # the page's verdict, as compare exits
    assert (f"verdict: {shown[1]}" in capsys.readouterr().out) if shown else True
    return html


def _verdict_checks(html: str) -> list[str]:
    """The verdict's checks as listed under it (empty without a verdict)."""
    block = re.search(r'id="verdict">Verdict: \w+</p><ul>(.*?)</ul>', html)
    return re.findall(r"<li>(.*?)</li>", block.group(1)) if block else []


def test_several_agents_without_a_rule_show_no_verdict(three_agents: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was a red "Verdict: FAIL" of whichever agent sorts first (baseline) against the others."""
    html = _report(capsys, three_agents)
    assert "Paired differences" in html and 'data-chart="paired-differences"' in html
    assert 'id="verdict"' not in html and "Verdict:" not in html
    assert "no verdict (--compare, --fail-if-worse-by or --require-better-by asks for one)" in html


def test_a_rule_asks_for_the_verdict_on_the_first_agent(three_agents: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = _report(capsys, three_agents, "--fail-if-worse-by", "0.05")
    checks = _verdict_checks(html)
    assert 'id="verdict"' in html and len(checks) == 2
    assert all("baseline - " in c for c in checks)  # the first agent against the others, as compare gates


def test_compare_gates_each_agent_against_its_namesake(three_agents: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = write_rollouts(tmp_path / "old.jsonl", tasks=60, agents=("candidate",), seed=3)
    assert main(["aggregate", str(other), "-q"]) == 0
    assert "Verdict:" not in _report(capsys, three_agents, "--compare", tmp_path / "old_aggregate_metrics.json")  # a margin is the user's
    html = _report(capsys, three_agents, "--compare", tmp_path / "old_aggregate_metrics.json", "--fail-if-worse-by", "0")
    checks = _verdict_checks(html)
    assert 'id="verdict"' in html and len(checks) == 1, checks
    assert "fail-if-worse-by 0: mean_reward(reward): candidate - old:candidate" in checks[0]
    assert "each agent against the --compare file&#x27;s" in html


def test_compare_with_other_names_gates_every_cross_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = write_rollouts(tmp_path / "new.jsonl", tasks=30, agents=("a", "b"), seed=1)
    old = write_rollouts(tmp_path / "old.jsonl", tasks=30, agents=("c",), seed=2)
    for path in (new, old):
        assert main(["aggregate", str(path), "-q"]) == 0
    html = _report(capsys, tmp_path / "new_aggregate_metrics.json", "--compare", tmp_path / "old_aggregate_metrics.json", "--fail-if-worse-by", "0.1")
    checks = _verdict_checks(html)
    assert sorted(c.split(": ")[1] for c in checks) == ["mean_reward(reward)"] * 2
    assert sum("a - c" in c for c in checks) == 1 and sum("b - c" in c for c in checks) == 1  # never a - b


def test_a_rule_that_cannot_be_judged_is_an_error_not_a_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A rule asked for on a file without per-rollout values, or of one agent, gave no verdict and
    exit 0 (a CI gate passed unseen); a --compare file without them gated the first file's agents
    against each other instead."""
    new = write_rollouts(tmp_path / "new.jsonl", tasks=30, agents=("a", "b"), seed=1)
    one = write_rollouts(tmp_path / "one.jsonl", tasks=30, agents=("a",), seed=2)
    old = write_rollouts(tmp_path / "old.jsonl", tasks=30, agents=("a", "b"), seed=3)
    assert main(["aggregate", str(new), "-q", "--no-rollout-infos", "-o", str(tmp_path / "bare_aggregate_metrics.json")]) == 0
    for path in (new, one, old):
        assert main(["aggregate", str(path), "-q"]) == 0
    assert main(["aggregate", str(old), "-q", "--no-rollout-infos", "-o", str(tmp_path / "oldbare_aggregate_metrics.json")]) == 0
    capsys.readouterr()
    cases = [
        (["bare_aggregate_metrics.json", "--require-better-by", "0.5"], "no per-rollout values for a, b"),
        (["one_aggregate_metrics.json", "--fail-if-worse-by", "0.01"], "one agent only (a): a verdict compares two"),
        (["new_aggregate_metrics.json", "--compare", str(tmp_path / "oldbare_aggregate_metrics.json"), "--fail-if-worse-by", "0.1"],
         "no per-rollout values for oldbare:a, oldbare:b"),
    ]
    for args, why in cases:
        out = tmp_path / "page.html"
        code = main(["report", str(tmp_path / args[0]), *args[1:], "-o", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and f"error: no verdict: {why}" in err, (args, err)
        assert 'id="paired"' in out.read_text() and "Verdict:" not in out.read_text()  # the page's link to it lands
    assert main(["report", str(tmp_path / "bare_aggregate_metrics.json"), str(new), "--require-better-by", "0.5", "-o", str(tmp_path / "p.html")]) in (0, 1, 3)


def test_the_reason_names_the_agent_gated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was always "whether A is worse", whichever agent the candidate, and "-0" for a zero margin."""
    b_minus_a = [1, -1, 1, -1, 0, 0]  # a mean difference of 0 with spread: the interval holds 0, INCONCLUSIVE
    rows = [{"agent_ref": {"name": agent}, "_ng_task_index": t, "_ng_rollout_index": 0, "reward": float(reward)}
            for t, d in enumerate(b_minus_a) for agent, reward in (("b", d > 0), ("a", d < 0))]  # fmt: skip
    new = tmp_path / "new.jsonl"
    new.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["compare", str(new), "--agents", "b", "a", "--fail-if-worse-by", "0"]) == 3
    out = capsys.readouterr().out
    assert "cannot tell whether b is worse by 0" in out and "contains 0:" in out, out
    assert "whether A is" not in out and "contains -0" not in out


def _near_one(path: Path, reward_of: Any, extra: Any = None) -> Path:
    """5 tasks x 4 repeats, rewards near the top: a Student-t interval passes 1."""
    rows = []
    for t in range(5):
        for r in range(4):
            row = {"agent_ref": {"name": "near_one"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": reward_of(t, r)}
            rows.append({**row, **(extra(t, r) if extra else {})})
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    assert main(["aggregate", str(path), "-q"]) == 0
    return path.with_name(path.stem + "_aggregate_metrics.json")


def _ends(html: str) -> list[float]:
    """Every printed or tooltipped interval end [low, high] on the page."""
    return [float(x) for pair in BRACKETS.findall(html) for x in pair]


def test_a_reward_in_0_1_is_not_drawn_or_printed_past_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metrics = _near_one(tmp_path / "run.jsonl", lambda t, r: 0.0 if (t, r) in {(0, 0), (1, 1)} else 1.0)
    agent = json.loads(metrics.read_text())[0]
    raw = agent["agent_metrics"]
    # the metrics file keeps the Student-t ends (unchanged, byte for byte): past 1 here
    assert raw["cluster_ci_high_95/reward"] > 1 and max(r["ci_high_95/reward"] for r in agent["repeat_level_metrics"]) > 1
    html = _report(capsys, metrics)
    ends = _ends(html)
    assert ends and max(ends) <= 1.0 and min(ends) >= 0.0, sorted(ends)[-3:]
    assert re.search(r'<span class="ci">\[0\.\d+, 1\]\*</span>', html)  # cut, and marked
    assert "is cut at 0 and 1, marked *" in html
    assert f"{raw['cluster_ci_high_95/reward']:.4g}" not in html


def test_an_interval_past_a_bound_that_is_not_known_is_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Values beyond [0, 1] (reward 0 or 2), or a field that is not reward-like: no cut."""
    metrics = _near_one(tmp_path / "wide.jsonl", lambda t, r: 0.0 if (t, r) == (0, 0) else 1.0 + (t == 4),
                        extra=lambda t, r: {"latency": 0.99 if (t, r) != (0, 0) else 0.5})  # fmt: skip
    raw = json.loads(metrics.read_text())[0]["agent_metrics"]
    html = _report(capsys, metrics)
    assert f"{raw['cluster_ci_high_95/reward']:.4g}" in html  # reward reaches 2: no bound to cut at
    assert raw["cluster_ci_high_95/latency"] > 1 and f"{raw['cluster_ci_high_95/latency']:.4g}" in html  # in [0, 1], not a reward


def test_lines_are_drawn_in_x_order(three_agents: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A repeat_level_metrics list out of index order (another writer's file) is drawn sorted,
    and every line on the page runs left to right."""
    doc = orjson.loads(three_agents.read_bytes())
    for entry in doc:
        entry["repeat_level_metrics"].reverse()
    shuffled = tmp_path / "shuffled_aggregate_metrics.json"
    shuffled.write_bytes(orjson.dumps(doc))
    html = _report(capsys, shuffled)
    lines = re.findall(r'<polyline class="line" points="([^"]*)"', html)
    assert any(len(p.split()) > 2 for p in lines)
    for points in lines:
        xs = [float(p.split(",")[0]) for p in points.split()]
        assert xs == sorted(xs), points
    for band in re.findall(r'<polygon class="band" points="([^"]*)"', html):
        xs = [float(p.split(",")[0]) for p in band.split()]
        half = len(xs) // 2
        assert xs[:half] == sorted(xs[:half]) and xs[half:] == sorted(xs[half:], reverse=True), band
