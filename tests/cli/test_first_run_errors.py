"""A first run's errors say what to do (issue 24, item 9): a broken environment file is exit 2
naming its file and line; `serve FILE.py` imports the file's sibling modules; `report` given
rollouts asks for the metrics file; a refused connection fails within seconds (exit 4), a server
started just before is waited for; an unknown
flag is one line; a judge without its config names --scorer-config; an unreachable policy
logs one summary line, not a warning per rollout per attempt."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gym_metrics import ResourcesClient, cli
from gym_metrics.targets import GenerationError, ModelTarget, ModelTargetConfig
from gym_metrics.testing import serve_environment

ENV = """\
from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer
{extra}

class Env(SimpleResourcesServer):
    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward={reward})
"""


def free_port() -> int:
    with socket.socket() as s:  # nobody listens on it once closed
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    ("source", "line", "kind"),
    [
        (ENV.format(extra="def broken(:\n    pass", reward="1.0"), 2, "SyntaxError"),
        (ENV.format(extra="import no_such_module_for_gym_metrics_tests", reward="1.0"), 2, "ModuleNotFoundError"),
        # refused when the class is made, naming the user's line (not the framework's check): each served, then every rollout failed
        (ENV.format(extra="", reward="1.0").replace("async def verify", "def verify"), 4, "TypeError: Env.verify must be an async method"),
        (ENV.format(extra="", reward="1.0").replace("verify(self, body: BaseVerifyRequest)", "verify(self)"), 4,
         "TypeError: Env.verify takes the rollout's body"),
        (ENV.format(extra="", reward="1.0") + "\n    def seed_session(self, session):\n        pass\n", 4,
         "TypeError: Env.seed_session must be an async method: async def seed_session(self, session)"),  # every session failed on it
        (ENV.format(extra="", reward="1.0") + "\n\nclass Keyed(Env):\n    key_metrics = 'mean/reward'\n", 9,
         "TypeError: Keyed.key_metrics must be a list of patterns: key_metrics = ['mean/reward']"),
        (ENV.format(extra="from gym_metrics import tool", reward="1.0") + "\n    @tool\n    def add(self, session):\n        return 1\n",
         (8, 9), "TypeError: @tool Env.add must be an async method"),  # (the decorator's line; Python 3.10 names the def's)
    ],
)
def test_a_broken_environment_file_is_exit_2_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, line: int | tuple[int, ...], kind: str
) -> None:
    app = tmp_path / "app.py"
    app.write_text(source)
    assert cli.main(["serve", f"{app}:Env", "--port", "0"]) == 2
    message = one_error_line(capsys.readouterr().err)
    lines = line if isinstance(line, tuple) else (line,)
    assert any(f"{app}:{n}: {kind}" in message for n in lines) and "internal error" not in message, message


async def test_serve_file_imports_its_sibling_modules(tmp_path: Path) -> None:
    folder = tmp_path / "my_env"
    folder.mkdir()
    (folder / "gm24_sibling_reward.py").write_text("REWARD = 0.75\n")
    (folder / "app.py").write_text(ENV.format(extra="from gm24_sibling_reward import REWARD", reward="REWARD"))
    try:
        async with serve_environment(f"{folder / 'app.py'}:Env") as server, ResourcesClient(server.address) as client:
            answer = await client.verify({"responses_create_params": {"input": "q"}, "response": {"output": []}})
    finally:
        sys.path[:] = [p for p in sys.path if p != str(folder)]
        sys.modules.pop("gm24_sibling_reward", None)
    assert answer["reward"] == 0.75


def test_report_given_rollouts_asks_for_the_metrics_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rollouts = tmp_path / "run.jsonl"
    rollouts.write_text(json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": 0, "reward": 1.0}) + "\n")
    assert cli.main(["report", str(rollouts)]) == 2
    message = one_error_line(capsys.readouterr().err)
    assert "_aggregate_metrics.json" in message and str(rollouts) in message, message


@pytest.mark.slow  # 7-14 s: on the default Python only (CI's time bound)
def test_a_refused_connection_fails_in_seconds_with_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"agent_ref": {"name": "a"}, "response": {"output": []}}) + "\n")
    port = free_port()
    started = time.monotonic()
    code = cli.main(["collect", "--server", f"127.0.0.1:{port}", "--connect-timeout", "60",
                     "--input", str(src), "--output", str(tmp_path / "out.jsonl")])  # fmt: skip
    elapsed = time.monotonic() - started
    assert code == 4
    message = one_error_line(capsys.readouterr().err)
    assert f"cannot reach the server at 127.0.0.1:{port}: UNAVAILABLE" in message and "within" not in message, message
    assert elapsed < 30  # not the 60 s of --connect-timeout: nothing listens, nothing to wait for


def test_an_unknown_flag_is_one_line_with_the_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["collect", "--num-repeat", "3", "--server", "x:1"]) == 2
    message = one_error_line(capsys.readouterr().err)
    assert "unrecognized arguments: --num-repeat (did you mean --num-repeats?)" in message
    assert "usage:" not in message


def test_a_judge_scorer_without_its_config_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps({"user_input": "q", "response": "a", "reference": "a"}) + "\n")
    assert cli.main(["evaluate", "--scorer", "answer_accuracy", "--input", str(src)]) == 2
    message = one_error_line(capsys.readouterr().err)
    assert "--scorer-config" in message and "url" in message and "model" in message, message


async def test_an_unreachable_policy_logs_a_summary_not_a_line_per_attempt(caplog: pytest.LogCaptureFixture) -> None:
    config = ModelTargetConfig(
        url=f"http://127.0.0.1:{free_port()}/v1", model="m", max_retries=2, backoff_seconds=0.001, max_backoff_seconds=0.002
    )
    target = ModelTarget(config, lean_http=True)
    with caplog.at_level(logging.WARNING, logger="gym_metrics.targets"):
        outcomes = await asyncio.gather(*(target.generate({"input": "q"}) for _ in range(30)), return_exceptions=True)
        await target.aclose()
    assert all(isinstance(o, GenerationError) for o in outcomes)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings  # was 60: one per rollout per retry
    assert "attempt 1/3 failed" in warnings[0] and "cannot reach the model" in warnings[0]
    assert "59 more attempts failed" in warnings[1] and "cannot reach the model" in warnings[1]


def test_a_server_started_just_before_is_waited_for(tmp_path: Path) -> None:
    """`serve ... &` then `collect` at once, as the docs show: the first attempts are refused
    while the server starts, and collect retries them for a few seconds."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"agent_ref": {"name": "a"}, "response": {"output": []}}) + "\n")
    env_file = tmp_path / "env.py"
    env_file.write_text(ENV.format(extra="", reward=1.0))
    port = free_port()
    server = subprocess.Popen(
        ["bash", "-c", f'sleep 1; exec "{sys.executable}" -m gym_metrics.cli serve {env_file}:Env --port {port}'],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        code = cli.main(["collect", "--server", f"127.0.0.1:{port}", "--connect-timeout", "30",
                         "--input", str(src), "--output", str(tmp_path / "out.jsonl")])  # fmt: skip
    finally:
        server.terminate()
        server.wait(30)
    assert code == 0
    assert json.loads((tmp_path / "out.jsonl").read_text())["reward"] == 1.0


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["collect", "--server", "127.0.0.1:98743", "--input", "x", "--output", "y"], "give HOST:PORT with a port in 1..65535"),
        (["collect", "--server", "127.0.0.1", "--input", "x", "--output", "y"], "give HOST:PORT with a port in 1..65535"),
        (["evaluate", "--server", "http://127.0.0.1:5", "--input", "x"], "not a URL"),
        (["jobs", "status", "--server", "h:0", "id"], "port in 1..65535"),
        (["compare", "x", "--seed", "-1"], "must be >= 0"),
        (["compare", "x", "--resamples", "1"], "at least 100 for a bootstrap interval"),
    ],
)
def test_bad_addresses_and_bootstrap_flags_are_usage_errors(args: list[str], why: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A port out of range was wrapped by the resolver (98743 reached the server on 33207); a
    negative seed was an internal error; one resample gave an interval without its estimate."""
    assert cli.main(args) == 2
    assert why in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--trajectory"], ["--capture-tokens"], ["--max-steps", "3"], ["--parallel-tool-calls", "--capture-model-calls"]])
def test_generation_flags_without_a_policy_are_refused(flags: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """They act only on generated rollouts: without --policy-url collect ignored them and exited 0."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"agent_ref": {"name": "a"}, "reward": 1.0}\n')
    assert cli.main(["collect", "--server", "127.0.0.1:1", "--input", str(src), "--output", str(tmp_path / "o.jsonl"), *flags]) == 2
    assert f"{flags[0]}" in (err := capsys.readouterr().err) and "need --policy-url" in err, err


def test_a_reducer_that_dropped_every_task_is_said_not_to_be_a_score(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """unbiased_pass@10 over 3 samples a task has no estimate (each task dropped): its 0.0 read as
    "never passes"; the run now says so, and names no reducer that had tasks."""
    env = tmp_path / "env.py"
    env.write_text(
        "from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer\n\n\n"
        "class Env(SimpleResourcesServer):\n"
        "    reducers = ['unbiased_pass@10', 'unbiased_pass@2']\n\n"
        "    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:\n"
        "        return BaseVerifyResponse(reward=1.0)\n"
    )
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"_ng_task_index": t, "_ng_rollout_index": r, "reward": 1.0, "agent_ref": {"name": "a"}}) + "\n"
                            for t in range(4) for r in range(3)))  # fmt: skip
    assert cli.main(["aggregate", str(rows), "--env", f"{env}:Env"]) == 0
    err = capsys.readouterr().err
    assert "note: a: unbiased_pass@10 has no estimate: all 4 tasks were dropped" in err and "unbiased_pass@2 has" not in err
    metrics = json.loads((tmp_path / "rows_aggregate_metrics.json").read_text())[0]["agent_metrics"]
    assert metrics["unbiased_pass@10/tasks_used"] == 0 and metrics["unbiased_pass@2"] == 1.0


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_environment_that_cannot_start_is_one_line_with_or_without_workers(tmp_path: Path, workers: str) -> None:
    """With --workers 2 an astart() failure printed two tracebacks (about 64 lines) and then
    only `workers failed: ... (exit code 1)`, not why."""
    app = tmp_path / "app.py"
    app.write_text(ENV.format(extra="", reward="1.0") + "\n    async def astart(self):\n        raise RuntimeError('no model file')\n")
    done = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "serve", f"{app}:Env", "--port", "0", "--workers", workers],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert one_error_line(done.stderr) == "error: cannot start the environment: Env.astart() failed: RuntimeError: no model file"
