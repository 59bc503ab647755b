"""RowMapping's less common samples, as every trainer adaptor maps them (nothing of a trainer is
needed): functions that replace the mappings, a prompt that is neither text nor messages, a
conversation with no assistant message, content given as parts, a numpy-like scalar, and an
episode whose turns do not lay end to end."""

from __future__ import annotations

from typing import Any

import pytest

from gym_metrics.integrations import RolloutFailed, RowMapping, plain_value, trained_sequence


def test_functions_given_replace_the_prompt_and_completion_mappings() -> None:
    mapping = RowMapping(prompt_to_request=lambda p: {"input": f"<{p}>"}, completion_to_response=lambda c: {"output": [c]})
    assert mapping.row("q", "4") == {"expected_answer": "4", "responses_create_params": {"input": "<q>"}}
    assert mapping.completion("a") == {"output": ["a"]}


def test_a_prompt_neither_text_nor_messages_is_sent_as_its_text() -> None:
    assert RowMapping().request(42) == {"input": [{"role": "user", "content": "42"}]}
    assert RowMapping().request(["a", "b"]) == {"input": [{"role": "user", "content": "['a', 'b']"}]}


@pytest.mark.parametrize(
    ("completion", "sent"),
    [
        ([{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}], ""),  # no assistant message: nothing answered
        ([{"role": "assistant", "content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}, "skip"]}], "42"),
        ([{"content": None}], ""),  # a message without role is the assistant's
        ([{"role": "assistant", "content": 7}], "7"),
        (3.5, "3.5"),
    ],
)
def test_a_completions_text(completion: Any, sent: str) -> None:
    assert RowMapping().completion(completion) == sent


class Scalar:
    """A numpy-like scalar: `.item()` but no `.tolist()`."""

    def item(self) -> int:
        return 5


def test_a_value_with_item_only_becomes_its_item() -> None:
    assert plain_value({"a": [Scalar(), (1, Scalar())]}) == {"a": [5, [1, 5]]}


def turn(prompt: list[int], generated: list[int]) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [], "prompt_token_ids": prompt,
            "generation_token_ids": generated, "generation_log_probs": [-0.5] * len(generated)}  # fmt: skip


def test_an_episode_whose_turns_do_not_lay_end_to_end_is_refused_naming_it() -> None:
    row = {"reward": 1.0, "response": {"output": [turn([1, 2], [3]), turn([9, 9, 9, 9], [4])]}}
    with pytest.raises(RolloutFailed) as err:
        trained_sequence(row, "episode 7")
    assert str(err.value) == "episode 7 cannot be laid end to end: turn 1: its prompt does not begin with the 3 tokens of the turns before it"
    ok = {"reward": 1.0, "response": {"output": [turn([1, 2], [3]), turn([1, 2, 3, 8], [4])]}}
    assert trained_sequence(ok, "episode 8").token_ids == [1, 2, 3, 8, 4]
