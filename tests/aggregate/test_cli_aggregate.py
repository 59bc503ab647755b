"""`gym-metrics aggregate` end to end, as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parents[1] / "data" / "nemo_gym"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def test_writes_stem_file_beside_input_and_prints_key_metrics(tmp_path: Path) -> None:
    src = shutil.copy(DATA / "multi_agent.jsonl", tmp_path / "run.jsonl")
    proc = run("aggregate", str(src))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "run_aggregate_metrics.json"
    data = json.loads(out.read_text())
    assert [a["agent_ref"]["name"] for a in data] == ["alpha", "mid", "zeta"]
    assert "alpha" in proc.stdout and "mean/reward" in proc.stdout and "36 rollouts, 3 agents" in proc.stdout
    # deterministic byte for byte
    first = out.read_bytes()
    assert run("aggregate", str(src)).returncode == 0
    assert out.read_bytes() == first


def test_output_option_and_no_rollout_infos(tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    proc = run("aggregate", str(DATA / "basic.jsonl"), "-o", str(out), "--no-rollout-infos", "-q")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out)
    groups = json.loads(out.read_text())[0]["group_level_metrics"]
    assert groups and all("rollout_infos" not in g for g in groups)


def test_bad_lines_fail_with_line_numbers_or_are_skipped(tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    lines = (DATA / "basic.jsonl").read_text().splitlines()
    lines.insert(3, '{"agent_ref": {"name": "a"}, "_ng_task_index": 9, "_ng_rollout_index": "x"}')
    lines.insert(6, "not json")
    src.write_text("\n".join(lines) + "\n")
    proc = run("aggregate", str(src))
    assert proc.returncode == 2
    assert "line 4: _ng_rollout_index" in proc.stderr and "line 7: json" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r_aggregate_metrics.json").exists()
    proc = run("aggregate", str(src), "--on-bad-line", "skip")
    assert proc.returncode == 0
    assert "skipped" in proc.stderr and "line 4" in proc.stderr and "2 bad lines skipped" in proc.stdout
    assert json.loads((tmp_path / "r_aggregate_metrics.json").read_text())[0]["agent_metrics"]["mean/reward"] == 0.5


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    proc = run("aggregate", str(tmp_path / "nope.jsonl"))
    assert proc.returncode == 2 and "nope.jsonl" in proc.stderr and "Traceback" not in proc.stderr


def test_env_hooks_apply_offline(tmp_path: Path) -> None:
    rows = [
        {"agent_ref": {"name": "m"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float((t + r) % 2)}
        for t in range(3)
        for r in range(2)
    ]
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in rows))
    proc = run("aggregate", str(src), "--env", "math_exact")
    assert proc.returncode == 0, proc.stderr
    agent = json.loads((tmp_path / "r_aggregate_metrics.json").read_text())[0]
    m = agent["agent_metrics"]
    assert m["pass@2"] == 1.0 and m["pass@1"] == 1 / 3 and m["pass@1[avg-of-k]"] == 0.5  # first-k: task 1 only
    assert set(agent["key_metrics"]) >= {"mean/reward", "pass@2"}
    proc = run("aggregate", str(src), "--env", "no_such_env")
    assert proc.returncode == 2 and "unknown environment 'no_such_env'" in proc.stderr


def test_rows_without_a_reward_and_an_empty_input_are_said(tmp_path: Path) -> None:
    """A row with no reward counts as a rollout and is left out of the reward stats (NeMo Gym's
    metrics leave it out too); that, and an input of no rows, are said on stderr, not silently
    written. A failed rollout and a text reward have notes of their own, not this one."""
    rows = [
        {"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0},
        {"_ng_task_index": 0, "_ng_rollout_index": 1},
        {"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": None},
        {"_ng_task_index": 1, "_ng_rollout_index": 1, "reward": 0.0},
        {"_ng_task_index": 2, "_ng_rollout_index": 0, "reward": "high"},
        {"_ng_task_index": 2, "_ng_rollout_index": 1, "_gm_error": {"kind": "verify_failed", "message": "m"}},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, **r}) + "\n" for r in rows))
    proc = run("aggregate", str(src))
    assert proc.returncode == 0, proc.stderr
    assert "note: a: 2 of 6 rollouts have no reward" in proc.stderr, proc.stderr
    assert "non-numeric values (text, objects, lists, integers past a float; never converted) left out of the stats (reward: 1)" in proc.stderr
    assert json.loads((tmp_path / "in_aggregate_metrics.json").read_text())[0]["agent_metrics"]["mean/reward"] == 0.5
    src.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, **r}) + "\n" for r in rows if r.get("reward") is not None))
    assert "no reward" not in run("aggregate", str(src)).stderr
    src.write_text("")
    proc = run("aggregate", str(src))
    assert proc.returncode == 0 and f"warning: {src}: no rollouts: the metrics file lists no agents" in proc.stderr, proc.stderr


def test_a_key_in_two_input_files_is_refused_naming_both_files(tmp_path: Path) -> None:
    """`aggregate A B -o M` (and `--partial-out`) read one agent's rows from two files: a key
    both hold was named by its line numbers alone ("line 2 ... also at line 1", of which file?);
    a file's own repeated key went into a partial unnoticed, for `merge` to refuse unlocated."""
    row = '{{"agent_ref": {{"name": "a"}}, "_ng_task_index": {}, "_ng_rollout_index": 0, "reward": 1.0}}\n'
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text(row.format(0) + row.format(1))
    second.write_text(row.format(2) + row.format(1))
    for out in (["-o", str(tmp_path / "m.json")], ["--partial-out", str(tmp_path / "p.parquet")]):
        proc = run("aggregate", str(first), str(second), *out)
        assert proc.returncode == 2, proc.stderr
        assert f"{second} line 2: (_ng_task_index, _ng_rollout_index): duplicate key (task 1, rollout 0) of agent 'a', also at {first} line 2" in proc.stderr
    second.write_text(row.format(2) + row.format(3) + row.format(2))
    proc = run("aggregate", str(second), "--partial-out", str(tmp_path / "p.parquet"))
    assert proc.returncode == 2 and f"{second}: 1 duplicate (task, rollout) keys: line 3:" in proc.stderr, proc.stderr
    assert not (tmp_path / "p.parquet").exists()


