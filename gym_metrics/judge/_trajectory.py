"""Trajectory evaluation (NeMo Agent Toolkit's `trajectory` evaluator, built on LangChain's
`TrajectoryEvalChain`): the judge grades the agent's path to its answer from 1 to 5, reported
as (N - 1) / 4.

Row (NAT's workflow output): `question`, `generated_answer` and `intermediate_steps`, a list
of NAT `IntermediateStep`s (`{"payload": {"event_type", "name", "data": {"input", "output"}}}`,
or the payload alone). As NAT does, the steps whose event type is LLM_END or TOOL_END become
the trajectory, in order: step name, its input and its output.

The reply is read as NAT reads it: the text after the first "Score: " must start (after any
non-digits) with an integer 1..5. NAT scores a reply it cannot read as 0.0; here such a reply
gives NaN plus the reason unless `unparseable_as_zero` asks for NAT's numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from gym_metrics.evaluate import RowError, register_row_metric
from gym_metrics.judge._config import JudgeConfig
from gym_metrics.judge._conversation import text_field
from gym_metrics.judge._metric import JudgeMetric
from gym_metrics.judge._parse import ReplyFormatError, quote

_NUMBER = re.compile(r"\d+(?:\.\d+)?")

_SYSTEM = "You are an expert who grades how AI language models use tools to answer questions."

_TEMPLATE = """An AI language model could call tools while answering a user's question.

The user's question:
[QUESTION]
{question}
[END_QUESTION]

The steps the model took (tool or model name, input, output), in order:
[TRAJECTORY]
{trajectory}
[END_TRAJECTORY]

The model's final answer:
[ANSWER]
{answer}
[END_ANSWER]

Evaluate the model's work step by step against these criteria, then grade it from 1 (poor) \
to 5 (excellent):
1. Is the final answer helpful and correct?
2. Are the tools used in a logical order?
3. Are the tools used in a helpful way?
4. Does the model take more steps than it needs?
5. Are the right tools chosen for the question?
Write your evaluation, then end with a last line of the form "Score: N"."""

_EXAMPLE_QUESTION = "What is 15% of the population of Iceland?"
_EXAMPLE_TRAJECTORY = """Step 1
Name: web_search
Input: population of Iceland
Output: Iceland's population is about 390,000 (2024).

Step 2
Name: web_search
Input: Iceland population 2024
Output: Statistics Iceland: 389,444 inhabitants on 1 January 2024."""
_EXAMPLE_ANSWER = "About 58,400 people."
_EXAMPLE_GRADE = """The final answer is correct: 15% of 389,444 is about 58,417. The first search was \
enough; the second repeated it, an unneeded step. The model did the arithmetic itself instead \
of using a calculator, which was fine here. The tools were relevant and used in a sensible \
order, with one redundant call.

Score: 4"""


class TrajectoryConfig(JudgeConfig):
    """The judge plus which steps make up the trajectory."""

    step_types: list[str] = Field(default_factory=lambda: ["LLM_END", "TOOL_END"])
    """NAT event types kept as trajectory steps (NAT's trajectory evaluator: LLM_END, TOOL_END)."""
    unparseable_as_zero: bool = False
    """True: a reply without a readable 1..5 score counts 0.0, as in NAT; False: NaN + reason."""


def read_score(reply: str) -> float:
    """(N - 1) / 4 for the integer N after the first "Score: "; ReplyFormatError otherwise."""
    if "Score: " not in reply:
        raise ReplyFormatError('no "Score: N" line')
    rest = reply.split("Score: ", 1)[1].strip()
    match = _NUMBER.search(rest)
    if match is None or "." in match.group(0):
        raise ReplyFormatError('the "Score: " is not followed by an integer')
    value = int(match.group(0))
    if not 1 <= value <= 5:
        raise ReplyFormatError(f"score {value} is not in 1..5")
    return (value - 1) / 4


def render_steps(steps: Any, keep: list[str]) -> str:
    """The trajectory text of NAT intermediate steps (RowError for a malformed list)."""
    if not isinstance(steps, list):
        raise RowError("intermediate_steps", "must be a list of NAT intermediate steps")
    blocks: list[str] = []
    for i, step in enumerate(steps):
        if not isinstance(step, Mapping):
            raise RowError(f"intermediate_steps[{i}]", "must be an object")
        payload = step.get("payload", step)
        if not isinstance(payload, Mapping) or not isinstance(payload.get("event_type"), str):
            raise RowError(f"intermediate_steps[{i}]", "has no payload.event_type")
        if payload["event_type"] not in keep:
            continue
        data = payload.get("data") or {}
        if not isinstance(data, Mapping):
            raise RowError(f"intermediate_steps[{i}].payload.data", "must be an object")
        blocks.append(
            f"Step {len(blocks) + 1}\nName: {payload.get('name') or ''}\n"
            f"Input: {_text(data.get('input'))}\nOutput: {_text(data.get('output'))}"
        )
    return "\n\n".join(blocks) if blocks else "(no steps)"


def _text(value: Any) -> str:
    return "" if value is None else str(value)


@register_row_metric("trajectory")
class TrajectoryEvaluation(JudgeMetric):
    """The judge's 1-5 grade of the agent's trajectory, as (N - 1) / 4."""

    score_names = ("trajectory",)
    Config = TrajectoryConfig
    config: TrajectoryConfig

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        question = text_field(row, "question", "user_input")
        answer = text_field(row, "generated_answer", "response")
        trajectory = render_steps(row.get("intermediate_steps"), self.config.step_types)
        reply = await self.chat(
            [
                {"role": "system", "content": _SYSTEM},
                {"role": "user", "content": _TEMPLATE.format(
                    question=_EXAMPLE_QUESTION, trajectory=_EXAMPLE_TRAJECTORY, answer=_EXAMPLE_ANSWER
                )},
                {"role": "assistant", "content": _EXAMPLE_GRADE},
                {"role": "user", "content": _TEMPLATE.format(question=question, trajectory=trajectory, answer=answer)},
            ]
        )
        try:
            value = read_score(reply)
        except ReplyFormatError as exc:
            if self.config.unparseable_as_zero:
                return {"trajectory": 0.0}
            raise RowError("judge_reply", f"trajectory grade: {exc}; reply: {quote(reply, 300)}") from None
        return {"trajectory": value}
