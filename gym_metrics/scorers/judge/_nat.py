"""NeMo Agent Toolkit 1.9.0's trajectory rules, for `trajectory` with `nat_compat: true`.

Three things NAT 1.9.0's `TrajectoryEvaluator` does that the honest default does not:

- steps its LangChain `AgentAction` model refuses: a kept step's input must be text or an
  object (a step without `data` counts as ""), and every kept step after an LLM_END step takes
  that LLM_END's output as its `log`, which must be text. Otherwise the item scores 0.0 and the
  judge is never asked;
- replies: LangChain's parser reads the integer 1..5 after the first "Score: " as (N - 1) / 4;
  when it fails, NAT searches the parser's error message, which quotes the reply, for the last
  number after "score", "score:" or "score of" (any case) and keeps it raw ("Score: 3.5" -> 3.5,
  "Score: 10" -> 10.0), else 0.0. A reply with "Score:" but never "Score: " fails in a way whose
  message does not quote it: 0.0. A judge that fails outright also gives 0.0;
- `average_score`: the mean of the item scores rounded to two places.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from gym_metrics._util.jsonio import json_kind

_LAST_SCORE = re.compile(r"score\s*(?::|of)?\s*([0-9]+(?:\.[0-9]+)?)", re.IGNORECASE)
_FIRST_NUMBER = re.compile(r"\d+(?:\.\d+)?")


class Step(NamedTuple):
    """One kept intermediate step: where it was, its event type, name and `data` (None when
    the step has none)."""

    position: int
    event_type: str
    name: str
    data: Mapping[str, Any] | None


def refused_step(steps: Sequence[Step]) -> str | None:
    """Why NAT 1.9.0 refuses these steps before asking its judge, or None when it accepts them."""
    llm_output: Any = ""  # the output of the last LLM_END step so far (NAT's `log`)
    for step in steps:
        value = "" if step.data is None else step.data.get("input")
        if not isinstance(value, (str, Mapping)):
            return f"intermediate_steps[{step.position}].payload.data.input is {json_kind(value)}, not text or an object"
        if step.event_type == "LLM_END":
            llm_output = "" if step.data is None else step.data.get("output")
        elif not isinstance(llm_output, str):
            return (
                f"intermediate_steps[{step.position}] follows an LLM_END step whose output is {json_kind(llm_output)}, "
                "not text"
            )
    return None


def parsed_grade(reply: str) -> float | None:
    """LangChain's trajectory parser: (N - 1) / 4 for the integer N in 1..5 that starts the text
    after the first "Score: " (after any non-digits); None when it fails."""
    if "Score: " not in reply:
        return None
    match = _FIRST_NUMBER.search(reply.split("Score: ", 1)[1].strip())
    if match is None or "." in match.group(0):
        return None
    value = int(match.group(0))
    return (value - 1) / 4 if 1 <= value <= 5 else None


def nat_score(reply: str) -> float:
    """NAT 1.9.0's item score for a judge reply (never fails)."""
    grade = parsed_grade(reply)
    if grade is not None:
        return grade
    if "Score:" in reply and "Score: " not in reply:
        return 0.0  # LangChain's split raises an unpacking error that does not quote the reply
    found = _LAST_SCORE.findall(reply)
    return float(found[-1]) if found else 0.0


def nat_average_score(scores: Iterable[float]) -> float | None:
    """NAT's `average_score`: the mean of the scores rounded to two places (None for none).
    NaN scores (rows gym-metrics could not read at all, which NAT would not load) are left out."""
    values = [float(s) for s in scores if not math.isnan(s)]
    return round(sum(values) / len(values), 2) if values else None
