"""Trajectory evaluation (NeMo Agent Toolkit's `trajectory` evaluator, built on LangChain's
`TrajectoryEvalChain`): the judge grades the agent's path to its answer from 1 to 5, reported
as (N - 1) / 4.

Row (NAT's workflow output): `question`, `generated_answer` and `intermediate_steps`, a list
of NAT `IntermediateStep`s (`{"payload": {"event_type", "name", "data": {"input", "output"}}}`,
or the payload alone). As NAT does, the steps whose event type is LLM_END or TOOL_END become
the trajectory, in order: step name, its input and its output.

The reply is read as LangChain's trajectory parser reads it: the text after the first "Score: "
must start (after any non-digits) with an integer 1..5. Such a reply gives NaN plus the reason
by default (`unparseable_as_zero`: 0.0, as NAT 1.4.0 did). `nat_compat` reproduces NAT 1.9.0's
numbers instead (see _nat.py): raw numbers recovered from unreadable replies, 0.0 without a
judge call for steps NAT's models refuse, 0.0 for a judge that fails.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

import pydantic
from pydantic import Field

from gym_metrics.scorers import RowError, register_scorer
from gym_metrics.scorers.judge._config import JudgeConfig
from gym_metrics.scorers.judge._conversation import text_field
from gym_metrics.scorers.judge._base import JudgeScorer
from gym_metrics.scorers.judge._nat import Step, nat_score, refused_step
from gym_metrics.scorers.judge._parse import ReplyFormatError, quote

log = logging.getLogger("gym_metrics.scorers.judge")

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
    """True: a reply without a readable 1..5 score counts 0.0 (NAT 1.4.0's rule; NAT 1.9.0 reads
    such replies differently, see `nat_compat`); False: NaN + reason."""
    nat_compat: bool = False
    """True: NeMo Agent Toolkit 1.9.0's per-item scores exactly (its `TrajectoryEvaluator`): an
    unreadable reply gives the last number after "score" / "score:" / "score of" in it, raw and
    unscaled (3.5, 10.0), or 0.0 when there is none; a kept step whose input is not text or an
    object (or that follows an LLM_END step whose output is not text) gives 0.0 without asking
    the judge; a judge that fails after the retries gives 0.0. NAT's `average_score` is then
    `nat_average_score(scores)`, the mean rounded to two places."""

    @pydantic.model_validator(mode="after")
    def _one_reading(self) -> TrajectoryConfig:
        if self.nat_compat and self.unparseable_as_zero:
            raise ValueError("nat_compat and unparseable_as_zero are two different readings of a reply: choose one")
        return self


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


def kept_steps(steps: Any, keep: list[str]) -> list[Step]:
    """The steps whose event type is in `keep`, in order (RowError for a malformed list)."""
    if not isinstance(steps, list):
        raise RowError("intermediate_steps", "must be a list of NAT intermediate steps")
    out: list[Step] = []
    for i, step in enumerate(steps):
        if not isinstance(step, Mapping):
            raise RowError(f"intermediate_steps[{i}]", "must be an object")
        payload = step.get("payload", step)
        if not isinstance(payload, Mapping) or not isinstance(payload.get("event_type"), str):
            raise RowError(f"intermediate_steps[{i}]", "has no payload.event_type")
        if payload["event_type"] not in keep:
            continue
        data = payload.get("data")
        if data is not None and not isinstance(data, Mapping):
            raise RowError(f"intermediate_steps[{i}].payload.data", "must be an object")
        out.append(Step(i, payload["event_type"], payload.get("name") or "", data))
    return out


def render_steps(steps: Any, keep: list[str]) -> str:
    """The trajectory text of NAT intermediate steps (RowError for a malformed list)."""
    return _render(kept_steps(steps, keep))


def _render(steps: list[Step]) -> str:
    blocks = [
        f"Step {n}\nName: {step.name}\n"
        f"Input: {_text((step.data or {}).get('input'))}\nOutput: {_text((step.data or {}).get('output'))}"
        for n, step in enumerate(steps, 1)
    ]
    return "\n\n".join(blocks) if blocks else "(no steps)"


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _nat_text(row: Mapping[str, Any], *names: str) -> str:
    """NAT's reading of the question and answer: null is "", anything else its str()."""
    for name in names:
        if name in row:
            return _text(row[name])
    return text_field(row, *names)  # missing: the same RowError as the default


@register_scorer("trajectory")
class TrajectoryEvaluation(JudgeScorer):
    """The judge's 1-5 grade of the agent's trajectory, as (N - 1) / 4."""

    score_names = ("trajectory",)
    Config = TrajectoryConfig
    config: TrajectoryConfig

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        nat = self.config.nat_compat
        read = _nat_text if nat else text_field
        question = read(row, "question", "user_input")
        answer = read(row, "generated_answer", "response")
        steps = kept_steps(row.get("intermediate_steps"), self.config.step_types)
        if nat and (why := refused_step(steps)) is not None:
            log.warning("trajectory (nat_compat): 0.0 without a judge call, as NAT 1.9.0: %s", why)
            return {"trajectory": 0.0}
        trajectory = _render(steps)
        messages = [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": _TEMPLATE.format(
                question=_EXAMPLE_QUESTION, trajectory=_EXAMPLE_TRAJECTORY, answer=_EXAMPLE_ANSWER
            )},
            {"role": "assistant", "content": _EXAMPLE_GRADE},
            {"role": "user", "content": _TEMPLATE.format(question=question, trajectory=trajectory, answer=answer)},
        ]
        try:
            reply = await self.chat(messages)
        except RowError as exc:
            if not nat:
                raise
            log.warning("trajectory (nat_compat): 0.0 for a failed judge, as NAT 1.9.0: %s", exc.reason)
            return {"trajectory": 0.0}
        if nat:
            return {"trajectory": nat_score(reply)}
        try:
            value = read_score(reply)
        except ReplyFormatError as exc:
            if self.config.unparseable_as_zero:
                return {"trajectory": 0.0}
            raise RowError("judge_reply", f"trajectory grade: {exc}; reply: {quote(reply, 300)}") from None
        return {"trajectory": value}
