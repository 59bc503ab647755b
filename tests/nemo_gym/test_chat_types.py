"""NeMo Gym's Chat Completions models, ported: every request and completion of
tests/data/nemo_gym_chat/types.json (recorded from NeMo Gym 0.7.0 by
scripts/make_nemo_chat_types_reference.py) validated by gym_metrics.nemo_gym.openai_utils gives
NeMo Gym's dumps, message classes and refusals (where and why, error for error)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.nemo_gym.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymChatCompletionMessage,
    NeMoGymChoice,
)

RECORDED = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_chat" / "types.json").read_text())


def _ours(model: Any, value: dict[str, Any]) -> dict[str, Any]:
    try:
        made = model.model_validate(value)
    except Exception as error:  # a refusal is compared as data
        return {"input": value, "refused": sorted({json.dumps([list(e["loc"]), e["type"]]) for e in error.errors()})}  # type: ignore[attr-defined]
    out = {"input": value, "dump": made.model_dump(mode="json"), "dump_set": made.model_dump(mode="json", exclude_unset=True)}
    if hasattr(made, "choices"):
        out["message_types"] = [type(choice.message).__name__ for choice in made.choices]
    return out


@pytest.mark.parametrize("name", sorted(RECORDED["requests"]))
def test_requests_validate_and_dump_as_nemo_gym_s(name: str) -> None:
    case = RECORDED["requests"][name]
    assert _ours(NeMoGymChatCompletionCreateParamsNonStreaming, case["input"]) == case


@pytest.mark.parametrize("name", sorted(RECORDED["completions"]))
def test_completions_validate_and_dump_as_nemo_gym_s(name: str) -> None:
    case = RECORDED["completions"][name]
    assert _ours(NeMoGymChatCompletion, case["input"]) == case


def test_a_choice_built_by_hand_reads_as_an_environment_s_test_builds_it() -> None:
    """bbq's and gdp_pdf's tests build a judge's answer from the parts (NeMoGymChoice,
    NeMoGymChatCompletionMessage) and read `choices[0].message.content`."""
    message = NeMoGymChatCompletionMessage(role="assistant", content='{"verdict": "A"}')
    answer = NeMoGymChatCompletion(id="c", object="chat.completion", created=0, model="judge",
                                   choices=[NeMoGymChoice(index=0, finish_reason="stop", message=message)])  # fmt: skip
    again = NeMoGymChatCompletion.model_validate_json(answer.model_dump_json())
    assert again.choices[0].message.content == '{"verdict": "A"}'
    assert type(again.choices[0].message) is NeMoGymChatCompletionMessage
