"""The same NeMo Evaluator call shapes on `Evaluator("127.0.0.1:PORT")` against a real
`gym-metrics jobs serve` subprocess: `run`, `submit` + `wait_until_done` + `get_result` and
`cancel`, with results equal to a local `Evaluator()`'s. Secrets reach the server by name
(its own environment, a variable the operator allows with --secret-env), never in the spec;
auth tokens are checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gym_metrics.errors import GymMetricsError
from gym_metrics.sdk import (
    AnswerAccuracyMetric,
    Evaluator,
    InferenceParams,
    JobError,
    JSONScoreParser,
    Model,
    ReasoningParams,
    RemoteMetric,
    RemoteScore,
    RunConfig,
    RunConfigOnlineModel,
)
from gym_metrics.testing import ScriptedPolicyServer

from _sdk_helpers import CASES, JUDGE_KEY, Case, Judge, ScoringEndpoint, answer_rows, judge_model

pytestmark = pytest.mark.timeout(120)
TOKEN = "sdk-test-token-77"


class JobServerProcess:
    """`gym-metrics jobs serve --port 0` in a subprocess; the address read from its stderr."""

    def __init__(self, db: Path, env: dict[str, str]) -> None:
        self.stderr_path = db.with_suffix(".stderr")
        command = [sys.executable, "-m", "gym_metrics.cli", "jobs", "serve", "--db", str(db), "--port", "0",
                   "--auth-token-env", "SDK_TEST_JOBS_TOKEN", "--secret-env", "JUDGE_API_KEY", "--grace", "1"]  # fmt: skip
        self._stderr = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(command, stderr=self._stderr, stdout=subprocess.DEVNULL, env=env)
        self.address = self._address()

    def _address(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(rb"listening on (\S+)", self.stderr_path.read_bytes())
            if found:
                return found.group(1).decode()
            assert self.process.poll() is None, self.stderr_path.read_text()
            time.sleep(0.05)
        raise AssertionError("job server did not start within 60 s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._stderr.close()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ScoringEndpoint, Judge]]:
    with ScoringEndpoint() as endpoint, Judge() as judge:
        yield endpoint, judge


@pytest.fixture(scope="module")
def job_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobServerProcess]:
    env = {**os.environ, "JUDGE_API_KEY": JUDGE_KEY, "SDK_TEST_JOBS_TOKEN": TOKEN}
    server = JobServerProcess(tmp_path_factory.mktemp("jobs") / "jobs.sqlite", env)
    yield server
    server.stop()


@pytest.fixture
def remote(job_server: JobServerProcess) -> Iterator[Evaluator]:
    with Evaluator(job_server.address, auth_token=TOKEN) as evaluator:
        yield evaluator


@pytest.fixture(autouse=True)
def judge_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_API_KEY", JUDGE_KEY)  # for the local runs compared against


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_run_on_the_server_equals_a_local_run(case: Case, servers: tuple[ScoringEndpoint, Judge], remote: Evaluator) -> None:
    metric, rows, expected = case(*servers)
    result = remote.run(metric=metric, dataset=rows)
    assert {s.name: s.mean for s in result.aggregate_scores.scores} == expected
    assert result.to_dict() == Evaluator().run(metric=metric, dataset=rows).to_dict()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_submit_wait_and_get_result_on_the_server(case: Case, servers: tuple[ScoringEndpoint, Judge], remote: Evaluator) -> None:
    metric, rows, _ = case(*servers)
    job = remote.submit(metric=metric, dataset=rows, config=RunConfig(parallelism=4))
    assert job.wait_until_done(timeout=60) == "SUCCEEDED" == job.status()
    assert job.get_result().to_dict() == Evaluator().run(metric=metric, dataset=rows).to_dict()
    again = remote.job(job.name)  # another client can follow it by name
    assert again.status() == "SUCCEEDED"
    assert again.get_result().to_dict() == job.get_result().to_dict()  # its scores named as the submitter's (`nv_accuracy`, one topic adherence mode)


def test_a_path_dataset_is_sent_inline(tmp_path: Path, remote: Evaluator, servers: tuple[ScoringEndpoint, Judge]) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join('{"user_input": "capital of France?", "response": "%s", "reference": "Paris"}' % r for r in ("Paris", "Lyon", "Paris")))
    metric = AnswerAccuracyMetric(judge_model=judge_model(servers[1]))
    result = remote.run(metric=metric, dataset=path, config=RunConfig(limit_samples=2))
    assert [s.mean for s in result.aggregate_scores.scores] == [0.5] and len(result.row_scores) == 2


def test_online_job_with_a_model_target(remote: Evaluator, servers: tuple[ScoringEndpoint, Judge]) -> None:
    rows = [{"user_input": "capital of France?", "reference": "Paris", "response": "stale"},
            {"user_input": "capital of Italy?", "reference": "Rome", "response": "Paris"}]  # fmt: skip
    with ScriptedPolicyServer({"capital of France?": "Paris", "capital of Italy?": "<think>x</think>Milan"}) as policy:
        job = remote.submit(
            metric=AnswerAccuracyMetric(judge_model=judge_model(servers[1])), dataset=rows,
            config=RunConfigOnlineModel(parallelism=2, inference=InferenceParams(temperature=0.7, max_tokens=64),
                                        system_prompt="detailed thinking on", reasoning=ReasoningParams(end_token="</think>")),
            target=Model(url=policy.url, name="policy"),
            prompt_template={"messages": [{"role": "user", "content": "{{item.user_input}}"}]},
        )  # fmt: skip
        assert job.wait_until_done(timeout=60) == "SUCCEEDED"
        assert policy.requests[0].body["messages"][0]["content"] == "detailed thinking on"
    result = job.get_result()
    assert [s.mean for s in result.aggregate_scores.scores] == [0.5]
    assert [r.generated["response"] for r in result.row_scores if r.generated] == ["Paris", "Milan"]


def test_cancel_a_running_job(remote: Evaluator) -> None:
    rows = [{"reference": str(i), "output": str(i)} for i in range(300)]
    with ScoringEndpoint(delay=0.05) as slow:
        metric = RemoteMetric(url=slow.evaluate_url, body={"reference": "{{item.reference}}", "response": "{{item.output}}"},
                              scores=[RemoteScore(name="accuracy", parser=JSONScoreParser(json_path="$.result.accuracy"))])  # fmt: skip
        job = remote.submit(metric=metric, dataset=rows, config=RunConfig(parallelism=1))
        with pytest.raises(TimeoutError, match=job.name):
            job.wait_until_done(timeout=0.3)
        assert job.cancel() == "CANCELLED"  # the state once stopped, as a LocalJob's cancel says it (it said RUNNING)
        assert job.wait_until_done(timeout=30) == "CANCELLED"
    with pytest.raises(JobError, match="CANCELLED"):
        job.get_result()


def test_a_missing_server_secret_and_a_bad_token_are_clear_errors(job_server: JobServerProcess, servers: tuple[ScoringEndpoint, Judge]) -> None:
    metric = AnswerAccuracyMetric(judge_model=Model(url=servers[1].url, name="j", api_key_secret="not-on-the-server"))
    with Evaluator(job_server.address, auth_token=TOKEN) as remote, pytest.raises(GymMetricsError, match="NOT_ON_THE_SERVER"):
        remote.submit(metric=metric, dataset=answer_rows())
    with Evaluator(job_server.address, auth_token="wrong") as remote, pytest.raises(GymMetricsError):
        remote.run(metric=AnswerAccuracyMetric(judge_model=judge_model(servers[1])), dataset=answer_rows())
