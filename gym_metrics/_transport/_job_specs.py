"""Job specs between their dict form and JobSpec messages, and job states both ways: what the
job client writes and reads and the job servicer reads and writes (no domain import)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from gym_metrics._util.jsonio import dumps
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.models import JobState
from gym_metrics.v1 import jobs_pb2 as pb

STATE_TO_PB: dict[JobState, pb.JobState] = {
    JobState.QUEUED: pb.JOB_STATE_QUEUED,
    JobState.RUNNING: pb.JOB_STATE_RUNNING,
    JobState.SUCCEEDED: pb.JOB_STATE_SUCCEEDED,
    JobState.FAILED: pb.JOB_STATE_FAILED,
    JobState.CANCELLED: pb.JOB_STATE_CANCELLED,
}
PB_TO_STATE: dict[pb.JobState, JobState] = {v: k for k, v in STATE_TO_PB.items()}


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def _loads(text: str, field: str) -> Any:
    """JSON text of a proto field; INVALID_ARGUMENT naming the field when it is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidInputError("invalid job spec", [FieldViolation(field, f"not valid JSON: {exc}")]) from None


def _optional_json(text: str, field: str) -> Any:
    return None if not text else _loads(text, field)


def spec_to_dict(spec: pb.JobSpec, rows: Callable[[Iterable[str]], Any] = list) -> dict[str, Any]:
    """The dict `parse_spec` takes, from a JobSpec message; bad JSON names the proto field.
    Inline rows are kept as `rows(texts)` (the server checks and stores them as RowTexts)."""
    dataset: dict[str, Any] = {}
    source = spec.dataset.WhichOneof("source")
    if source == "rows":
        dataset["rows"] = rows(spec.dataset.rows.rows_json)
    elif source == "path":
        dataset["path"] = spec.dataset.path
    run: dict[str, Any] = {}
    if spec.run.parallelism:
        run["parallelism"] = spec.run.parallelism
    if spec.run.HasField("limit_samples"):
        run["limit_samples"] = spec.run.limit_samples
    return {
        "scorer": spec.scorer,
        "scorer_config": _optional_json(spec.scorer_config_json, "spec.scorer_config_json"),
        "dataset": dataset,
        "run": run,
        "target": _optional_json(spec.target_json, "spec.target_json"),
        "prompt_template": _optional_json(spec.prompt_template_json, "spec.prompt_template_json"),
        "secrets": list(spec.secrets),
        "score_names": dict(spec.score_names) or None,
    }


def dict_to_spec(spec: Mapping[str, Any], *, include_rows: bool = True) -> pb.JobSpec:
    """A JobSpec message from a `parse_spec`-shaped dict (inline rows left out unless
    `include_rows`: a job's answer never carries them)."""
    dataset = spec.get("dataset") or {}
    run = spec.get("run") or {}
    message = pb.JobSpec(
        scorer=spec.get("scorer") or "",
        scorer_config_json="" if spec.get("scorer_config") is None else _dumps(spec["scorer_config"]),
        target_json="" if spec.get("target") is None else _dumps(spec["target"]),
        prompt_template_json="" if spec.get("prompt_template") is None else _dumps(spec["prompt_template"]),
        secrets=list(spec.get("secrets") or ()),
        score_names=dict(spec.get("score_names") or {}),
    )
    if dataset.get("path") is not None:
        message.dataset.path = dataset["path"]
    elif dataset.get("rows") is not None:
        message.dataset.rows.SetInParent()
        if include_rows:
            message.dataset.rows.rows_json.extend([dumps(row) for row in dataset["rows"]])  # read back as Python's json reads (NaN, long integers)
    if run.get("parallelism") is not None:
        message.run.parallelism = int(run["parallelism"])
    if run.get("limit_samples") is not None:
        message.run.limit_samples = int(run["limit_samples"])
    return message


def shown_spec(spec: pb.JobSpec) -> dict[str, Any]:
    """A job's spec as a client shows it: `spec_to_dict` of an answer, where inline rows are
    left out (`dataset` is then `{}`; a file dataset keeps its `path`)."""
    shown = spec_to_dict(spec)
    shown["dataset"].pop("rows", None)
    shown["run"].setdefault("parallelism", None)
    shown["run"].setdefault("limit_samples", None)
    return shown


__all__ = ["PB_TO_STATE", "STATE_TO_PB", "dict_to_spec", "shown_spec", "spec_to_dict"]
