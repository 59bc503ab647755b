"""`gym-metrics check-env`: what counts as a difference from NeMo Gym's answers, the one-line
errors of a bad argument or a side that cannot run, and (where GYM_METRICS_NEMO_PYTHON names the
Python of a venv with nemo-gym 0.7.0) whole checks of the wheel's environments against NeMo Gym
itself: one equal, one whose rows NeMo Gym refuses (and gym-metrics fails too); and `--episodes`,
whole episodes replayed under NeMo Gym's agents and collect, equal, and a difference found."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from _ci import need_module
from gym_metrics.testing._nemo_check import _last_error, _row_differences, differences


def test_equal_within_1e_9_and_added_keys_are_not_differences() -> None:
    theirs = {"agent_metrics": {"mean/reward": 0.5, "max/reward": 1.0}, "group_level_metrics": [{"sample": {}, "mean/reward": 1}]}
    mine = {
        "agent_metrics": {"mean/reward": 0.5 * (1 + 1e-12), "max/reward": 1.0, "wilson_ci_low_95/reward": 0.1, "coverage/masked_rollouts": 0},
        "group_level_metrics": [{"mean/reward": 1.0}],
        "non_numeric_counts": {},
    }
    assert differences(theirs, mine) == []


def test_a_value_a_missing_key_an_extra_key_and_a_length_are_differences() -> None:
    theirs = {"a": 1.0, "b": [1, 2], "c": "x"}
    mine = {"a": 1.001, "b": [1], "d": 3}
    assert sorted(differences(theirs, mine, "m")) == [
        "m.a: 1.001 != NeMo Gym's 1.0",
        "m.b: 1 items, NeMo Gym 2",
        "m.c: missing",
        "m.d: not in NeMo Gym's",
    ]
    assert differences(float("nan"), float("nan")) == []
    assert differences(True, 1, "x") == ["x: 1 != NeMo Gym's True"] and differences(True, True) == []


def _row(task: int, **fields: Any) -> dict[str, Any]:
    return {"agent_ref": {"name": "a"}, "_ng_task_index": task, "_ng_rollout_index": 0, **fields}


def test_rows_are_matched_by_key_and_a_refused_row_must_fail_here_too() -> None:
    theirs = [
        _row(0, reward=1.0, response={"x": 1}),
        _row(1, _nemo_refused=422, _nemo_detail="missing expected_answer"),
        _row(2, _nemo_refused=422, _nemo_detail="bad"),
        _row(3, reward=0.0),
        _row(4, reward=1.0),
    ]
    mine = [
        _row(3, reward=0.0, _gm_stored_reward=1.0),  # an order of its own, keys of its own: matched by key
        _row(0, reward=1.0, response={"y": 2}),  # echoed keys are not compared
        _row(1, _gm_error={"kind": "invalid_request", "message": "expected_answer: Field required"}),
        _row(2, reward=0.5),
        _row(4, _gm_error={"kind": "verify_failed", "message": "boom"}),
        _row(5, reward=1.0),
    ]
    assert _row_differences(theirs, mine) == [
        "rows[task 2, rollout 0]: scored here, refused by NeMo Gym (422: bad)",
        "rows[task 4, rollout 0]: failed here (boom), scored by NeMo Gym",
        "rows[task 5, rollout 0]: not in NeMo Gym's",
    ]


def test_a_row_that_failed_alike_on_both_sides_is_no_difference() -> None:
    """A judge that failed under both: every such row was reported as 'failed here, scored by
    NeMo Gym', though NeMo Gym's row named the same failure."""
    judged = {"reward": 0.0, "_ng_failure_class": "judge_failed", "failure_reason": "ClientResponseError: 500"}
    theirs = [_row(0, **judged), _row(1, **judged), _row(2, **judged), _row(3, reward=1.0)]
    mine = [
        _row(0, **judged),
        _row(1, **{**judged, "failure_reason": "TimeoutError"}),
        _row(2, **{**judged, "_ng_failure_class": "verifier_error"}),
        _row(3, **judged),
    ]
    assert _row_differences(theirs, mine) == [
        "rows[task 1, rollout 0].failure_reason: 'TimeoutError' != NeMo Gym's 'ClientResponseError: 500'",
        "rows[task 2, rollout 0]: failed here as verifier_error, under NeMo Gym as judge_failed",
        "rows[task 3, rollout 0]: failed here (judge_failed: ClientResponseError: 500), scored by NeMo Gym",
    ]


def test_nemo_gyms_failure_is_shown_whole() -> None:
    """Only the last line of NeMo Gym's error was shown: of a config not found, the one that did
    not name the file."""
    stderr = ("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
              "nemo_gym.global_config.ConfigPathNotFoundError: config_paths entry '/t/mrcr_typo.yaml' was not found.\n"
              "Looked in: the working directory\n(NEMO_GYM_EXTRA_ROOTS / --search-dir), or the Gym install root.\n")  # fmt: skip
    assert _last_error(stderr).startswith("nemo_gym.global_config.ConfigPathNotFoundError: config_paths entry '/t/mrcr_typo.yaml'")
    assert _last_error(stderr).endswith("or the Gym install root.") and _last_error("") == "(no output)"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gym_metrics.cli", "check-env", *args], capture_output=True, text=True, timeout=120)


def test_a_missing_environment_or_nemo_python_is_one_line_and_exit_2(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"responses_create_params": {"input": "hi"}}\n')
    done = _cli("--root", str(tmp_path), "--env", "nowhere", "--rollouts", str(rows), "--nemo-python", sys.executable)
    assert done.returncode == 2 and "nowhere is not a folder" in done.stderr and "Traceback" not in done.stderr
    (tmp_path / "resources_servers" / "mine").mkdir(parents=True)
    done = _cli("--root", str(tmp_path), "--env", "mine", "--rollouts", str(rows), "--nemo-python", str(tmp_path / "no-python"))
    assert done.returncode == 2 and "--nemo-python" in done.stderr and "no such file" in done.stderr and "Traceback" not in done.stderr
    done = _cli("--root", str(tmp_path), "--env", "mine", "--rollouts", str(rows), "--nemo-python", sys.executable)  # no nemo_gym there
    assert done.returncode == 2 and "NeMo Gym's side failed" in done.stderr and "Traceback" not in done.stderr


def test_episodes_need_an_agent_in_the_config(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"responses_create_params": {"input": "hi"}}\n')
    configs = tmp_path / "resources_servers" / "mine" / "configs"
    configs.mkdir(parents=True)
    (configs / "mine.yaml").write_text("mine:\n  resources_servers:\n    mine:\n      entrypoint: app.py\n")
    done = _cli("--root", str(tmp_path), "--env", "mine", "--rollouts", str(rows), "--nemo-python", sys.executable, "--episodes")
    assert done.returncode == 2 and "no responses_api_agents block names mine as its resources_server" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_server_both_sides_cannot_reach_alike_is_refused(tmp_path: Path) -> None:
    """NeMo Gym reaches a model server by host and port: a URL with a path, or no port, is one line."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"responses_create_params": {"input": "hi"}}\n')
    (tmp_path / "resources_servers" / "mine").mkdir(parents=True)
    for url in ("http://127.0.0.1:9/v1", "http://127.0.0.1", "https://127.0.0.1:9"):
        done = _cli("--root", str(tmp_path), "--env", "mine", "--rollouts", str(rows), "--nemo-python", sys.executable, "--server", f"judge={url}")
        assert done.returncode == 2 and "--server judge" in done.stderr and "expected http://HOST:PORT" in done.stderr, done.stderr
    done = _cli("--root", str(tmp_path), "--env", "mine", "--rollouts", str(rows), "--nemo-python", sys.executable, "--server", "judge")
    assert done.returncode == 2 and "expected NAME=http://HOST:PORT" in done.stderr


