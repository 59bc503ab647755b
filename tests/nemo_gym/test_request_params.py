"""The port's `NeMoGymResponseCreateParamsNonStreaming` (the `responses_create_params` of every
verify and run request) takes a request's parameters as NeMo Gym 0.7.0's does: the same ones
refused (a tool with a key no tool has, or without `strict`; an `include`, `tool_choice` or
reasoning effort the API does not name; metadata that is not text), and the others dumped as the
same JSON text, keys in NeMo Gym's order (a tool's as the SDK declares them, whatever order the
row gave). Recorded by scripts/make_nemo_request_reference.py in a nemo-gym venv."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming

CASES = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "nemo_gym_requests" / "cases.jsonl").read_text().splitlines()]


def dumped(params: Any) -> str | None:
    try:
        model = NeMoGymResponseCreateParamsNonStreaming.model_validate(params)
    except ValueError:  # pydantic's ValidationError
        return None
    return json.dumps(model.model_dump(mode="json"))


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_request_params_are_taken_as_nemo_gym_takes_them(case: dict[str, Any]) -> None:
    assert dumped(case["params"]) == case["dumped"]
