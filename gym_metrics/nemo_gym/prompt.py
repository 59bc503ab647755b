"""NeMo Gym's prompt templates: a YAML file with a `user` template (and an optional `system`
one) whose `{field}` placeholders are filled from a row's top-level fields, giving the messages
of `responses_create_params.input`. A template and a pre-filled input are mutually exclusive."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional

from pydantic import BaseModel

from gym_metrics.nemo_gym._compose import resolve_under, search_roots
from gym_metrics.nemo_gym.global_config import parent_dir


class PromptConfig(BaseModel):
    user: str
    system: Optional[str] = None


@lru_cache(maxsize=64)
def load_prompt_config(path: str) -> PromptConfig:
    import yaml

    found = resolve_under(path, search_roots(parent_dir()))  # the working directory, then the served tree
    return PromptConfig.model_validate(yaml.safe_load(found.read_text()))


def fill_prompt(prompt_config: PromptConfig, row: dict[str, Any]) -> list[dict[str, str]]:
    """The system (when templated) and user messages for `row`; a placeholder the row lacks is a
    KeyError naming it and the fields the row has."""
    try:
        messages = [{"role": "system", "content": prompt_config.system.format_map(row)}] if prompt_config.system is not None else []
        messages.append({"role": "user", "content": prompt_config.user.format_map(row)})
    except KeyError as exc:
        raise KeyError(f"Prompt template references field {exc} but the data row only has fields: {list(row)}") from None
    return messages


def validate_prompt_compatibility(rows: list[dict[str, Any]], prompt_config: PromptConfig) -> None:
    """Refuse rows that already hold `responses_create_params.input` (naming every one)."""
    conflicting = [i for i, row in enumerate(rows) if row.get("responses_create_params", {}).get("input")]
    if conflicting:
        raise ValueError(
            "Some rows have responses_create_params.input but prompt_config is also specified. "
            f"These are mutually exclusive. Use one or the other. Violating rows: {conflicting}"
        )


def apply_prompt_to_row(row: dict[str, Any], prompt_config: PromptConfig) -> dict[str, Any]:
    """A copy of `row` whose `responses_create_params.input` is the filled template (its other
    create parameters kept)."""
    params = row.get("responses_create_params")
    params = dict(params) if isinstance(params, dict) else {}
    params["input"] = fill_prompt(prompt_config, row)
    return {**row, "responses_create_params": params}


__all__ = ["PromptConfig", "apply_prompt_to_row", "fill_prompt", "load_prompt_config", "validate_prompt_compatibility"]
