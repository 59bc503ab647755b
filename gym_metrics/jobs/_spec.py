"""What a job is: a scorer, a dataset, a run config, an optional target, and the NAMES of
the secrets it needs (never their values), so a spec can be stored and shown as it is."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pydantic
from pydantic import Field

from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.evaluation import read_rows
from gym_metrics.scorers import RowError

SECRET_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class RowTexts:
    """A dataset's inline rows as JSON texts, each already checked to parse: the job service
    stores them as they arrived and the job parses a row when it scores it, so a large inline
    dataset never becomes a graph of Python objects in the server (building one costs seconds
    of garbage collection, and memory many times its size)."""

    __slots__ = ("texts",)

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowTexts) and other.texts == self.texts

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.is_instance_schema(cls)


class DatasetSpec(pydantic.BaseModel):
    """Inline `rows`, or a JSONL `path` read only under the executor's data root."""

    model_config = pydantic.ConfigDict(extra="forbid")

    rows: RowTexts | list[Any] | None = None
    """The rows themselves (objects, or `RowTexts`), stored once in the job's row table, so a
    resumed job reads the same rows."""
    path: str | None = None
    """A JSONL file relative to the data root; `..` and absolute paths are refused."""

    @pydantic.model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        if (self.rows is None) == (self.path is None):
            raise ValueError("give exactly one of `rows` or `path`")
        return self


class JobRunConfig(pydantic.BaseModel):
    """How hard to run: rows in flight and how many rows (evaluate's knobs)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    parallelism: int = Field(default=16, ge=1)
    limit_samples: int | None = Field(default=None, ge=0)


class JobSpec(pydantic.BaseModel):
    """One durable evaluation: `evaluate(scorer, dataset, config=..., target=...)` as data."""

    model_config = pydantic.ConfigDict(extra="forbid")

    scorer: str = Field(min_length=1)
    """A registered scorer name (`get_scorer`)."""
    scorer_config: dict[str, Any] | None = None
    """The scorer's options; an API key only as `api_key_env` (a secret NAME)."""
    dataset: DatasetSpec
    run: JobRunConfig = Field(default_factory=JobRunConfig)
    target: dict[str, Any] | None = None
    """A target config (TARGET.json's content) for online evaluation."""
    prompt_template: dict[str, Any] | None = None
    """NeMo Evaluator's `{"messages": [...]}`, rendered over each row (with a model target)."""
    secrets: list[str] = Field(default_factory=list)
    """Names of the secrets the job needs, resolved by the executor when the job runs."""
    score_names: dict[str, str] | None = None
    """How the submitting SDK reports the scores (scorer name -> reported name; unlisted scores
    left out), kept so a later look-up names them alike; the job itself does not read it."""

    @pydantic.field_validator("secrets")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        import re

        for name in value:
            if not re.match(SECRET_NAME, name):
                raise ValueError(f"{name!r} is not a secret name (letters, digits, underscores)")
        return value

    @pydantic.model_validator(mode="after")
    def _template_needs_target(self) -> JobSpec:
        if self.prompt_template is not None and self.target is None:
            raise ValueError("prompt_template goes with a target: it builds the request sent to the model")
        return self

    def secret_names(self) -> list[str]:
        """Every secret the job needs: the declared ones and each `api_key_env` it names."""
        names = list(self.secrets)
        for config in (self.scorer_config, self.target):
            env = (config or {}).get("api_key_env")
            if isinstance(env, str) and env not in names:
                names.append(env)
        return names


def parse_spec(data: Mapping[str, Any] | JobSpec) -> JobSpec:
    """A JobSpec from a dict; InvalidInputError naming each bad field."""
    if isinstance(data, JobSpec):
        return data
    try:
        return JobSpec.model_validate(dict(data))
    except pydantic.ValidationError as exc:
        violations = [FieldViolation(".".join(str(p) for p in e["loc"]) or "spec", e["msg"]) for e in exc.errors()]
        raise InvalidInputError("invalid job spec", violations) from None


def dataset_file(spec: JobSpec, data_root: Path | None) -> Path | None:
    """The dataset's file under `data_root` (None for inline rows); InvalidInputError on
    `dataset.path` for an escape (`..`, an absolute path, a symlink out) or no data root."""
    relative = spec.dataset.path
    if relative is None:
        return None
    if data_root is None:
        raise InvalidInputError("no data root", [FieldViolation("dataset.path", "file datasets need a configured data root")])
    parts = Path(relative).parts
    if Path(relative).is_absolute() or ".." in parts or not parts:
        raise InvalidInputError(
            "dataset path escapes the data root",
            [FieldViolation("dataset.path", f"{relative!r} must be relative to the data root, without '..'")],
        )
    root = data_root.resolve()
    try:
        path = (root / relative).resolve()
        inside, found = path.is_relative_to(root), path.is_file()
    except (OSError, ValueError) as exc:  # a NUL byte, a name past the system's limit, a link loop
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInputError("bad dataset path", [FieldViolation("dataset.path", f"{relative[:200]!r}: {why}")]) from None
    if not inside:
        raise InvalidInputError(
            "dataset path escapes the data root", [FieldViolation("dataset.path", f"{relative!r} resolves outside the data root")]
        )
    if not found:
        raise InvalidInputError("dataset not found", [FieldViolation("dataset.path", f"{relative!r} is not a file under the data root")])
    return path


def iter_rows(spec: JobSpec, data_root: Path | None) -> Iterator[Any | RowError]:
    """The job's rows in order, `limit_samples` applied; a file is read lazily."""
    path = dataset_file(spec, data_root)
    inline = spec.dataset.rows
    if isinstance(inline, RowTexts):
        rows: Iterator[Any] = map(orjson.loads, inline.texts)  # a spec not stored yet
    else:
        rows = iter(inline or ()) if path is None else read_rows(path)
    limit = spec.run.limit_samples
    for index, row in enumerate(rows):
        if limit is not None and index >= limit:
            return
        yield row


def count_rows(spec: JobSpec, data_root: Path | None) -> int:
    """How many rows `iter_rows` gives, without parsing them (non-blank lines of a file)."""
    path = dataset_file(spec, data_root)
    if path is None:
        n = len(spec.dataset.rows or ())
    else:
        with open(path, "rb") as f:
            n = sum(1 for line in f if not line.isspace())
    limit = spec.run.limit_samples
    return n if limit is None else min(n, limit)


__all__ = ["DatasetSpec", "JobSpec", "RowTexts", "JobRunConfig", "count_rows", "dataset_file", "iter_rows", "parse_spec"]
