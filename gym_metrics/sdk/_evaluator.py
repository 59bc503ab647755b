"""`Evaluator`: NeMo Evaluator's entry point. `Evaluator()` scores in this process with
`gym_metrics.evaluation.evaluate`; `Evaluator("host:port")` submits durable jobs to a
`gym-metrics jobs serve` server. Both take the same `run` / `submit` arguments.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from gym_metrics._util.jsonio import loads
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.evaluation import evaluate, evaluate_async, read_rows
from gym_metrics.scorers import RowError
from gym_metrics.sdk._jobs import Job, JobError, LocalJob, RemoteJob, outcome
from gym_metrics.sdk._metrics import Metric
from gym_metrics.sdk._models import Agent, Model, RunConfig, target_config
from gym_metrics.sdk._result import EvaluationResult
from gym_metrics.targets import parse_target

Dataset = Union[Iterable[Mapping[str, Any]], str, os.PathLike[str]]
"""A list (any iterable) of row dicts, or the path of a JSONL file or a JSON array file."""


def load_dataset(dataset: Dataset) -> Iterable[Any]:
    """The rows of `dataset`. A file whose first character is `[` is a JSON array, any other
    is JSONL (read lazily; an unreadable line is a RowError item, which `Evaluator` refuses
    with an error naming the line, here as on a server)."""
    if isinstance(dataset, (str, os.PathLike)):
        path = Path(dataset)
        if not path.is_file():
            raise InvalidInputError("dataset not found", [FieldViolation("dataset", f"{str(path)!r} is not a file")])
        with open(path, "rb") as f:
            first = f.read(4096).lstrip()[:1]
        if first != b"[":
            return read_rows(path)
        try:
            rows = loads(path.read_bytes())
        except ValueError as exc:
            raise InvalidInputError("dataset is not JSON", [FieldViolation(str(path), str(exc))]) from None
        return list(rows)
    if isinstance(dataset, (Mapping, bytes)):
        raise InvalidInputError("bad dataset", [FieldViolation("dataset", f"must be a list of rows or a path, not {type(dataset).__name__}")])
    if not isinstance(dataset, Iterable):
        raise InvalidInputError("bad dataset", [FieldViolation("dataset", f"must be a list of rows or a path, not {type(dataset).__name__}")])
    return dataset


@dataclass(frozen=True)
class Request:
    """One run's arguments, checked and turned into gym-metrics terms."""

    metric: Metric
    run: RunConfig
    target: dict[str, Any] | None
    prompt_template: dict[str, Any] | None

    @classmethod
    def of(cls, metric: Any, config: Any, target: Any, prompt_template: Any) -> Request:
        if not isinstance(metric, Metric):
            raise TypeError(
                "metric must be a gym_metrics.sdk metric (ToolCallAccuracyMetric, RemoteMetric, ...), "
                f"not {type(metric).__name__}"
            )
        run = RunConfig() if config is None else config
        if not isinstance(run, RunConfig):
            raise TypeError(f"config must be RunConfig, RunConfigOnline or RunConfigOnlineModel, not {type(config).__name__}")
        if target is not None and not isinstance(target, (Model, Agent)):
            raise TypeError(f"target must be Model(...) or Agent(...), not {type(target).__name__}")
        if prompt_template is not None:
            if target is None:
                raise ValueError("prompt_template goes with a target: it builds the request sent to the model")
            if not isinstance(prompt_template, Mapping):
                raise TypeError(f"prompt_template must be a dict such as {{'messages': [...]}}, not {type(prompt_template).__name__}")
            prompt_template = dict(prompt_template)
        target_dict = target_config(target, run)
        if target_dict is not None:
            parse_target(target_dict)  # a bad sampling value fails now, naming target.<field>
        return cls(metric, run, target_dict, prompt_template)

    def secrets(self) -> list[str]:
        """The secret names the run needs: the metric's and the target's."""
        names = self.metric.secrets()
        env = (self.target or {}).get("api_key_env")
        if isinstance(env, str) and env not in names:
            names.append(env)
        return names

    def spec(self, rows: list[Any]) -> dict[str, Any]:
        """The job spec a job server takes (gym_metrics.jobs.parse_spec's dict)."""
        name, config = self.metric.to_scorer()
        spec: dict[str, Any] = {
            "scorer": name,
            "scorer_config": config,
            "dataset": {"rows": rows},
            "run": {"parallelism": self.run.parallelism, "limit_samples": self.run.limit_samples},
            "secrets": self.secrets(),
        }
        if self.target is not None:
            spec["target"] = self.target
        if self.prompt_template is not None:
            spec["prompt_template"] = self.prompt_template
        if names := self.metric.result_names():
            spec["score_names"] = names
        return spec


