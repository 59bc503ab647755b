"""Rows without an agent_ref: an error that says what to do (NeMo Gym 0.7.0's collection raises
"No agent specified for rows ..." too), and `--agent NAME` for `aggregate` and `collect` that
names them; collect writes the name on every row it names, as NeMo Gym's `+agent_name` does."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics.aggregate import aggregate_file
from gym_metrics.rollouts import _reader
from gym_metrics.errors import InvalidInputError
from gym_metrics_servers.math_exact import SAMPLE_PATH, MathExactServer

DATA = Path(__file__).parents[1] / "data" / "nemo_gym"


async def run_cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gym_metrics.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return proc.returncode or 0, out.decode(), err.decode()


def without_agents(src: Path, dst: Path, keep_every: int = 0) -> Path:
    """src's rows with agent_ref removed (missing, null or without a name, in turn); with
    keep_every=k every k-th row keeps its own."""
    lines = []
    for i, line in enumerate(src.read_text().splitlines()):
        row = json.loads(line)
        if not (keep_every and i % keep_every == 0):
            ref = row.pop("agent_ref")
            if i % 3 == 1:
                row["agent_ref"] = None
            elif i % 3 == 2:
                row["agent_ref"] = {k: v for k, v in ref.items() if k != "name"}
        lines.append(json.dumps(row))
    dst.write_text("\n".join(lines) + "\n")
    return dst


@pytest.mark.parametrize("reader", ["default", "per_line"])
def test_aggregate_names_rows_without_an_agent(tmp_path: Path, reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if reader == "per_line":
        monkeypatch.setattr(_reader, "_read_fast", lambda *args: None)
    src = without_agents(DATA / "basic.jsonl", tmp_path / "in.jsonl")
    with pytest.raises(InvalidInputError) as exc:
        aggregate_file(src)
    v = exc.value.violations[0]
    assert (v.field, v.row) == ("agent_ref.name", 1) and "`--agent NAME`" in v.description
    named, _, _ = aggregate_file(src, tmp_path / "named.json", default_agent="solo")
    original, _, _ = aggregate_file(DATA / "basic.jsonl", tmp_path / "original.json")
    data = json.loads(named.read_text())
    assert [a["agent_ref"]["name"] for a in data] == ["solo"]
    # the same numbers as the file that names its agent (basic.jsonl has one)
    assert json.loads(original.read_text())[0]["agent_metrics"] == data[0]["agent_metrics"]


def test_rows_that_name_their_agent_keep_it_and_a_bad_name_stays_an_error(tmp_path: Path) -> None:
    src = without_agents(DATA / "basic.jsonl", tmp_path / "in.jsonl", keep_every=2)
    named = json.loads(src.read_text().splitlines()[0])["agent_ref"]["name"]
    out, results, _ = aggregate_file(src, default_agent="rest")
    assert sorted(r.agent_name for r in results) == sorted([named, "rest"])
    assert {r.agent_name: r.received_rollouts for r in results} == {named: 10, "rest": 10}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"agent_ref": {"name": 5}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}\n')
    with pytest.raises(InvalidInputError) as exc:
        aggregate_file(bad, default_agent="rest")
    assert exc.value.violations[0].description == "must be a string, got 5"


async def test_the_aggregate_command_says_how_and_takes_agent(tmp_path: Path) -> None:
    src = without_agents(DATA / "basic.jsonl", tmp_path / "in.jsonl")
    code, _, err = await run_cli("aggregate", str(src))
    assert code == 2 and "line 1: agent_ref.name: missing" in err and "--agent NAME" in err
    code, out, err = await run_cli("aggregate", str(src), "--agent", "solo")
    assert code == 0, err
    assert "solo" in out and json.loads((tmp_path / "in_aggregate_metrics.json").read_text())[0]["agent_ref"]["name"] == "solo"


def assert_named(src: Path, out: bytes, agent: str) -> None:
    """`out` holds `src`'s rows, each with agent_ref.name `agent` (other agent_ref fields kept);
    a line that had no agent_ref key is its input line with the key appended."""
    lines = out.splitlines()
    assert len(lines) == len(src.read_bytes().splitlines())
    for given, written in zip(src.read_bytes().splitlines(), lines):
        row = json.loads(given)
        ref = row.get("agent_ref") or {}
        if "agent_ref" not in row:
            assert written.startswith(given.rstrip()[:-1]), (given, written)
        row["agent_ref"] = {**ref, "name": agent}
        assert json.loads(written) == row


@pytest.mark.slow  # 7-14 s: on the default Python only (CI's time bound)
async def test_collect_takes_agent_for_scored_and_verified_lines_and_resumes(tmp_path: Path) -> None:
    """Scored lines copied with the agent_ref `--agent` gives them (a line with no agent_ref key
    keeps its bytes, the key appended), task lines verified by a real environment and written
    with it; the output is then read by commands that have no `--agent` (aggregate, compare,
    report); the metrics are those of `aggregate` of the output; --resume reads it back."""
    scored = without_agents(DATA / "basic.jsonl", tmp_path / "scored.jsonl")
    tasks = tmp_path / "tasks.jsonl"
    task_rows = [json.loads(line) for line in SAMPLE_PATH.read_text().splitlines()[:6]]
    for row in task_rows:
        for key in ("agent_ref", "_ng_task_index", "_ng_rollout_index"):
            row.pop(key, None)
    tasks.write_text("".join(json.dumps(r) + "\n" for r in task_rows))
    server = await start_server(MathExactServer(), ServerConfig(port=0, log_requests=False))
    try:
        base = ("collect", "--server", server.address)
        code, _, err = await run_cli(*base, "--input", str(scored), "--output", str(tmp_path / "a.jsonl"))
        assert code == 2 and "line 1" in err and "--agent NAME" in err
        code, _, err = await run_cli(*base, "--input", str(scored), "--output", str(tmp_path / "b.jsonl"), "--agent", "solo")
        assert code == 0, err
        written = (tmp_path / "b.jsonl").read_bytes()
        assert_named(scored, written, "solo")
        code, _, err = await run_cli("aggregate", str(tmp_path / "b.jsonl"), "--env", "math_exact", "-o", str(tmp_path / "off.json"))
        assert code == 0, err
        assert (tmp_path / "b_aggregate_metrics.json").read_bytes() == (tmp_path / "off.json").read_bytes()
        code, out, err = await run_cli("report", str(tmp_path / "b_aggregate_metrics.json"), "-o", str(tmp_path / "r.html"))
        assert code == 0 and (tmp_path / "r.html").stat().st_size > 0, out + err
        code, _, err = await run_cli(*base, "--input", str(scored), "--output", str(tmp_path / "d.jsonl"), "--agent", "other")
        assert code == 0, err
        code, out, err = await run_cli("compare", str(tmp_path / "b.jsonl"), str(tmp_path / "d.jsonl"), "--json")
        assert code == 0 and [(c["agent_a"], c["agent_b"], c["common_tasks"]) for c in json.loads(out)["comparisons"]] == [("solo", "other", 5)], out + err
        code, _, err = await run_cli(*base, "--input", str(scored), "--output", str(tmp_path / "b.jsonl"), "--agent", "solo", "--resume")
        assert code == 0, err
        assert (tmp_path / "b.jsonl").read_bytes() == written  # nothing written twice
        code, _, err = await run_cli(
            *base, "--input", str(tasks), "--output", str(tmp_path / "c.jsonl"), "--agent", "solo", "--num-repeats", "2"
        )
        assert code == 0, err
        metrics = json.loads((tmp_path / "c_aggregate_metrics.json").read_text())
        assert [a["agent_ref"]["name"] for a in metrics] == ["solo"]
        assert [json.loads(line)["agent_ref"] for line in (tmp_path / "c.jsonl").read_text().splitlines()] == [{"name": "solo"}] * 12
        assert metrics[0]["agent_metrics"]["num_repeats"] == 2 and len(metrics[0]["group_level_metrics"]) == 6
    finally:
        await server.stop(0)