def test_an_environment_hook_that_fails_is_named(tmp_path: Path) -> None:
    """compute_metrics raising, or get_key_metrics answering a list, was `error: KeyError: 'score'
    (internal error ...)` or a message from inside the engine: the hook is named, as verify's is;
    so is a file that raises while it is imported (not only a syntax or import error)."""
    env = tmp_path / "hooks.py"
    env.write_text(
        "from gym_metrics import SimpleResourcesServer\n"
        "from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse\n"
        "class Raises(SimpleResourcesServer):\n"
        "    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:\n"
        "        return BaseVerifyResponse(reward=1.0)\n"
        "    def compute_metrics(self, tasks):\n"
        "        raise KeyError('score')\n"
        "class Tasks(Raises):\n"
        "    def compute_metrics(self, tasks):\n"
        "        return {'per_task_metrics': [{'_ng_task_index': 0, 'x': 1}, {'_ng_task_index': 99, 'x': 2}]}\n"
        "class Unnamed(Raises):\n"
        "    def compute_metrics(self, tasks):\n"
        "        return {'per_task_metrics': [{'x': 1}]}\n"
        "class Listed(Raises):\n"
        "    def compute_metrics(self, tasks):\n"
        "        return {}\n"
        "    def get_key_metrics(self, agent_metrics):\n"
        "        return ['mean/reward']\n"
        "class Setted(Raises):\n"
        "    def compute_metrics(self, tasks):\n"
        "        return {'fine': 1.0, 'set_metric': {1, 2}}\n"
        "class Mapped(Raises):\n"
        "    def compute_metrics(self, tasks):\n"
        "        return {'per_task_metrics': {'_ng_task_index': 0, 'x': 1}}\n"
        "class Numbered(Raises):\n"
        "    def compute_metrics(self, tasks):\n"
        "        return {1: 0.5}\n"
    )
    src = tmp_path / "in.jsonl"
    src.write_text('{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}\n')
    proc = run("aggregate", str(src), "--env", f"{env}:Tasks", "-o", str(tmp_path / "m.json"))
    assert proc.returncode == 0 and "per_task_metrics names 1 tasks the agent has none of (dropped, as NeMo Gym drops them): 99" in proc.stderr, proc.stderr
    assert json.loads((tmp_path / "m.json").read_text())[0]["group_level_metrics"][0]["x"] == 1
    for name, words in (
        ("Raises", "compute_metrics raised KeyError: 'score'"),
        ("Listed", "get_key_metrics raised TypeError: it returned list"),
        ("Unnamed", "compute_metrics raised TypeError: per_task_metrics[0] has no _ng_task_index"),
        ("Setted", "compute_metrics raised TypeError: its 'set_metric' is a set, which the metrics file (JSON) cannot hold"),
        ("Mapped", "compute_metrics raised TypeError: its per_task_metrics is a dict: a list of dicts"),  # was "[0] has no _ng_task_index"
        ("Numbered", "compute_metrics raised TypeError: its key 1 is not a str: metric names are text"),  # was blamed on get_key_metrics
    ):
        proc = run("aggregate", str(src), "--env", f"{env}:{name}", "-o", str(tmp_path / "m.json"))
        assert proc.returncode == 1 and f"error: {words}" in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\nraise ValueError('at import')\n")
    proc = run("aggregate", str(src), "--env", f"{broken}:X", "-o", str(tmp_path / "m.json"))
    assert proc.returncode == 2 and f"{broken}:2: ValueError: at import" in proc.stderr, proc.stderr


def test_a_reward_past_64_bits_is_aggregated_and_its_sample_kept_exact(tmp_path: Path) -> None:
    """A row holding an integer past 64 bits was "internal error" when its sample was written
    (orjson refuses the integer NeMo Gym's json writes)."""
    src = tmp_path / "r.jsonl"
    src.write_text('{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 100000000000000000000, "x": NaN}\n'
                   '{"agent_ref": {"name": "a"}, "_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 1}\n')  # fmt: skip
    done = run("aggregate", str(src), "-q")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "r_aggregate_metrics.json").read_text()
    [agent] = json.loads(text)
    assert agent["agent_metrics"]["mean/reward"] == 5e19
    assert '"reward":100000000000000000000' in text and "NaN" not in text  # exact, and strict JSON


def test_an_index_past_64_bits_is_a_bad_line_named(tmp_path: Path) -> None:
    """It was an internal OverflowError (indices are int64 columns)."""
    src = tmp_path / "r.jsonl"
    src.write_text('{"agent_ref": {"name": "a"}, "_ng_task_index": 100000000000000000000, "_ng_rollout_index": 0, "reward": 1}\n'
                   '{"agent_ref": {"name": "a"}, "_ng_task_index": 1e20, "_ng_rollout_index": 0, "reward": 1}\n')  # fmt: skip
    done = run("aggregate", str(src), "-q")
    assert done.returncode == 2 and "line 1: _ng_task_index: must be at most 9,223,372,036,854,775,806" in done.stderr, done.stderr
    assert "internal error" not in done.stderr
