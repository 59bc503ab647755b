"""Answer accuracy (RAGAS `AnswerAccuracy`, reported as `nv_accuracy`): agreement of a response
with a reference answer, averaged over two differently worded judge templates.

Row: `user_input` (the question), `response`, `reference` (strings). Each template asks for
a rating of 4, 2 or 0. A reply is read as RAGAS reads it: the first of the digits 0, 1, 2, 3,
4 (checked in that order) that occurs anywhere in the reply gives digit / 4, so "4" -> 1.0,
"2" -> 0.5, "0" -> 0.0 (and "10" -> 0.0, because it contains a 0). A reply with none of them
is asked again, up to `rating_attempts` times per template.

Combining, as RAGAS does: both ratings read -> their mean; only the first template's read
-> that rating; the first template's unread -> NaN whatever the second gives (RAGAS takes
`max(first, second)`, and Python's max keeps a NaN that comes first), so the second template
is then not even asked. NaN here is a RowError carrying the judge's last reply.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from gym_metrics.scorers import RowError, register_scorer
from gym_metrics.scorers.judge._config import JudgeConfig
from gym_metrics.scorers.judge._conversation import text_field
from gym_metrics.scorers.judge._base import JudgeScorer
from gym_metrics.scorers.judge._parse import quote

_TEMPLATE_1 = """You rate how well a User Answer matches the Reference Answer to a Question; \
the Reference Answer answers the Question completely.
Reply 4 if the User Answer is fully contained in the Reference Answer and equivalent to it in \
every term, topic, number, metric, date and unit.
Reply 2 if the User Answer is partly contained in the Reference Answer and nearly equivalent to \
it in those terms, topics, numbers, metrics, dates and units.
Reply 0 if the User Answer is not contained in the Reference Answer, is inaccurate in any term, \
topic, number, metric, date or unit, or does not answer the Question.
Reply with the rating only (4, 2 or 0), without any explanation.
### Question: {question}
### User Answer: {response}
### Reference Answer: {reference}
The rating is:
"""

_TEMPLATE_2 = """Two answers to the same Question follow. Rate how far the User Answer agrees \
with the Reference Answer:
4 - the User Answer agrees with the Reference Answer entirely, in every aspect, topic, number, \
metric, date and unit;
2 - the User Answer mostly agrees with the Reference Answer, with small differences in places;
0 - the User Answer is inaccurate, incomplete or unrelated to the Reference Answer, or does not \
address the Question.
Only one of 4, 2 or 0 is a valid answer. Do not explain or justify it.

Question: {question}

Reference Answer: {reference}

User Answer: {response}

Rating: """


class AnswerAccuracyConfig(JudgeConfig):
    """The judge plus RAGAS's fixed sampling settings for this metric."""

    rating_attempts: int = Field(default=5, ge=1)
    """Calls per template until the reply holds a rating digit (RAGAS: 5)."""
    rating_temperature: float | None = Field(default=0.1, ge=0.0)
    """Temperature of these calls: RAGAS sends 0.1 whatever the judge's own setting; None
    uses the judge's `temperature`."""


def read_rating(reply: str) -> float:
    """RAGAS's reading of a reply: the first digit of 0..4 found in it, divided by 4; NaN
    when it contains none."""
    for digit in range(5):
        if str(digit) in reply:
            return digit / 4
    return math.nan


def combine(first: float, second: float) -> float:
    """RAGAS's average of the two template ratings (see module docstring for NaN cases)."""
    if first >= 0 and second >= 0:
        return (first + second) / 2
    return max(first, second)


@register_scorer("answer_accuracy")
class AnswerAccuracy(JudgeScorer):
    """Mean of two judge ratings (0, 0.5 or 1) of a response against a reference answer."""

    score_names = ("answer_accuracy",)
    Config = AnswerAccuracyConfig
    config: AnswerAccuracyConfig

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        question = text_field(row, "user_input", "question")
        response = text_field(row, "response")
        reference = text_field(row, "reference")
        fields = {"question": question, "response": response, "reference": reference}
        first, replies = await self._rate(_TEMPLATE_1.format(**fields))
        if math.isnan(first):  # RAGAS's result is NaN whatever the second template gives: skip it
            raise RowError(
                "judge_reply",
                f"no rating (0-4) in {len(replies)} replies to the first template; last reply: {quote(replies[-1])}",
            )
        second, _ = await self._rate(_TEMPLATE_2.format(**fields))
        score = combine(first, second)  # the first rating alone when the second has none
        return {"answer_accuracy": float(score)}

    async def _rate(self, prompt: str) -> tuple[float, list[str]]:
        replies: list[str] = []
        for _ in range(self.config.rating_attempts):
            reply = await self.chat(prompt, temperature=self.config.rating_temperature)
            replies.append(reply)
            rating = read_rating(reply)
            if not math.isnan(rating):
                return rating, replies
        return math.nan, replies
