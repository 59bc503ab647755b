"""extract_answer scans for "answer is X" from the first "answer" only (the full pattern at
every position of a long text was two thirds of a verify): the matches are the full scan's."""

from __future__ import annotations

import random

from gym_metrics_servers.math_exact.app import _ANSWER_IS, extract_answer, last_boxed


def full_scan(text: str) -> str | None:
    """extract_answer as it was: the pattern tried from the start of the text."""
    if not text:
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    answers = [a for a in (m.group("ans").strip() for m in _ANSWER_IS.finditer(text)) if a]
    if answers:
        return answers[-1]
    return extract_answer(text)  # the number fallback is unchanged


PIECES = ["The answer is 4.", "ANSWER: 7\n", "answers are many", "İ answer is x", "so, Answer : 12", "no answer here",
          "reanswer is 3.", " 5 - 3 ", "Final answer:* 9", "\\boxed{2}", "the answer is\n", "answer:"]  # fmt: skip


def test_the_first_answer_scan_finds_the_full_scans_answer() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(PIECES + ["filler text. " * rng.randint(0, 3)]) for _ in range(rng.randint(0, 6)))
        assert extract_answer(text) == full_scan(text), text
