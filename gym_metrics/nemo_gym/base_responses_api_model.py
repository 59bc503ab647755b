"""What environments use of NeMo Gym's model-server module (`nemo_gym.base_responses_api_model`):
whether a run records its model calls, from the global config (collect's
`--capture-model-calls` and `--trajectory` set it; gym-metrics' model targets record the calls
themselves, so the model-server side of NeMo Gym is not here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter

from gym_metrics.nemo_gym.global_config import OBSERVABILITY_ENABLED_KEY_NAME


def observability_enabled_from_config(global_config_dict: Any) -> bool:
    """The run-wide `observability_enabled` flag, read as a pydantic bool ("true", 1, ...; False
    when unset). NeMo Gym also requires its capture folder then; here no folder is needed."""
    given = global_config_dict.get(OBSERVABILITY_ENABLED_KEY_NAME, False) if isinstance(global_config_dict, Mapping) else False
    return bool(TypeAdapter(bool).validate_python(given))


__all__ = ["observability_enabled_from_config"]
