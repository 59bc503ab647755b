"""TARGET.json parsing: both kinds, short names, and errors that name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gym_metrics.errors import InvalidInputError
from gym_metrics.targets import AgentTargetConfig, ModelTargetConfig, load_target, parse_target

MODEL = {
    "type": "model",
    "url": "http://127.0.0.1:8000/v1",
    "model": "qwen",
    "api": "responses",
    "api_key_env": "POLICY_KEY",
    "inference": {"temperature": 0.6, "top_p": 0.95, "max_tokens": 512, "seed": 3},
    "system_prompt": "Be brief.",
    "reasoning": {"end_token": "</think>"},
    "timeout_s": 12,
    "max_retries": 5,
    "concurrency": 64,
}


def test_a_model_target_parses_with_its_short_names() -> None:
    config = parse_target(MODEL)
    assert isinstance(config, ModelTargetConfig)
    assert (config.api, config.model, config.inference.seed, config.reasoning.end_token) == ("responses", "qwen", 3, "</think>")
    assert (config.timeout_seconds, config.max_retries, config.max_concurrency) == (12, 5, 64)
    assert config.endpoint() == "http://127.0.0.1:8000/v1/responses"


def test_type_defaults_to_model_and_api_to_chat() -> None:
    config = parse_target({"url": "http://h/v1/", "model": "m"})
    assert isinstance(config, ModelTargetConfig)
    assert config.endpoint() == "http://h/v1/chat/completions"


def test_an_agent_target_parses() -> None:
    config = parse_target(
        {"type": "agent", "url": "http://h/run", "body": {"q": "{{ item.user_input }}"}, "response_path": "$.answer", "tool_calls_path": "$.calls"}
    )
    assert isinstance(config, AgentTargetConfig)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({**MODEL, "inference": {"temperature": -1}}, "target.inference.temperature"),
        ({**MODEL, "api": "completions"}, "target.api"),
        ({**MODEL, "url": "ftp://x"}, "target.url"),
        ({**MODEL, "reasoning": {"end_tokn": "x"}}, "target.reasoning.end_tokn"),
        ({k: v for k, v in MODEL.items() if k != "model"}, "target.model"),
        ({**MODEL, "type": "robot"}, "target.type"),
        ({"type": "agent", "url": "http://h", "body": {"q": "{{ item. }}"}, "response_path": "$.a"}, "target.body"),
        ({"type": "agent", "url": "http://h", "body": {}, "response_path": "$[[["}, "target.response_path"),
        ({"type": "agent", "url": "http://h", "response_path": "$.a"}, "target.body"),
    ],
)
def test_errors_name_the_field(data: dict, field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_target(data)
    assert any(v.field == field for v in info.value.violations), info.value.violations
    assert field in str(info.value)


def test_both_a_short_and_a_long_name_is_an_error() -> None:
    with pytest.raises(InvalidInputError, match="timeout_s"):
        parse_target({**MODEL, "timeout_seconds": 3})


def test_load_target_names_the_file(tmp_path: Path) -> None:
    good = tmp_path / "target.json"
    good.write_text(json.dumps(MODEL))
    assert isinstance(load_target(good), ModelTargetConfig)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**MODEL, "max_retries": -1}))
    with pytest.raises(InvalidInputError, match=rf"{bad}\.max_retries"):
        load_target(bad)
    (tmp_path / "junk.json").write_text("{nope")
    with pytest.raises(InvalidInputError, match="junk.json"):
        load_target(tmp_path / "junk.json")
    with pytest.raises(InvalidInputError, match="missing.json"):
        load_target(tmp_path / "missing.json")
