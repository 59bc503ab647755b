"""Jobs and submitted specs between the jobs domain's records and JobService messages (the
server's side: the wire forms both sides share are in gym_metrics._transport._job_specs)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from gym_metrics._util.jsonio import loads

from gym_metrics._transport._job_specs import STATE_TO_PB, dict_to_spec
from gym_metrics._transport._job_specs import spec_to_dict as _spec_to_dict
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.jobs import JobRecord, RowTexts
from gym_metrics.models import JobState
from gym_metrics.v1 import jobs_pb2 as pb


def _rows(rows_json: Iterable[str]) -> RowTexts:
    """Inline rows checked to be JSON and kept as their texts (each parsed and dropped at once:
    no object graph of the whole dataset is built, see RowTexts); a bad one names its index."""
    texts = list(rows_json)
    for i, text in enumerate(texts):
        try:
            loads(text)  # as Python's json reads it, as `evaluate` reads a dataset (NaN, long integers)
        except ValueError as exc:
            raise InvalidInputError("invalid job spec", [FieldViolation(f"spec.dataset.rows.rows_json[{i}]", f"not valid JSON: {exc}")]) from None
    return RowTexts(texts)


_SPEC_FIELDS = {"scorer_config": "scorer_config_json", "config": "scorer_config_json", "target": "target_json",
                "prompt_template": "prompt_template_json"}  # fmt: skip
"""A spec dict's keys whose JobSpec field holds the same value as JSON text."""


def spec_path(field: str, secrets: Sequence[str]) -> str:
    """A job spec violation's path from the top of SubmitJobRequest (docs/grpc.md#errors): the
    spec dict's `scorer` is `spec.scorer`, its `target.url` is `spec.target_json.url`, an
    inline row `dataset.rows.3` is `spec.dataset.rows.rows_json[3]`, a secret by name is its
    position in `spec.secrets`."""
    if field in ("spec", "request_id") or field.startswith("spec."):  # (fields of the request itself)
        return field
    head, _, rest = field.partition(".")
    if head == "secrets" and rest in secrets:
        return f"spec.secrets[{list(secrets).index(rest)}]"
    if head == "dataset" and rest.split(".")[0] == "rows":
        position, _, inner = rest.partition(".")[2].partition(".")
        if position.isdigit():
            return f"spec.dataset.rows.rows_json[{position}]" + (f".{inner}" if inner else "")
        return "spec.dataset.rows.rows_json"
    return "spec." + _SPEC_FIELDS.get(head, head) + (f".{rest}" if rest else "")


def spec_to_dict(spec: pb.JobSpec) -> dict[str, Any]:
    """A submitted spec as `parse_spec` takes it, inline rows checked and kept as RowTexts."""
    return _spec_to_dict(spec, rows=_rows)


def record_to_job(record: JobRecord, rows_per_second: float = 0.0) -> pb.Job:
    """A Job message; the spec's inline rows are left out (rows_total counts them)."""
    spec = orjson.loads(record.spec_json)  # no model validation: only what is shown is read
    job = pb.Job(
        job_id=record.id,
        state=STATE_TO_PB[record.state],
        spec=dict_to_spec(spec, include_rows=False),
        rows_done=record.done,
        rows_failed=record.failed,
        rows_per_second=rows_per_second if record.state is not JobState.QUEUED else 0.0,
        error=record.error or "",
        created_unix=record.created,
        updated_unix=record.updated,
    )
    if record.total is not None:
        job.rows_total = record.total
    return job


__all__ = ["record_to_job", "spec_path", "spec_to_dict"]
