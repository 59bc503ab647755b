"""NeMo Gym's per-server task-data schemas (`nemo_gym.task_data`), so environments and their
tests that load a server's `task_data.py` and check dataset rows against it run unchanged.

A server (or a self-contained agent) may ship `task_data.py` beside its `app.py`, exporting
`TaskData`: a Pydantic model, or any type `TypeAdapter` takes (e.g. an annotated discriminated
union). The schema is flat: framework keys are not part of it, and a row's `verifier_metadata`
or `task_data` wrapper is spliced up to the top level before validation, so legacy, flat and
migrated rows all validate against the same schema.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, get_args

from pydantic import BaseModel, TypeAdapter

from gym_metrics.nemo_gym.episode_types import is_materialized_task_row

TASK_DATA_MODULE_NAME = "task_data"
TASK_DATA_EXPORT_NAME = "TaskData"
LEGACY_METADATA_KEY = "verifier_metadata"
TASK_DATA_ROW_KEY = "task_data"

# Keys the framework owns in every row; all other keys belong to the task and to its schema.
RESERVED_ROW_KEYS = frozenset({"responses_create_params", "agent_ref", "task_source", "_ng_task_index", "_ng_rollout_index"})


class TaskDataSchemaError(Exception):
    """A `task_data.py` that exists but cannot serve as a schema (fails to import, no usable
    `TaskData`), told apart from a server that simply has none."""


def find_server_dir(server_name: str, base_folder: str = "resources_servers") -> Optional[Path]:
    """`<base_folder>/<server_name>` under the first search root that has it as a folder, or
    None. No venv marker is required: a schema is readable before the server is set up."""
    from gym_metrics.nemo_gym import _resolve_under_cwd_or_install

    found: Path = _resolve_under_cwd_or_install(Path(base_folder) / server_name, validator=Path.is_dir)
    return found if found.is_dir() else None


def load_task_data_schema(server_dir: Path) -> Optional[TypeAdapter[Any]]:
    """A TypeAdapter over `<server_dir>/task_data.py`'s `TaskData`; None when the server ships
    no such file, TaskDataSchemaError when it ships a broken one."""
    module_path = server_dir / f"{TASK_DATA_MODULE_NAME}.py"
    if not module_path.is_file():
        return None
    module_name = f"nemo_gym_task_data.{server_dir.name}"
    spec = importlib.util.spec_from_file_location(module_name, module_path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always gets a spec
        raise TaskDataSchemaError(f"Could not build an import spec for {module_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # registered first: dataclasses and typing look the module up there
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise TaskDataSchemaError(f"Failed to import {module_path}: {exc}") from exc
    exported = getattr(module, TASK_DATA_EXPORT_NAME, None)
    if exported is None:
        raise TaskDataSchemaError(
            f"{module_path} does not export `{TASK_DATA_EXPORT_NAME}`. Export a Pydantic model "
            "(or a TypeAdapter-compatible union alias) under that name."
        )
    try:
        return TypeAdapter(exported)
    except Exception as exc:
        raise TaskDataSchemaError(f"`{TASK_DATA_EXPORT_NAME}` in {module_path} is not TypeAdapter-compatible: {exc}") from exc


def normalize_task_fields(row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A row's task-owned fields, flattened: framework keys dropped, then the `verifier_metadata`
    and `task_data` dicts lifted to the top level. A key found twice with different values is
    kept at its first value and named in the returned conflicts; a non-dict wrapper stays as
    it is, so the schema rejects it."""
    fields = {key: value for key, value in row.items() if key not in RESERVED_ROW_KEYS}
    conflicts: list[str] = []
    for wrapper in (LEGACY_METADATA_KEY, TASK_DATA_ROW_KEY):
        inner = fields.pop(wrapper, None)
        if isinstance(inner, dict):
            for key, value in inner.items():
                if key in fields and fields[key] != value:
                    conflicts.append(key)
                else:
                    fields[key] = value
        elif inner is not None:
            fields[wrapper] = inner
    return fields, conflicts


