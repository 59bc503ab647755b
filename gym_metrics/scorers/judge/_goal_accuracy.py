"""Agent goal accuracy (RAGAS `AgentGoalAccuracyWithReference` / `...WithoutReference`):
did the agent achieve what the user wanted? 1.0 or 0.0.

Row: `user_input` (messages, see _conversation) and, with a reference, `reference` (the
desired outcome). Two judge calls, as in RAGAS: (1) read the workflow and state the user's
goal and the end state it reached; (2) compare the desired outcome (the row's `reference`,
or without one the goal inferred in step 1) with that end state: verdict 1 or 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gym_metrics.scorers import register_scorer
from gym_metrics.scorers.judge._conversation import render_conversation, text_field
from gym_metrics.scorers.judge._base import JudgeScorer, JudgeScorerConfig
from gym_metrics.scorers.judge._parse import ReplyFormatError, as_str, extract_json
from gym_metrics.scorers.judge._prompts import json_prompt

_EXAMPLE_WORKFLOW = """Human: Please add a dentist appointment on Friday at 10am to my calendar.
AI: Sure, let me check Friday first.
Tools:
  calendar_list: {'day': 'Friday'}
ToolOutput: Friday: 09:00-09:30 stand-up
AI: Friday at 10:00 is free. Adding it now.
Tools:
  calendar_add: {'day': 'Friday', 'time': '10:00', 'title': 'Dentist'}
ToolOutput: created event 'Dentist' Friday 10:00-11:00
AI: Done: 'Dentist' is on your calendar on Friday at 10:00.
Human: thanks!"""


class AgentGoalAccuracyConfig(JudgeScorerConfig):
    """The judge plus whether rows carry the desired outcome."""

    use_reference: bool = True
    """True: compare with the row's `reference` (RAGAS `AgentGoalAccuracyWithReference`);
    False: the judge infers the goal from the conversation (`...WithoutReference`)."""


@register_scorer("agent_goal_accuracy")
class AgentGoalAccuracy(JudgeScorer):
    """1.0 when the workflow's end state achieves the desired outcome, else 0.0."""

    score_names = ("agent_goal_accuracy",)
    Config = AgentGoalAccuracyConfig
    config: AgentGoalAccuracyConfig

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        workflow = render_conversation(row)
        reference = text_field(row, "reference") if self.config.use_reference else None
        goal, end_state = await self.ask(_infer_prompt(workflow), _read_workflow, "goal and end state")
        desired = reference if reference is not None else goal
        verdict = await self.ask(_compare_prompt(desired, end_state), _read_verdict, "outcome verdict")
        return {"agent_goal_accuracy": verdict}


def _infer_prompt(workflow: str) -> str:
    return json_prompt(
        "You are given an agentic workflow: a conversation between a Human, an AI assistant and "
        "the tools the AI called. State the user_goal (what the Human wanted to get done) and "
        "the end_state (what had actually been achieved when the workflow ended).",
        '{"user_goal": "<text>", "end_state": "<text>"}',
        {"Workflow": _EXAMPLE_WORKFLOW},
        {
            "user_goal": "Add a dentist appointment on Friday at 10am to the calendar.",
            "end_state": "A 'Dentist' event is on the calendar on Friday at 10:00.",
        },
        {"Workflow": workflow},
    )


def _compare_prompt(desired: str, arrived: str) -> str:
    return json_prompt(
        "Compare the desired outcome of a workflow with the outcome it arrived at. The verdict "
        "is \"1\" when the arrived outcome achieves the desired one, \"0\" when it does not. "
        "Give a one-sentence reason first.",
        '{"reason": "<one sentence>", "verdict": "0" | "1"}',
        {
            "Desired outcome": "A dentist appointment is booked for Friday morning.",
            "Arrived outcome": "A 'Dentist' event is on the calendar on Friday at 10:00.",
        },
        {"reason": "The appointment was added on Friday morning as wanted.", "verdict": "1"},
        {"Desired outcome": desired, "Arrived outcome": arrived},
    )


def _read_workflow(reply: str) -> tuple[str, str]:
    data = extract_json(reply)
    if not isinstance(data, dict) or "user_goal" not in data or "end_state" not in data:
        raise ReplyFormatError("expected a JSON object with 'user_goal' and 'end_state'")
    return as_str(data["user_goal"], "user_goal"), as_str(data["end_state"], "end_state")


def _read_verdict(reply: str) -> float:
    data = extract_json(reply)
    if not isinstance(data, dict) or "verdict" not in data:
        raise ReplyFormatError("expected a JSON object with 'verdict'")
    verdict = data["verdict"]
    # RAGAS's schema wants the string "0" or "1"; a bare 0/1 means the same and is accepted.
    if isinstance(verdict, bool) or verdict not in ("0", "1", 0, 1):
        raise ReplyFormatError(f"verdict must be \"0\" or \"1\", got {verdict!r}")
    return float(verdict)
