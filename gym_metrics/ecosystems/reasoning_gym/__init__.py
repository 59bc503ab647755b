"""reasoning-gym's procedurally generated tasks on gym-metrics (`gym-metrics[reasoning-gym]`):
its datasets as task rows that carry their own answer key (`dataset_rows`, `mix_rows`), scored
exactly as reasoning-gym scores them (`Scoring`), with metrics per dataset.

reasoning-gym is imported on first use, never when this package loads."""

from gym_metrics.ecosystems.reasoning_gym._library import (
    INSTALL_HINT,
    ReasoningGymMissingError,
    dataset_names,
    library,
    system_prompts,
    version,
)
from gym_metrics.ecosystems.reasoning_gym._metrics import FIELD_PREFIX, dataset_field, per_dataset_metrics
from gym_metrics.ecosystems.reasoning_gym._rows import (
    DEFAULT_AGENT,
    DEFAULT_PROMPT,
    NO_PROMPT,
    DatasetRef,
    MixPart,
    dataset_rows,
    entry_of,
    mix_rows,
    rebuild_entry,
)
from gym_metrics.ecosystems.reasoning_gym._scoring import MAX_DATASETS, Score, Scoring, response_text
from gym_metrics.ecosystems.reasoning_gym._types import json_bytes, python_types, restore, to_json
from gym_metrics.ecosystems.reasoning_gym._write import RowsRequest, write_rows

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_PROMPT",
    "FIELD_PREFIX",
    "INSTALL_HINT",
    "MAX_DATASETS",
    "NO_PROMPT",
    "DatasetRef",
    "MixPart",
    "ReasoningGymMissingError",
    "RowsRequest",
    "Score",
    "Scoring",
    "dataset_field",
    "dataset_names",
    "dataset_rows",
    "entry_of",
    "json_bytes",
    "library",
    "mix_rows",
    "per_dataset_metrics",
    "python_types",
    "rebuild_entry",
    "response_text",
    "restore",
    "system_prompts",
    "to_json",
    "version",
    "write_rows",
]
