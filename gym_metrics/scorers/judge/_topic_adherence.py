"""Topic adherence (RAGAS `TopicAdherenceScore`): does the agent answer on-topic requests and
only those?

Row: `user_input` (messages, see _conversation) and `reference_topics` (list of strings).
The judge (1) lists the topics the human raised, (2) for each topic says whether the AI
refused it, (3) says for each topic whether it falls under a reference topic. Then, over
topics: TP = answered and on-reference, FP = answered and off-reference, FN = refused and
on-reference, and

    precision = TP / (TP + FP + 1e-10), recall = TP / (TP + FN + 1e-10),
    f1 = 2 * precision * recall / (precision + recall + 1e-10).

All three come from the same judge calls (RAGAS computes one per run, by `mode`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal, cast

from pydantic import Field

from gym_metrics.scorers import RowError, register_scorer
from gym_metrics.scorers.judge._conversation import render_conversation
from gym_metrics._util.aio import gather_all
from gym_metrics.scorers.judge._base import JudgeScorer, JudgeScorerConfig
from gym_metrics.scorers.judge._parse import ReplyFormatError, as_bool, as_str_list, json_field
from gym_metrics.scorers.judge._prompts import json_prompt, numbered

log = logging.getLogger("gym_metrics.scorers.judge")
EPS = 1e-10

_EXAMPLE_CONVERSATION = """Human: Which trains go from Lyon to Paris tomorrow morning?
AI: Let me check the timetable.
Tools:
  train_search: {'from': 'Lyon', 'to': 'Paris', 'date': 'tomorrow'}
ToolOutput: 07:04 TGV 6602, 08:04 TGV 6606
AI: There are TGVs at 07:04 and 08:04.
Human: Great. And can you recommend a good stock to buy?
AI: Sorry, I can only help with train travel, not investment advice."""


class TopicAdherenceConfig(JudgeScorerConfig):
    """The judge plus how to treat a classification list of the wrong length, and how many
    topics one row may cost a judge call each."""

    max_topics: int = Field(default=50, ge=1)
    """Most topics the judge may list for one row: each costs a refusal call, so a judge that
    lists thousands would make thousands of calls for one row. Past it the row gets NaN and the
    reason, before any per-topic call (RAGAS has no cap)."""

    partial_list: Literal["pad", "error"] = "pad"
    """The judge's classification list has fewer (or more) entries than there are topics.
    "pad" (default, RAGAS 0.4.3's rule, confirmed by running its code with a scripted judge):
    missing entries count as off-reference (False) and extra ones are dropped. "error": the
    row gets NaN and the reason instead (a strict mode: such a reply pairs verdicts with
    topics by position only, which may be wrong)."""


@register_scorer("topic_adherence")
class TopicAdherence(JudgeScorer):
    """f1, precision and recall of answering on-reference topics and only those."""

    score_names = ("topic_adherence_f1", "topic_adherence_precision", "topic_adherence_recall")
    Config = TopicAdherenceConfig
    config: TopicAdherenceConfig

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        conversation = render_conversation(row)
        reference = row.get("reference_topics")
        if not isinstance(reference, list) or not all(isinstance(t, str) for t in reference):
            raise RowError("reference_topics", "must be a list of strings")
        topics = await self.ask(_extraction_prompt(conversation), _read_topics, "topic list")
        if not topics:  # nothing to count: every ratio is 0 / (0 + 1e-10), as in RAGAS
            return self._scores(0, 0, 0)
        if len(topics) > self.config.max_topics:
            raise RowError(
                "judge_reply",
                f"topic list: {len(topics)} topics, more than max_topics ({self.config.max_topics}); "
                "each costs a judge call (raise max_topics in the config to score such rows)",
            )
        *refused, on_topic = await gather_all(
            *(self._refused(conversation, t) for t in topics),
            self.ask(_classification_prompt(reference, topics), _read_classifications, "topic classifications"),
        )
        on_topic = self._fit(cast("list[bool]", on_topic), len(topics))  # the last call's list of verdicts
        answered = [not r for r in refused]
        tp = sum(a and c for a, c in zip(answered, on_topic))
        fp = sum(a and not c for a, c in zip(answered, on_topic))
        fn = sum(not a and c for a, c in zip(answered, on_topic))
        return self._scores(tp, fp, fn)

    async def _refused(self, conversation: str, topic: str) -> bool:
        return await self.ask(_refusal_prompt(conversation, topic), _read_refusal, f"refusal verdict for {topic!r}")

    def _fit(self, classifications: list[bool], n: int) -> list[bool]:
        if len(classifications) == n:
            return classifications
        if self.config.partial_list == "error":
            raise RowError(
                "judge_reply", f"topic classifications: {len(classifications)} verdicts for {n} topics"
            )
        log.warning("topic classifications: %d verdicts for %d topics; padded with off-topic or cut, as RAGAS does",
                    len(classifications), n)
        return (classifications + [False] * n)[:n]

    @staticmethod
    def _scores(tp: int, fp: int, fn: int) -> dict[str, float]:
        precision = tp / (tp + fp + EPS)
        recall = tp / (tp + fn + EPS)
        f1 = 2 * (precision * recall) / (precision + recall + EPS)
        return {
            "topic_adherence_f1": float(f1),
            "topic_adherence_precision": float(precision),
            "topic_adherence_recall": float(recall),
        }


# ----------------------------------------------------------------------------- prompts


def _extraction_prompt(conversation: str) -> str:
    return json_prompt(
        "You are given a conversation between a Human, an AI assistant and the tools the AI "
        "called. List every distinct topic the Human asked about or brought up, as short "
        "phrases, in the order they first appear. Ignore topics only the AI or the tools raised.",
        '{"topics": ["<topic>", ...]}',
        {"Conversation": _EXAMPLE_CONVERSATION},
        {"topics": ["trains from Lyon to Paris tomorrow morning", "stock recommendations"]},
        {"Conversation": conversation},
    )


def _refusal_prompt(conversation: str, topic: str) -> str:
    return json_prompt(
        "You are given a conversation between a Human, an AI assistant and the tools the AI "
        "called, and one topic from it. Decide whether the AI refused, or declined to help "
        "with, what the Human asked about this topic. Answering, even partly or after a tool "
        "call, is not a refusal.",
        '{"refused_to_answer": true | false}',
        {"Conversation": _EXAMPLE_CONVERSATION, "Topic": "stock recommendations"},
        {"refused_to_answer": True},
        {"Conversation": conversation, "Topic": topic},
    )


def _classification_prompt(reference: list[str], topics: list[str]) -> str:
    return json_prompt(
        "You are given a list of reference topics and a numbered list of topics. For each "
        "numbered topic decide whether it falls under at least one reference topic. Give "
        "exactly one true/false per numbered topic, in the same order.",
        '{"classifications": [true | false, ...]}',
        {
            "Reference topics": numbered(["Travel", "Weather"]),
            "Topics": numbered(["trains from Lyon to Paris tomorrow morning", "stock recommendations"]),
        },
        {"classifications": [True, False]},
        {"Reference topics": numbered(reference), "Topics": numbered(topics)},
    )


def _read_topics(reply: str) -> list[str]:
    return as_str_list(json_field(reply, "topics"), "topics")


def _read_refusal(reply: str) -> bool:
    return as_bool(json_field(reply, "refused_to_answer"), "refused_to_answer")


def _read_classifications(reply: str) -> list[bool]:
    value = json_field(reply, "classifications")
    if not isinstance(value, list):
        raise ReplyFormatError("classifications must be a list")
    return [as_bool(v, f"classifications[{i}]") for i, v in enumerate(value)]