NEMO_PYTHON = os.environ.get("GYM_METRICS_NEMO_PYTHON")


@pytest.mark.slow
@pytest.mark.skipif(not NEMO_PYTHON, reason="GYM_METRICS_NEMO_PYTHON names no venv with nemo-gym 0.7.0 (the reference tool itself, 1.4 GB)")
@pytest.mark.parametrize(
    ("env", "refused"),
    [
        ("string_match", 0),
        ("mcqa", 5),  # rows NeMo Gym's /verify refuses: failed here too
        ("imo_gradingbench", 0),  # scored rows: the fields only verify's answer declares are not sent back
        ("scicodepile", 0),  # task_source carried onto the result, as NeMo Gym's collection carries it
        ("calendar", 5),  # imports sibling files bare (`from utils import ...`)
        ("example_mcp_weather", 0),  # its agent block interpolates a key no one set: only that block fails
    ],
)
def test_the_wheels_environments_check_equal_to_nemo_gym(env: str, refused: int, ported: Any, tmp_path: Path) -> None:
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(tmp_path, [m for m in wheel.namelist() if m.startswith("resources_servers/")])
    rows = tmp_path / "resources_servers" / env / "data" / "example_rollouts.jsonl"
    done = _cli("--root", str(tmp_path), "--env", env, "--rollouts", str(rows), "--nemo-python", str(NEMO_PYTHON))
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(f"{env}: 5 rows, equal to NeMo Gym's") and (f"({refused} rows refused by both" in last) == bool(refused)


