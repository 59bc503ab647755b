"""NeMo Gym's prompt templates: filled from a row's fields, refused beside a pre-filled input."""

from __future__ import annotations

from pathlib import Path

import pytest

from gym_metrics.nemo_gym.prompt import (
    PromptConfig,
    apply_prompt_to_row,
    fill_prompt,
    load_prompt_config,
    validate_prompt_compatibility,
)


def test_a_template_fills_system_and_user_messages(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("system: 'Answer in {lang}.'\nuser: 'Q: {question} {{braces}}'\n")
    config = load_prompt_config(str(path))
    row = {"question": "2+2?", "lang": "French", "responses_create_params": {"temperature": 0.5}}
    assert fill_prompt(config, row) == [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Q: 2+2? {braces}"},
    ]
    applied = apply_prompt_to_row(row, config)
    assert applied["responses_create_params"] == {"temperature": 0.5, "input": fill_prompt(config, row)}
    assert row["responses_create_params"] == {"temperature": 0.5}  # the row is not changed


def test_a_missing_field_and_a_prefilled_input_are_refused() -> None:
    config = PromptConfig(user="{question}")
    with pytest.raises(KeyError, match="references field 'question'.*only has fields: \\['id'\\]"):
        fill_prompt(config, {"id": 1})
    rows = [{"x": 1}, {"responses_create_params": {"input": "hi"}}, {"responses_create_params": {"input": []}}]
    with pytest.raises(ValueError, match=r"Violating rows: \[1\]"):
        validate_prompt_compatibility(rows, config)
