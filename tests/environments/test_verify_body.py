"""A verify body sent as JSON text: parsed, then validated as Python objects (as FastAPI does for
NeMo Gym), with JSON-mode validation behind it, so a body is accepted or refused, and its errors
worded, as before: strict fields still take JSON's strings for dates and arrays for tuples."""

from __future__ import annotations

import datetime

import orjson
import pytest
from pydantic import ConfigDict, Field

from gym_metrics.environments import SimpleResourcesServer
from gym_metrics.errors import InvalidInputError
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse


class Strict(BaseVerifyRequest):
    model_config = ConfigDict(strict=True)

    when: datetime.date
    pair: tuple[int, int]


class Lax(BaseVerifyRequest):
    count: int = 0
    ratio: float = 0.0
    tags: frozenset[str] = Field(default_factory=frozenset)


class StrictEnv(SimpleResourcesServer):
    async def verify(self, body: Strict) -> BaseVerifyResponse:
        return BaseVerifyResponse(reward=float(body.pair[0] + body.pair[1]))


class LaxEnv(SimpleResourcesServer):
    async def verify(self, body: Lax) -> BaseVerifyResponse:
        return BaseVerifyResponse(reward=body.count * body.ratio)


BASE = {"responses_create_params": {"input": []}, "response": {}}


def text(**fields: object) -> bytes:
    return orjson.dumps({**BASE, **fields})


def test_strict_fields_take_json_strings_and_arrays_from_text() -> None:
    env = StrictEnv()
    request = env.parse_verify_request(text(when="2026-11-29", pair=[2, 3]))
    assert request.when == datetime.date(2026, 11, 29) and request.pair == (2, 3)  # type: ignore[attr-defined]
    # a mapping is Python objects already: a strict date refuses a string there, as it always did
    with pytest.raises(InvalidInputError, match="when"):
        env.parse_verify_request({**BASE, "when": "2026-11-29", "pair": [2, 3]})


def test_text_and_mapping_give_the_same_request() -> None:
    env = LaxEnv()
    fields = {"count": "7", "ratio": 2, "tags": ["a", "b", "a"], "note": {"kept": [1, 2.5, None]}}
    from_text = env.parse_verify_request(text(**fields))
    from_mapping = env.parse_verify_request({**BASE, **fields})
    assert from_text == from_mapping
    assert from_text.count == 7 and from_text.ratio == 2.0 and isinstance(from_text.ratio, float)  # type: ignore[attr-defined]
    assert from_text.tags == frozenset({"a", "b"}) and from_text.note == {"kept": [1, 2.5, None]}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (text(count="seven"), "body_json.count", "valid integer"),
        (text(tags="abc"), "body_json.tags", "valid array"),  # JSON mode's words (Python mode's: "valid frozenset")
        (b'{"responses_create_params": {"input": []}, "count": 1', "body_json", "EOF"),
        (b"[1, 2]", "body_json", "got list"),
    ],
)
def test_refused_bodies_name_the_field_as_json_mode_words_it(body: bytes, field: str, words: str) -> None:
    with pytest.raises(InvalidInputError) as raised:
        LaxEnv().parse_verify_request(body, row=4)
    violation = raised.value.violations[0]
    assert violation.field == field and words in violation.description and violation.row == 4


def test_nesting_past_200_levels_is_refused_and_200_is_not() -> None:
    env = LaxEnv()
    deep = text(note="x")[:-1] + b',"pad":' + b"[" * 199 + b"]" * 199 + b"}"
    assert env.parse_verify_request(deep).pad is not None  # type: ignore[attr-defined]
    deeper = text(note="x")[:-1] + b',"pad":' + b"[" * 300 + b"]" * 300 + b"}"
    with pytest.raises(InvalidInputError) as raised:
        env.parse_verify_request(deeper)
    assert "200 levels" in raised.value.violations[0].description


async def test_verify_json_scores_a_text_body() -> None:
    reward, answer = await LaxEnv().verify_json(text(count=3, ratio=0.5).decode())
    assert reward == 1.5 and orjson.loads(answer)["reward"] == 1.5


class Scores(SimpleResourcesServer):
    """A verify whose custom fields come from a scoring library (numpy scalars), or hold
    something JSON cannot."""

    async def verify(self, body: Lax) -> BaseVerifyResponse:
        import numpy as np

        if body.count < 0:
            return BaseVerifyResponse(reward=1.0, n_correct=np.int64(3), opened=object())  # type: ignore[call-arg]
        return BaseVerifyResponse(reward=1.0, n_correct=np.int64(3), score=np.float32(0.5), passed=np.bool_(True))  # type: ignore[call-arg]


async def test_numpy_scalars_in_the_answer_are_numbers_and_what_json_cannot_hold_is_named() -> None:
    """Both were `PydanticSerializationError: Unable to serialize unknown type`, no field named."""
    env = Scores()
    reward, answer = await env.verify_json(text(count=1))
    got = orjson.loads(answer)
    assert reward == 1.0 and (got["n_correct"], got["score"], got["passed"]) == (3, 0.5, True)
    with pytest.raises(TypeError, match=r"its answer's field 'opened' holds a value JSON cannot hold"):
        await env.verify_json(text(count=-1))