def _count(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


@dataclass
class TaskDataValidationReport:
    """What checking one dataset file against one server's schema found."""

    server_name: str
    dataset_fpath: str
    rows: int = 0
    error_rows: int = 0
    errors: list[str] = field(default_factory=list)
    unknown_keys: dict[str, int] = field(default_factory=dict)
    conflicting_keys: dict[str, int] = field(default_factory=dict)
    misplaced_keys: dict[str, int] = field(default_factory=dict)

    MAX_RECORDED_ERRORS = 5  # a class constant, not a field: only the first few messages are kept

    @property
    def clean(self) -> bool:
        return not (self.error_rows or self.conflicting_keys or self.misplaced_keys or self.unknown_keys)

    def _fail(self, message: str) -> None:
        """Count a failed row, keeping its message while there is room."""
        self.error_rows += 1
        if len(self.errors) < TaskDataValidationReport.MAX_RECORDED_ERRORS:
            self.errors.append(message)

    def summary(self) -> str:
        def listed(counts: dict[str, int]) -> str:
            return ", ".join(f"{key} ({n} rows)" for key, n in sorted(counts.items()))

        lines = [
            f"{self.dataset_fpath}: {self.error_rows}/{self.rows} rows failed task_data validation "
            f"against the `{self.server_name}` schema."
        ]
        lines += [f"  row {message}" for message in self.errors]
        if self.error_rows > len(self.errors):
            lines.append(f"  ... and {self.error_rows - len(self.errors)} more rows")
        if self.conflicting_keys:
            lines.append(f"  keys with DIFFERENT values top-level vs verifier_metadata (ambiguous): {listed(self.conflicting_keys)}")
        if self.misplaced_keys:
            lines.append(
                "  keys this server's wire reads from verifier_metadata but found top-level "
                f"(the server will not see them): {listed(self.misplaced_keys)}"
            )
        if self.unknown_keys:
            lines.append(f"  keys not declared by the schema (typo, or missing schema field?): {listed(self.unknown_keys)}")
        return "\n".join(lines)


def _models_in(tp: Any) -> list[type[BaseModel]]:
    """The Pydantic models a type is or names (union members, Annotated targets, type args)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [model for arg in get_args(tp) for model in _models_in(arg)]


def legacy_metadata_fields(adapter: TypeAdapter[Any]) -> frozenset[str]:
    """The schema's fields marked `legacy_location: verifier_metadata`: today's servers read
    them only from inside `verifier_metadata`, so a top-level copy goes unseen."""
    return frozenset(
        name
        for model in _models_in(getattr(adapter, "_type", None))
        for name, info in model.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("legacy_location") == LEGACY_METADATA_KEY
    )


class TaskDataValidator:
    """Checks dataset rows one by one against a server's schema, adding to `report`."""

    def __init__(self, server_name: str, adapter: TypeAdapter[Any], dataset_fpath: str) -> None:
        self._adapter = adapter
        self._legacy_fields = legacy_metadata_fields(adapter)
        self.report = TaskDataValidationReport(server_name=server_name, dataset_fpath=dataset_fpath)

    def _unwrap_task_input(self, row_index: int, row: Mapping[str, Any]) -> tuple[dict[str, Any], bool] | None:
        """A materialized task's fields (its `task_input.task_data` merged with the rest of
        `task_input`) and whether it had a `task_data`; None (a failed row) when malformed."""
        task_input = row.get("task_input")
        if not isinstance(task_input, Mapping):
            self.report._fail(f"{row_index}: task_input must be an object, got {type(task_input).__name__}")
            return None
        has_task_data = "task_data" in task_input
        task_data = task_input.get("task_data")
        if has_task_data and not isinstance(task_data, Mapping):
            self.report._fail(f"{row_index}: task_input.task_data must be an object, got {type(task_data).__name__}")
            return None
        fields = dict(task_data or {})
        for key, value in task_input.items():
            if key == "task_data":
                continue
            if key in fields and fields[key] != value:
                _count(self.report.conflicting_keys, key)
            else:
                fields[key] = value
        return fields, has_task_data

    def validate_row(self, row_index: int, row: dict[str, Any]) -> None:
        self.report.rows += 1
        migrated = False
        if is_materialized_task_row(row):
            unwrapped = self._unwrap_task_input(row_index, row)
            if unwrapped is None:
                return
            row, migrated = unwrapped
        # A field the schema says today's wire reads from verifier_metadata, found only at the
        # top level, validates (schemas are flat) yet the server would never see it. Rows in the
        # migrated shape (a task_data key) are exempt: top level is where such fields end up.
        if self._legacy_fields and not migrated and TASK_DATA_ROW_KEY not in row:
            nested = row.get(LEGACY_METADATA_KEY)
            for key in (row.keys() & self._legacy_fields) - set(nested if isinstance(nested, dict) else ()):
                _count(self.report.misplaced_keys, key)
        subject, conflicts = normalize_task_fields(row)
        for key in conflicts:
            _count(self.report.conflicting_keys, key)
        try:
            validated = self._adapter.validate_python(subject)
        except Exception as exc:
            one_line = str(exc).strip().replace("\n", "; ")
            self.report._fail(f"{row_index}: {one_line[:400]}")
            return
        # With extra="allow" the chosen model (a union's member too) keeps undeclared keys aside.
        if isinstance(validated, BaseModel):
            for key in getattr(validated, "__pydantic_extra__", None) or {}:
                _count(self.report.unknown_keys, key)


def validate_jsonl_rows(server_name: str, adapter: TypeAdapter[Any], dataset_fpath: str, lines: Iterable[str]) -> TaskDataValidationReport:
    """Check a JSONL file's lines against one schema; blank lines are skipped but keep their
    place in the row numbering."""
    validator = TaskDataValidator(server_name=server_name, adapter=adapter, dataset_fpath=dataset_fpath)
    for index, line in enumerate(lines):
        if line.strip():
            validator.validate_row(index, json.loads(line.strip()))
    return validator.report


__all__ = [
    "LEGACY_METADATA_KEY",
    "RESERVED_ROW_KEYS",
    "TASK_DATA_EXPORT_NAME",
    "TASK_DATA_MODULE_NAME",
    "TASK_DATA_ROW_KEY",
    "TaskDataSchemaError",
    "TaskDataValidationReport",
    "TaskDataValidator",
    "find_server_dir",
    "is_materialized_task_row",
    "legacy_metadata_fields",
    "load_task_data_schema",
    "normalize_task_fields",
    "validate_jsonl_rows",
]
