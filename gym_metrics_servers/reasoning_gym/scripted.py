"""Answers of every kind to a reasoning-gym entry, written from its own answer: what the sample,
`gym-metrics demo --reasoning-gym` and the tests put in a scripted policy's mouth.

The kinds: `right` (the answer in `<answer>` tags, after some thinking), `partly` (the answer
with more text around it, which reasoning-gym's default scorer credits in part), `wrong` (another
answer), `no_tags` (the answer said without tags: nothing to extract), `unclosed` (an `<answer>`
never closed), `empty` (empty tags) and `last_wins` (a wrong answer, then the right one: the
last `<answer>` counts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KINDS = ("right", "partly", "wrong", "no_tags", "unclosed", "empty", "last_wins")


def answer_text(entry: Mapping[str, Any], kind: str) -> str:
    """The model output of `kind` for `entry` (module docstring)."""
    answer = "" if entry.get("answer") is None else str(entry["answer"])
    think = "<think>Working through the question step by step.</think>\n"
    texts = {
        "right": f"{think}<answer>{answer}</answer>",
        "partly": f"{think}<answer>{answer} (my final answer)</answer>",
        "wrong": f"{think}<answer>{wrong_answer(answer)}</answer>",
        "no_tags": f"{think}The answer is {answer}.",
        "unclosed": f"{think}<answer>{answer}",
        "empty": f"{think}<answer></answer>",
        "last_wins": f"{think}<answer>{wrong_answer(answer)}</answer> No, wait.\n<answer>{answer}</answer>",
    }
    return texts[kind]


def wrong_answer(answer: str) -> str:
    """Another answer: an integer plus one, else the text reversed (or extended when that is
    the same)."""
    try:
        return str(int(answer) + 1)
    except ValueError:
        flipped = answer[::-1]
        return flipped if flipped != answer else answer + " x"


def response(text: str) -> dict[str, Any]:
    """`text` as a Responses API response of one assistant message."""
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {"output": [{"type": "message", "role": "assistant", "status": "completed", "content": content}]}


__all__ = ["KINDS", "answer_text", "response", "wrong_answer"]