AGENT_DATA = Path(__file__).parents[1] / "data" / "nemo_gym_agent"


def _recorded_rollouts(env: str, out: Path) -> Path:
    """The conformance's tasks with NeMo Gym's recorded answers' `response` and `reward` on
    them: rollouts as a collection keeping the task's fields writes them."""
    rows = [json.loads(line) for line in (AGENT_DATA / env / "rows.jsonl").read_text().splitlines()]
    answers = [json.loads(line) for line in (AGENT_DATA / env / "verify.jsonl").read_text().splitlines()]
    out.write_text("".join(json.dumps({**row, "response": a["response"], "reward": a["reward"]}) + "\n" for row, a in zip(rows, answers)))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not NEMO_PYTHON, reason="GYM_METRICS_NEMO_PYTHON names no venv with nemo-gym 0.7.0 (the reference tool itself, 1.4 GB)")
@pytest.mark.parametrize("env", ["math_with_code", "single_step_tool_use_with_argument_comparison"])
def test_episodes_replayed_check_equal_to_nemo_gym(env: str, ported: Any, tmp_path: Path) -> None:
    """`--episodes`: each task run again under NeMo Gym's agent (simple_agent; tool_simulation_agent
    for the second) and under collect, the recorded model turns replayed: equal, trajectories too."""
    need_module("pandas", "math_with_code's module imports it")
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(tmp_path, [m for m in wheel.namelist() if m.startswith("resources_servers/")])
    rollouts = _recorded_rollouts(env, tmp_path / "rollouts.jsonl")
    done = _cli("--root", str(tmp_path), "--env", env, "--rollouts", str(rollouts), "--nemo-python", str(NEMO_PYTHON), "--episodes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"{env}: 10 rows, equal to NeMo Gym's (every row, its trajectory and every metrics key)"


@pytest.mark.slow
@pytest.mark.skipif(not NEMO_PYTHON, reason="GYM_METRICS_NEMO_PYTHON names no venv with nemo-gym 0.7.0 (the reference tool itself, 1.4 GB)")
async def test_episodes_that_differ_from_nemo_gyms_are_found(ported: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """collect running the calls of a turn concurrently (not NeMo Gym's program): math_with_code's
    calls that share a session's process garble each other, and the check names the rows."""
    import functools

    import gym_metrics.collector
    from gym_metrics.testing import check_environment

    need_module("pandas", "math_with_code's module imports it")
    monkeypatch.setattr(gym_metrics.collector, "CollectOptions", functools.partial(gym_metrics.collector.CollectOptions, parallel_tool_calls=True))
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(tmp_path, [m for m in wheel.namelist() if m.startswith("resources_servers/")])
    rollouts = _recorded_rollouts("math_with_code", tmp_path / "rollouts.jsonl")
    report = await check_environment(tmp_path, "math_with_code", rollouts, str(NEMO_PYTHON), episodes=True)
    assert not report.equal and report.rows == 10
    assert any(d.startswith("rows[task ") and ".response.output[" in d for d in report.differences), report.differences[:5]


@pytest.mark.slow
@pytest.mark.skipif(not NEMO_PYTHON, reason="GYM_METRICS_NEMO_PYTHON names no venv with nemo-gym 0.7.0 (the reference tool itself, 1.4 GB)")
def test_a_sandboxed_tool_checks_equal_to_nemo_gyms_local_provider(ported: Any, tmp_path: Path) -> None:
    """litmus_agent's code tool on NeMo Gym's `local` provider: NeMo Gym runs the cells on the
    host, gym-metrics in its sandbox (nemo_gym.sandbox ported); every tool output (a traceback,
    state kept between calls, a file at /tmp) and reward equal."""
    data = Path(__file__).parents[1] / "data" / "nemo_gym_sandbox"
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(tmp_path, [m for m in wheel.namelist() if m.startswith("resources_servers/litmus_agent/")])
    (tmp_path / "resources_servers" / "litmus_agent" / "configs" / "litmus_agent_local.yaml").write_text((data / "litmus_agent_local.yaml").read_text())
    rollouts = str(data / "litmus_agent_rollouts.jsonl")
    done = _cli("--root", str(tmp_path), "--env", "litmus_agent", "--config", "litmus_agent_local", "--rollouts", rollouts,
                "--nemo-python", str(NEMO_PYTHON), "--episodes")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "litmus_agent: 5 rows, equal to NeMo Gym's (every row, its trajectory and every metrics key)"


@pytest.mark.slow
@pytest.mark.skipif(not NEMO_PYTHON, reason="GYM_METRICS_NEMO_PYTHON names no venv with nemo-gym 0.7.0 (the reference tool itself, 1.4 GB)")
@pytest.mark.parametrize(
    ("env", "judge", "verdicts"),
    [
        ("equivalence_llm_judge", "policy_model", ["[[A=B]]", "[[A!=B]]"]),  # its judge is the policy model; its verifier fixture composes a benchmark config
        ("aegis_v4_safety", "aegis_v4_model", ["User Safety: safe\nResponse Safety: safe", "User Safety: unsafe\nResponse Safety: unsafe"]),
    ],
)
def test_a_judged_environment_checks_equal_with_one_judge_for_both_sides(
    env: str, judge: str, verdicts: list[str], ported: Any, tmp_path: Path
) -> None:
    """`--server NAME=URL`: both sides call the same (scripted) judge; its verdict for a prompt
    is picked by the prompt's hash, so each side's rows get the same verdicts, and a row whose
    judge call fails (HTTP 500) is judge_failed on both."""
    from gym_metrics.testing import ScriptedChatServer
    from gym_metrics.testing._judge import keyed_answers, text_key

    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(tmp_path, [m for m in wheel.namelist() if m.startswith(("resources_servers/", "benchmarks/"))])
    rows = tmp_path / "resources_servers" / env / "data" / "example_rollouts.jsonl"
    with ScriptedChatServer(default=keyed_answers(verdicts)) as first:  # a first pass finds a prompt to fail
        done = _cli("--root", str(tmp_path), "--env", env, "--rollouts", str(rows), "--nemo-python", str(NEMO_PYTHON), "--server", f"{judge}=http://127.0.0.1:{first.port}")
        assert done.returncode == 0, done.stdout + done.stderr
        calls = [r.text for r in first.requests]
    assert len(calls) >= 2 * 5 and len(set(calls)) < len(calls)  # each row judged by both sides, the same prompts
    with ScriptedChatServer(default=keyed_answers(verdicts, fail_keys=[text_key(calls[0])])) as failing:
        done = _cli("--root", str(tmp_path), "--env", env, "--rollouts", str(rows), "--nemo-python", str(NEMO_PYTHON), "--server", f"{judge}=http://127.0.0.1:{failing.port}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith(f"{env}: 5 rows, equal to NeMo Gym's")


@pytest.mark.slow
@pytest.mark.skipif(not NEMO_PYTHON, reason="GYM_METRICS_NEMO_PYTHON names no venv with nemo-gym 0.7.0 (the reference tool itself, 1.4 GB)")
def test_a_benchmark_config_checks_equal_to_nemo_gyms(ported: Any, tmp_path: Path) -> None:
    """`--config benchmarks/gpqa/config.yaml`: both sides compose the benchmark (mcqa's block
    renamed, its grading mode `lenient_answer_colon_md`). Each row answers `Answer: X`, right for
    half of them: that grading mode scores them, mcqa's own config does not."""
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(tmp_path, [m for m in wheel.namelist() if m.startswith(("resources_servers/", "benchmarks/"))])
    rows = []
    for i, line in enumerate((tmp_path / "resources_servers" / "mcqa" / "data" / "example_rollouts.jsonl").read_text().splitlines()):
        row = json.loads(line)
        row["responses_create_params"] = {k: v for k, v in row["responses_create_params"].items() if v is not None}
        row.pop("reward")
        row["options"] = [{letter: f"option {letter}"} for letter in "ABCDEFGHIJ"]  # (what a benchmark's prepared row carries)
        answer = row["expected_answer"] if i % 2 == 0 else "A" if row["expected_answer"] != "A" else "B"
        row["response"]["output"][-1]["content"][0]["text"] = f"Reasoning.\n\nAnswer: {answer}"
        rows.append(row)
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = _cli("--root", str(tmp_path), "--env", "mcqa", "--config", "benchmarks/gpqa/config.yaml", "--rollouts", str(path), "--nemo-python", str(NEMO_PYTHON))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mean reward: mcqa_simple_agent 0.600" in done.stderr and "5 rows, equal to NeMo Gym's" in done.stdout
    done = _cli("--root", str(tmp_path), "--env", "mcqa", "--rollouts", str(path), "--nemo-python", str(NEMO_PYTHON))
    assert done.returncode == 0 and "mean reward: mcqa_simple_agent 0.000" in done.stderr, done.stdout + done.stderr
