"""Regenerate sample.jsonl: 12 tasks x 4 repeats x 3 agents of unverified math rollouts.

Run `python gym_metrics_servers/math_exact/make_sample.py` (or `python -m gym_metrics_servers.math_exact.make_sample`).
Seeded, so the file is byte-for-byte reproducible; a test checks it is up to date. The agents
differ in accuracy (strong > medium > weak) and in how they state answers, so the sample
exercises every extraction path (boxed, "answer is", "Answer:", last number, none) and the
normalisation (fractions vs decimals, thousands separators, `\\text{}`).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

SEED = 20240501
REPEATS = 4
OUT = Path(__file__).with_name("sample.jsonl")

# (question, expected answer, correct spellings, wrong answers, a line of working)
TASKS: list[tuple[str, str, list[str], list[str], str]] = [
    ("What is 17 + 25?", "42", ["42"], ["41", "43", "52"], "Adding the tens and then the units."),
    ("Compute 12 * 13.", "156", ["156"], ["146", "166", "144"], "Twelve times thirteen is twelve squared plus twelve."),
    ("What is 1/4 + 1/4? Give the exact value.", "1/2", ["\\frac{1}{2}", "0.5", "1/2"], ["1/4", "2/8", "\\frac{1}{8}"],
     "The denominators are equal, so add the numerators."),
    ("What is 2.5 * 4?", "10", ["10", "10.0", "10.00"], ["9", "11", "8.5"], "Four halves make two, four twos make eight."),
    ("How many seconds are there in one day?", "86400", ["86,400", "86400", "86\\,400"], ["8640", "86,000", "3600"],
     "Multiply hours by minutes per hour by seconds per minute."),
    ("Solve for x: 3x - 7 = 11.", "6", ["6", "x = 6"], ["4", "x = 5", "18"], "Add seven to both sides, then divide by three."),
    ("What is the capital of France?", "Paris", ["\\text{Paris}", "Paris", "paris"], ["Lyon", "Marseille", "London"],
     "This is a geography fact."),
    ("What is 15% of 80?", "12", ["12", "12.0"], ["15", "10", "120"], "Ten percent is eight, five percent is four."),
    ("Simplify the fraction 6/8.", "3/4", ["\\frac{3}{4}", "0.75", "3/4"], ["4/3", "2/3", "0.7"],
     "Divide numerator and denominator by their greatest common divisor."),
    ("What is -8 + 3?", "-5", ["-5"], ["5", "-11", "-4"], "Moving three steps up from minus eight on the number line."),
    ("What is the square root of 144?", "12", ["12"], ["14", "11", "72"], "Find the number whose square is the given value."),
    ("What is 1000 * 1000?", "1000000", ["1,000,000", "1000000"], ["100000", "10,000,000", "1,000"],
     "Count the zeros."),
]
_PLAIN = re.compile(r"-?[\d.,/]+")
"""Answers the last-number style can state (anything else is stated as "the answer is")."""

# agent: (probability of a correct answer, weights of the answer styles)
AGENTS: dict[str, tuple[float, dict[str, int]]] = {
    "strong_agent": (0.9, {"boxed": 8, "answer_is": 2, "answer_colon": 1, "last_number": 1, "none": 0}),
    "medium_agent": (0.6, {"boxed": 4, "answer_is": 3, "answer_colon": 2, "last_number": 2, "none": 1}),
    "weak_agent": (0.3, {"boxed": 1, "answer_is": 2, "answer_colon": 2, "last_number": 3, "none": 3}),
}


def _text(style: str, working: str, answer: str) -> str:
    if style == "boxed":
        return f"{working} Therefore the final answer is $\\boxed{{{answer}}}$."
    if style == "answer_is":
        return f"{working}\nSo the answer is {answer}."
    if style == "answer_colon":
        return f"{working}\n\n**Answer:** {answer}"
    if style == "last_number":
        return f"{working} I get {answer}"
    return f"{working} I am not sure how to finish this."


def build_rows(seed: int = SEED) -> list[dict[str, Any]]:
    """Every sample line, in file order (agent, task, rollout)."""
    rng = random.Random(seed)
    rows = []
    for agent, (accuracy, style_weights) in AGENTS.items():
        styles, weights = list(style_weights), list(style_weights.values())
        for t, (question, expected, right, wrong, working) in enumerate(TASKS):
            for r in range(REPEATS):
                correct = rng.random() < accuracy
                style = rng.choices(styles, weights)[0]
                answer = rng.choice(right if correct else wrong)
                if style == "last_number" and not _PLAIN.fullmatch(answer):
                    style = "answer_is"
                text = _text(style, working, answer)
                input_tokens = 40 + len(question.split()) * 2
                output_tokens = len(text) // 4 + rng.randint(20, 180)
                rows.append(
                    {
                        "agent_ref": {"name": agent},
                        "_ng_task_index": t,
                        "_ng_rollout_index": r,
                        "responses_create_params": {"input": [{"role": "user", "content": question}]},
                        "response": {
                            "output": [
                                {
                                    "type": "message",
                                    "role": "assistant",
                                    "content": [{"type": "output_text", "text": text}],
                                }
                            ],
                            "usage": {
                                "input_tokens": input_tokens,
                                "output_tokens": output_tokens,
                                "total_tokens": input_tokens + output_tokens,
                            },
                        },
                        "expected_answer": expected,
                    }
                )
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main() -> None:
    OUT.write_text(render(build_rows()), encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
