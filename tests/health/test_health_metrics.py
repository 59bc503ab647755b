"""Health feeds the metrics file (issue 40): `collect --health` and `gym-metrics health --metrics`
write each agent's verdict counts and findings per check into `<stem>_aggregate_metrics.json`
as its `health` section, every other byte of the file as it was."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from gym_metrics.cli import main as cli_main
from gym_metrics.health import CHECKS, Health, check_health

DATA = (Path(__file__).parents[1] / "data" / "health").resolve()
BLOCK = re.compile(rb',\n    "health": \{\n(?:      [^\n]*\n)*?    \}')
"""The section as the metrics file holds it (last in its agent's entry)."""


async def test_collect_health_writes_the_counts_into_the_metrics_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1] / "collector"))
    from test_collect_generate import collect_with_trajectory_and_health

    written: dict[str, bytes] = {}
    add = Health.add_to_metrics

    def keep_then_add(self: Health, metrics: Path, default_agent: str | None = None) -> dict[str, dict[str, Any]]:
        written["before"] = metrics.read_bytes()  # what collect wrote, before the section
        return add(self, metrics, default_agent)

    monkeypatch.setattr(Health, "add_to_metrics", keep_then_add)
    out = tmp_path / "run" / "out.jsonl"
    out.parent.mkdir()
    await collect_with_trajectory_and_health(tmp_path, out, 3)
    metrics = out.with_name("out_aggregate_metrics.json")
    summary = json.loads((out.parent / "quality_summary.json").read_text())["run"]
    (entry,) = orjson.loads(metrics.read_bytes())
    assert entry["health"] == {"records": summary["artifacts"]["records"], "verdicts": summary["verdicts"], "issues": summary["issues"],
                               "ignored_checks": []}  # fmt: skip
    assert entry["health"]["verdicts"] == {"healthy": 3, "unhealthy": 0, "unobserved": 0} and list(entry)[-1] == "health"
    assert BLOCK.sub(b"", metrics.read_bytes()) == written["before"]  # every other key and number byte for byte


def _rows() -> list[bytes]:
    """The fault cases (agent a), the rows without trajectory (agent b), two rows naming no agent."""
    faults = []
    for line in (DATA / "faults.jsonl").read_bytes().splitlines():
        try:
            faults.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    plain = [json.loads(line) for line in (DATA / "no_trajectory.jsonl").read_text().splitlines()]
    rows = [{**r, "agent_ref": {"name": "a"}} for r in faults if isinstance(r, dict) and isinstance(r.get("_ng_task_index"), int)]
    rows += [{**r, "agent_ref": {"name": 'b<"x">'}, "_ng_task_index": 1000 + n} for n, r in enumerate(plain)]
    rows += [{k: v for k, v in r.items() if k != "agent_ref"} | {"_ng_task_index": 2000 + n} for n, r in enumerate(plain[:2])]
    return [orjson.dumps(r) for r in rows]


def test_health_metrics_adds_each_agents_counts_and_replaces_them_when_run_again(tmp_path: Path) -> None:
    rollouts = tmp_path / "run.jsonl"
    rollouts.write_bytes(b"\n".join(_rows()) + b"\n")
    scored = tmp_path / "scored.jsonl"  # aggregate refuses the fault cases' duplicates: the agents' metrics from other rows
    scored.write_text("".join(json.dumps({"agent_ref": {"name": n}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}) + "\n" for n in ("a", 'b<"x">')))
    assert cli_main(["aggregate", str(scored), "-q"]) == 0
    metrics = tmp_path / "scored_aggregate_metrics.json"
    before = metrics.read_bytes()
    args = ["health", str(rollouts), "-o", str(tmp_path / "h"), "--metrics", str(metrics), "--agent", "a", "--ignore", "model_call_failed"]
    assert cli_main(args) == 0
    once = metrics.read_bytes()
    blocks = {e["agent_ref"]["name"]: e["health"] for e in orjson.loads(once)}
    run = json.loads((tmp_path / "h" / "quality_summary.json").read_text())["run"]
    assert blocks['b<"x">'] == {"records": 6, "verdicts": {"healthy": 0, "unhealthy": 0, "unobserved": 6},
                                "issues": dict.fromkeys(CHECKS, 0), "ignored_checks": ["model_call_failed"]}  # fmt: skip
    assert blocks["a"]["records"] == run["artifacts"]["records"] - 6  # the fault rows and the two naming no agent
    for key in ("verdicts", "issues"):  # the agents' counts add up to the run's (no task spans both)
        assert {k: blocks["a"][key][k] + blocks['b<"x">'][key][k] for k in run[key]} == run[key]
    assert blocks["a"]["issues"]["rollout_duplicate_identity"] > 0 and blocks["a"]["issues"]["model_call_failed"] == 0
    assert BLOCK.sub(b"", once) == before
    assert cli_main(args) == 0 and metrics.read_bytes() == once  # run again: replaced, not added twice
    bad = cli_main(["health", str(rollouts), "-o", str(tmp_path / "h"), "--metrics", str(tmp_path / "none.json")])
    assert bad == 2


def test_a_metrics_file_of_another_layout_keeps_its_values(tmp_path: Path) -> None:
    """A metrics file written by other tools (one line, say) is rewritten whole, values unchanged."""
    rollouts = tmp_path / "run.jsonl"
    rows = [{k: v for k, v in orjson.loads(r).items() if k != "agent_ref"} for r in _rows()[-8:]]
    rollouts.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    assert cli_main(["aggregate", str(rollouts), "--agent", "solo", "-q"]) == 0
    metrics = tmp_path / "run_aggregate_metrics.json"
    doc = orjson.loads(metrics.read_bytes())
    metrics.write_bytes(orjson.dumps(doc))
    health = check_health(rollouts, output_dir=tmp_path / "h")
    blocks = health.add_to_metrics(metrics)
    (entry,) = orjson.loads(metrics.read_bytes())
    assert {k: v for k, v in entry.items() if k != "health"} == doc[0]
    assert entry["health"] == blocks[doc[0]["agent_ref"]["name"]] and entry["health"]["records"] == 8  # unnamed rows: the only agent's


def test_an_integer_past_64_bits_in_anothers_metrics_file_stays_exact(tmp_path: Path) -> None:
    """orjson read `sum/big` 123456789012345678901234567890 as a float and wrote 1.2345678901234568e+29."""
    rollouts = tmp_path / "run.jsonl"
    rows = [{k: v for k, v in orjson.loads(r).items() if k != "agent_ref"} for r in _rows()[-8:]]
    rollouts.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    metrics = tmp_path / "other.json"
    metrics.write_text('[{"agent_ref": {"name": "solo"}, "agent_metrics": {"sum/big": 123456789012345678901234567890, "mean/reward": 0.5}}]')
    check_health(rollouts, output_dir=tmp_path / "h").add_to_metrics(metrics, default_agent="solo")
    text = metrics.read_text()
    assert '"sum/big": 123456789012345678901234567890' in text and json.loads(text)[0]["health"]["records"] == 8
