"""NeMo Gym's `materialize_task`: a flat dataset row as a task of a taskset, the envelope an
environment server's episodes take (`{"task_id": {taskset, task_id}, "task_input": {...}}`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from gym_metrics.nemo_gym.episode_types import TaskId
from gym_metrics.nemo_gym.global_config import AGENT_REF_KEY_NAME, SKILLS_REF_KEY_NAME, TASK_INDEX_KEY_NAME, TASK_SOURCE_KEY_NAME

_ID_KEYS = ("task_id", "problem_id", "instance_id")
"""The row fields that name a task, first given first."""

_ROUTING_KEYS = frozenset({AGENT_REF_KEY_NAME, TASK_SOURCE_KEY_NAME, SKILLS_REF_KEY_NAME})
"""Where the row goes, not what the task is: left out of `task_input` (so are `_ng_` keys)."""


def materialize_task(row: Mapping[str, Any], *, taskset: str, task_index: Optional[int] = None) -> dict[str, Any]:
    """The task of `row`: its id from the row's own (`task_id`, `problem_id`, `instance_id`),
    else its position (`_ng_task_index`, else `task_index`); its input the row's fields but
    routing and collector keys. A row that is already a task is refused (ValueError)."""
    if "task_input" in row or isinstance(row.get("task_id"), Mapping):
        raise ValueError("Expected a flat dataset row, not an already materialized task")
    named = next((row[key] for key in _ID_KEYS if row.get(key) is not None), None)
    if named is not None:
        task_id = str(named)
    else:
        index = row.get(TASK_INDEX_KEY_NAME, task_index)
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError("A flat row without a task ID requires a non-negative task_index")
        task_id = str(index)
    return {
        "task_id": TaskId(taskset=taskset, task_id=task_id).model_dump(mode="json"),
        "task_input": {key: value for key, value in row.items() if key not in _ROUTING_KEYS and not key.startswith("_ng_")},
    }


__all__ = ["materialize_task"]
