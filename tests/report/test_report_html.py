"""The report's HTML without a browser: sections, self-containment, --compare, the CLI hooks,
and the size at 125k tasks."""

from __future__ import annotations

import json
import re
import time
import warnings
from pathlib import Path

import numpy as np
import orjson
import pytest

from gym_metrics.cli import main
from gym_metrics.report import AgentData, Gates, build_report, render, report_path_for

from _report_sample import write_rollouts

CHARTS = ("key-metrics", "reward-distribution", "task-heatmap-overview", "pass-at-k", "repeats", "usage-frontier", "usage-vs-reward",
          "paired-differences")


def charts(html: str) -> list[str]:
    return re.findall(r'data-chart="([^"]+)"', html)


def test_every_section_is_drawn_for_three_agents(three_agents: Path, tmp_path: Path) -> None:
    out = build_report(three_agents, tmp_path / "r.html")
    html = out.read_text()
    assert set(charts(html)) == set(CHARTS)
    assert charts(html).count("usage-vs-reward") == 2  # total_tokens, output_tokens
    data = orjson.loads(re.search(r'id="task-data">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert data["agents"] == ["baseline", "candidate", "long_context"]
    assert data["tasks"] == [str(t) for t in range(60)]  # text: JS numbers lose integers past 2^53
    assert all(len(m) == 60 for m in data["means"])
    assert data["samples"][0]["0"].startswith("{")
    assert 'id="verdict"' not in html and "Verdict" not in html  # nobody asked for one (issue 24)
    assert "no verdict (--compare, --fail-if-worse-by or --require-better-by asks for one)" in html


def test_the_page_references_nothing_outside_itself(three_agents: Path, tmp_path: Path) -> None:
    html = build_report(three_agents, tmp_path / "r.html").read_text()
    assert not re.search(r'(src|href)\s*=\s*"(?!#|data:)', html), "a src/href that is not an anchor or data: URL"
    assert "@import" not in html and "url(" not in html
    assert "<script src" not in html


def test_compare_puts_the_other_files_agents_beside_and_pairs_them(three_agents: Path, tmp_path: Path) -> None:
    other = write_rollouts(tmp_path / "next_run.jsonl", tasks=60, agents=("candidate",), seed=3)
    assert main(["aggregate", str(other), "-q"]) == 0
    out = tmp_path / "r.html"
    code = main(["report", str(three_agents), "--compare", str(tmp_path / "next_run_aggregate_metrics.json"), "-o", str(out)])
    assert code == 0
    html = out.read_text()
    assert "next_run:candidate" in html  # same name in both files: prefixed with the other file's stem
    assert html.count('class="pt"') > 0 and "Paired differences" in html


def test_without_rollout_infos_pass_at_k_needs_the_rollouts(tmp_path: Path) -> None:
    rollouts = write_rollouts(tmp_path / "run.jsonl", tasks=10)
    assert main(["aggregate", str(rollouts), "--no-rollout-infos", "-q"]) == 0
    metrics = tmp_path / "run_aggregate_metrics.json"
    bare = build_report(metrics, tmp_path / "bare.html").read_text()
    assert "pass-at-k" not in charts(bare) and "paired-differences" not in charts(bare)
    full = build_report(metrics, tmp_path / "full.html", rollouts=rollouts).read_text()
    assert {"pass-at-k", "paired-differences"} <= set(charts(full))


def test_rollouts_read_as_their_metrics_counted_failures(tmp_path: Path) -> None:
    """With --count-errors-as-zero --no-rollout-infos the report read the rollouts file without
    the failures the metrics counted as 0 (the file does not record the option)."""
    from gym_metrics.report._data import load_metrics

    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": 1.0} for t in range(3) for r in range(2)]
    rows[2] = {k: v for k, v in rows[2].items() if k != "reward"} | {"_gm_error": {"kind": "verify_failed", "message": "x"}}
    rollouts = tmp_path / "run.jsonl"
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen = {}
    for counted in (True, False):
        assert main(["aggregate", str(rollouts), "--no-rollout-infos", "-q", "-o", str(tmp_path / f"{counted}.json"), *(["--count-errors-as-zero"] * counted)]) == 0
        [agent] = load_metrics(tmp_path / f"{counted}.json", rollouts=rollouts)
        tasks, rewards = agent.task_rewards("reward")  # type: ignore[misc]
        seen[counted] = rewards.values.tolist()
        assert float(np.mean(rewards.values)) == pytest.approx(agent.agent_metrics["mean/reward"])  # the page's numbers are the file's
    assert seen == {True: [1.0, 1.0, 0.0, 1.0, 1.0, 1.0], False: [1.0, 1.0, 1.0, 1.0, 1.0]}


def test_rollouts_read_as_counted_with_null_rewards_and_masked_failures(tmp_path: Path) -> None:
    """num_rollouts counts null-reward rows too (and, with --count-errors-as-zero, masked failed
    rows): the report took the option to be off when on and on when off, and its pass@k and
    paired differences disagreed with the metrics file."""
    from gym_metrics.report._data import load_metrics

    err = {"_gm_error": {"kind": "verify_failed", "message": "x"}}
    rows = []
    for agent in ("a", "b"):
        for t in range(6):
            row = lambda r, **k: {"agent_ref": {"name": agent}, "_ng_task_index": t, "_ng_rollout_index": r, **k}  # noqa: E731
            rows += [row(0, reward=1.0), row(1, reward=float(t % 2) if agent == "a" else 0.0), row(2, **err), row(3, reward=None)]
            rows += [row(4, mask_sample=True, **err)] if t == 0 else []
    rollouts = tmp_path / "run.jsonl"
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for counted in (True, False):
        metrics = tmp_path / f"{counted}.json"
        assert main(["aggregate", str(rollouts), "--no-rollout-infos", "-q", "-o", str(metrics), *(["--count-errors-as-zero"] * counted)]) == 0
        doc = json.loads(metrics.read_text())
        for agent, entry in zip(load_metrics(metrics, rollouts=rollouts), doc):
            tasks, rewards = agent.task_rewards("reward")  # type: ignore[misc]
            file_means = [g["mean/reward"] for g in entry["group_level_metrics"]]
            assert [float(np.mean(x)) for x in rewards] == pytest.approx(file_means)
        html = build_report(metrics, tmp_path / f"{counted}.html", rollouts=rollouts).read_text()
        values = re.search(r"<summary>values</summary>(.*?)</details>", html, re.S).group(1)  # type: ignore[union-attr]
        pass1 = {a: float(v) for a, v in re.findall(r"<tr><td>(\w)</td><td>1</td><td>(.*?)</td>", values)}
        task_means = {e["agent_ref"]["name"]: np.mean([g["mean/reward"] for g in e["group_level_metrics"]]) for e in doc}
        assert pass1 == pytest.approx(task_means, abs=1e-4)
        paired = re.search(r"<tr><td>a - b</td><td>(.*?)</td>", html[html.index('id="paired"'):]).group(1)  # type: ignore[union-attr]
        assert float(paired) == pytest.approx(task_means["a"] - task_means["b"], abs=1e-4)


def test_economics_are_tabled_when_aggregated_with_them(tmp_path: Path) -> None:
    rollouts = write_rollouts(tmp_path / "run.jsonl", tasks=8)
    assert main(["aggregate", str(rollouts), "--economics", "-q"]) == 0
    html = build_report(tmp_path / "run_aggregate_metrics.json").read_text()
    assert "<h3>Economics</h3>" in html and "tokens per passing task" in html


def test_aggregate_report_flag_writes_it_beside_the_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rollouts = write_rollouts(tmp_path / "run.jsonl", tasks=8, agents=("solo",))
    assert main(["aggregate", str(rollouts), "--report"]) == 0
    beside = tmp_path / "run_report.html"
    assert beside.is_file() and f"report   -> {beside}" in capsys.readouterr().out
    assert report_path_for(tmp_path / "run_aggregate_metrics.json") == beside
    html = beside.read_text()
    assert "paired-differences" not in charts(html)  # one agent: nothing to pair
    assert {"key-metrics", "pass-at-k", "repeats"} <= set(charts(html))


def test_bad_inputs_exit_2(tmp_path: Path) -> None:
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "x.json").write_text('{"not": "metrics"}')
    assert main(["report", str(tmp_path / "x.json")]) == 2


def _big_agent(name: str, tasks: int, rng: np.random.Generator) -> AgentData:
    means = np.round(rng.random(tasks) * 8) / 8
    return AgentData(
        name=name, agent_metrics={"mean/reward": float(means.mean())}, key_metrics={"mean/reward": float(means.mean())},
        tasks=np.arange(tasks, dtype=np.int64), task_mean=means, rollouts=None,
        usage={"total_tokens": rng.integers(100, 5000, tasks).astype(float)},
        samples={i: '{"reward": 1.0, "text": "' + "x" * 1900 + '"}' for i in range(400)},
    )  # fmt: skip


def test_125k_tasks_stay_under_20_mb() -> None:
    rng = np.random.default_rng(0)
    agents = [_big_agent(n, 125_000, rng) for n in ("a", "b", "c")]
    started = time.perf_counter()
    html = render(agents, "reward", Gates(), "big")
    elapsed = time.perf_counter() - started
    assert len(html.encode()) < 20e6, f"{len(html.encode()) / 1e6:.1f} MB"
    assert charts(html).count("task-heatmap-overview") == 1
    assert html.count('class="cell"') == 3 * 100  # aggregated to 100 bins, not 125k cells
    assert elapsed < 60  # a bound against a quadratic slip, not a benchmark (scripts/bench_report.py)


def test_degenerate_agents_still_give_a_page(tmp_path: Path) -> None:
    """One rollout, an agent with every rollout masked, rewards that are text or null."""
    rows = [
        {"agent_ref": {"name": "one"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1},
        {"agent_ref": {"name": "masked"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1, "mask_sample": True},
        {"agent_ref": {"name": "weird"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": "1.0"},
        {"agent_ref": {"name": "weird"}, "_ng_task_index": 1, "_ng_rollout_index": 0, "reward": None},
    ]
    src = tmp_path / "edge.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    assert main(["aggregate", str(src), "-q"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning on empty or all-NaN tasks
        html = build_report(tmp_path / "edge_aggregate_metrics.json").read_text()
    assert {"key-metrics", "reward-distribution", "task-heatmap-overview"} <= set(charts(html))
    assert "One rollout index only" in html
    assert "Paired differences" in html  # the reason it cannot pair them, not a crash



def test_text_from_the_rows_cannot_break_out_of_the_page(tmp_path: Path) -> None:
    evil = "</script><!--<script>alert(1)</script>"
    rows = [{"agent_ref": {"name": "<b>agent</b>"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": 1.0, "note": evil}
            for t in range(3) for r in range(2)]  # fmt: skip
    src = tmp_path / "evil.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    assert main(["aggregate", str(src), "-q"]) == 0
    html = build_report(tmp_path / "evil_aggregate_metrics.json").read_text()
    assert "<script>alert" not in html and "<b>agent" not in html
    block = re.search(r'id="task-data">(.*?)</script>', html, re.S).group(1)  # type: ignore[union-attr]
    data = orjson.loads(block)
    assert data["agents"] == ["<b>agent</b>"] and evil in data["samples"][0]["0"]


def test_the_verdict_takes_compares_rules(three_agents: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    code = main(["report", str(three_agents), "--require-better-by", "0.5", "-o", str(out)])
    html = out.read_text()
    assert "Verdict: FAIL" in html and code == 1  # exits as compare does
    assert "require-better-by" in html and "fail-if-worse-by" not in html  # a rule given: no default rule
    assert main(["report", str(three_agents), "--fail-if-worse-by", "-1"]) == 2


def test_a_field_no_agent_has_is_named(three_agents: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--field rewrad` wrote an empty page and exited 0."""
    assert main(["report", str(three_agents), "--field", "rewrad"]) == 2
    assert "no agent has the field 'rewrad' (--field); its fields:" in capsys.readouterr().err


def test_task_indices_past_2_to_the_53_stay_exact_on_the_page(tmp_path: Path) -> None:
    """JS numbers hold integers exactly only to 2^53: two tasks 2^60+1 and 2^60+2 showed as one
    number, and their samples were not found."""
    big = 2**60
    src = tmp_path / "big.jsonl"
    src.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": big + t, "_ng_rollout_index": 0, "reward": float(t % 2)}) + "\n" for t in (1, 2)))
    assert main(["aggregate", str(src), "-q"]) == 0
    out = tmp_path / "page.html"
    assert main(["report", str(tmp_path / "big_aggregate_metrics.json"), "-o", str(out)]) == 0
    block = re.search(r'id="task-data">(.*?)</script>', out.read_text(), re.S).group(1)  # type: ignore[union-attr]
    data = orjson.loads(block)
    assert data["tasks"] == [str(big + 1), str(big + 2)] and set(data["samples"][0]) == {str(big + 1), str(big + 2)}


def test_the_rollouts_section_reads_rows_holding_nan_as_aggregate_does(tmp_path: Path) -> None:
    """Python's json writes NaN and Infinity, and aggregate reads them: the Rollouts section
    dropped every such row as "not a rollout row of these agents"."""
    src = tmp_path / "run.jsonl"
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": 0, "reward": float(t % 2),
             "response": {"output": [], "usage": {"total_tokens": float("nan") if t else 3}}} for t in range(4)]  # fmt: skip
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["aggregate", str(src), "-q", "--report"]) == 0
    html = (tmp_path / "run_report.html").read_text()
    assert "not rollout rows of these agents" not in html
    assert all(f"task {t} · mean reward" in html for t in range(4)), [t for t in range(4) if f"task {t} · mean reward" not in html]