class Evaluator:
    """`Evaluator()` runs here; `Evaluator("host:port", auth_token=...)` uses a job server.

    `run(...)` returns the result; `submit(...)` returns a Job. Locally a job is a background
    thread of this process (it ends with it); on a server it is durable."""

    def __init__(
        self, server: str | None = None, *, auth_token: str | None = None, tls_ca: Any = None, timeout: float = 30.0
    ) -> None:
        self.server = server
        self._auth_token, self._tls_ca, self._timeout = auth_token, tls_ca, timeout
        self._client: Any = None

    def __repr__(self) -> str:  # the token stays out
        return f"Evaluator({self.server!r})" if self.server else "Evaluator()"

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the job server connection, if one was opened."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def run(
        self, metric: Metric, dataset: Dataset, config: RunConfig | None = None,
        target: Model | Agent | None = None, prompt_template: Mapping[str, Any] | None = None,
    ) -> EvaluationResult:  # fmt: skip
        """Score `dataset` with `metric` and return the result (on a server: submit and wait).
        The same outcome here and on a server: a run whose every row failed raises JobError
        (state FAILED, the rows in `error.result`), as `submit(...).get_result()` does."""
        request = Request.of(metric, config, target, prompt_template)
        if self.server is not None:
            job = self._submit_remote(request, dataset)
            job.wait_until_done()
            return job.get_result()
        name, scorer_config = metric.to_scorer()
        evaluated = evaluate(
            name, _readable(load_dataset(dataset)), config=scorer_config, parallelism=request.run.parallelism,
            limit_samples=request.run.limit_samples, target=request.target, prompt_template=request.prompt_template,
        )  # fmt: skip
        state, result, error = outcome(evaluated, metric.result_names())
        if error is not None:
            raise JobError("local-run", state, error, result)
        return result

    def submit(
        self, metric: Metric, dataset: Dataset, config: RunConfig | None = None,
        target: Model | Agent | None = None, prompt_template: Mapping[str, Any] | None = None,
    ) -> Job:  # fmt: skip
        """Start scoring and return its Job at once."""
        request = Request.of(metric, config, target, prompt_template)
        if self.server is not None:
            return self._submit_remote(request, dataset)
        rows = _inline_rows(dataset, request.run.limit_samples)  # read now: an unreadable line stops submit, as on a server
        name, scorer_config = metric.to_scorer()

        def start() -> Any:
            return evaluate_async(
                name, rows, config=scorer_config, parallelism=request.run.parallelism,
                limit_samples=request.run.limit_samples, target=request.target, prompt_template=request.prompt_template,
            )  # fmt: skip

        return LocalJob(start, metric.result_names())

    def _submit_remote(self, request: Request, dataset: Dataset) -> RemoteJob:
        rows = _inline_rows(dataset, request.run.limit_samples)
        info = self._connect().submit(request.spec(rows))
        return RemoteJob(self._client, info.job_id, request.metric.result_names())

    def _connect(self) -> Any:
        if self._client is None:
            from gym_metrics._transport.client import JobClient  # grpc loads here, only for a server

            assert self.server is not None
            self._client = JobClient(self.server, auth_token=self._auth_token, tls_ca=self._tls_ca, timeout=self._timeout)
        return self._client

    def job(self, name: str) -> Job:
        """A job submitted earlier (by this or another process), by its name."""
        if self.server is None:
            raise ValueError("a local Evaluator keeps no jobs across calls: give the job server's address")
        info = self._connect().get(name)  # NOT_FOUND now rather than later
        return RemoteJob(self._client, name, info.spec.get("score_names"))  # named as its submitter named them


def _inline_rows(dataset: Dataset, limit: int | None) -> list[Any]:
    """Rows read here and sent with the spec (the server reads files only under its
    `--data-root`); an unreadable line is an error naming it, as nothing can carry it."""
    rows: list[Any] = []
    for row in _readable(load_dataset(dataset)):
        if limit is not None and len(rows) >= limit:
            break
        rows.append(row)
    return rows


def _readable(rows: Iterable[Any]) -> Iterator[Any]:
    """The rows; an unreadable line of a file stops the run with an error naming it, here as
    on a server (which cannot be sent it), so `run` fails the same way wherever it runs."""
    for row in rows:
        if isinstance(row, RowError):
            raise InvalidInputError("unreadable dataset row", [FieldViolation("dataset", row.reason)])
        yield row


__all__ = ["Dataset", "Evaluator", "Request", "load_dataset"]
