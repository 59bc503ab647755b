"""Local jobs (`Evaluator().submit`): a wait that times out leaves the job running, cancel
stops it, a job that cannot start FAILS with its reason, and a result asked for too early is an
error that says so. Loops are bounded; nothing is timed."""

from __future__ import annotations

import time

import pytest

from gym_metrics.sdk import AnswerAccuracyMetric, Evaluator, JobError, JSONScoreParser, Model, RemoteMetric, RemoteScore, RunConfig

from _sdk_helpers import ScoringEndpoint

pytestmark = pytest.mark.timeout(60)


def slow_metric(endpoint: ScoringEndpoint) -> RemoteMetric:
    body = {"reference": "{{item.reference}}", "response": "{{item.output}}"}
    return RemoteMetric(url=endpoint.evaluate_url, body=body, scores=[RemoteScore(name="accuracy", parser=JSONScoreParser(json_path="$.result.accuracy"))], max_retries=0)


def wait_for(predicate: object, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_wait_timeout_then_cancel_stops_the_job() -> None:
    rows = [{"reference": str(i), "output": str(i)} for i in range(200)]
    with ScoringEndpoint(delay=0.05) as endpoint:
        job = Evaluator().submit(metric=slow_metric(endpoint), dataset=rows, config=RunConfig(parallelism=1))
        wait_for(lambda: job.status() == "RUNNING")
        with pytest.raises(TimeoutError, match=job.name):
            job.wait_until_done(timeout=0.05)
        assert job.cancel() == "CANCELLED"
        answered = len(endpoint.requests)
        time.sleep(0.2)
        assert len(endpoint.requests) <= answered + 1  # nothing more is sent once cancelled
    assert answered < len(rows)
    assert job.wait_until_done(timeout=1) == "CANCELLED"
    with pytest.raises(JobError, match="CANCELLED"):
        job.get_result()


def test_a_result_before_the_end_says_to_wait() -> None:
    with ScoringEndpoint(delay=0.05) as endpoint:
        rows = [{"reference": "a", "output": "a"}] * 20
        job = Evaluator().submit(metric=slow_metric(endpoint), dataset=rows, config=RunConfig(parallelism=1))
        with pytest.raises(JobError, match="wait_until_done"):
            job.get_result()
        assert job.wait_until_done(timeout=30) == "SUCCEEDED"
    assert job.get_result().aggregate_scores["accuracy"].mean == 1.0


def test_a_job_that_cannot_start_fails_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MISSING_JUDGE_KEY", raising=False)
    metric = AnswerAccuracyMetric(judge_model=Model(url="http://127.0.0.1:9/v1", name="j", api_key_secret="missing-judge-key"))
    job = Evaluator().submit(metric=metric, dataset=[{"user_input": "q", "response": "a", "reference": "a"}])
    assert job.wait_until_done(timeout=30) == "FAILED"
    with pytest.raises(JobError, match="MISSING_JUDGE_KEY is not set"):
        job.get_result()
