"""JudgeScorer: the shared plumbing of the LLM-judge row metrics.

Every judge failure becomes a RowError so `evaluate` records NaN plus the reason on that row:
field "judge" when the judge could not answer (HTTP error, timeout, after retries), field
"judge_reply" when it answered something the metric cannot read. Nothing here crashes a run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from pydantic import Field

from gym_metrics.scorers import RowError, Scorer
from gym_metrics.scorers.judge._client import JudgeClient, JudgeError
from gym_metrics.scorers.judge._config import JudgeConfig
from gym_metrics.scorers.judge._parse import ReplyFormatError, quote

T = TypeVar("T")


class JudgeScorerConfig(JudgeConfig):
    """A judge plus the options every JSON-answering judge metric shares."""

    format_retries: int = Field(default=1, ge=0)
    """When a reply is not the JSON asked for, ask the judge this many times to fix it (RAGAS
    sends one "fix the output format" request before giving up)."""


_FIX_PROMPT = """Your previous answer to the task below could not be read: it must be ONLY a JSON \
object in exactly the format the task describes, with no other text.

### The task
{prompt}

### Your previous answer
{reply}

Problem: {problem}

Write the corrected JSON object now."""


class JudgeScorer(Scorer):
    """Base of the judge metrics: a pooled judge client and helpers that turn every failure
    into a RowError. Subclasses implement `score`."""

    Config: ClassVar[type[JudgeConfig]] = JudgeScorerConfig
    config: JudgeConfig
    """The validated `Config` (subclasses narrow the type to their own)."""

    def __init__(self, config: JudgeConfig | Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self.client = JudgeClient(self.config)  # reads the key now: a missing one fails fast

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, judge={self.client!r})"

    async def aclose(self) -> None:
        await self.client.aclose()

    async def chat(self, prompt: str | Sequence[Mapping[str, str]], *, temperature: float | None = None) -> str:
        """One judge reply; a prompt string is sent as a single user message."""
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        try:
            return await self.client.complete(messages, temperature=temperature)
        except JudgeError as exc:
            raise RowError("judge", str(exc)) from None

    async def ask(self, prompt: str, read: Callable[[str], T], what: str) -> T:
        """Ask, then read the reply with `read` (raising ReplyFormatError when it cannot);
        an unreadable reply is sent back for fixing up to `format_retries` times."""
        reply = await self.chat(prompt)
        retries = getattr(self.config, "format_retries", 0)
        for attempt in range(retries + 1):
            try:
                return read(reply)
            except ReplyFormatError as exc:
                problem = str(exc)
            if attempt < retries:
                reply = await self.chat(_FIX_PROMPT.format(prompt=prompt, reply=reply, problem=problem))
        raise RowError("judge_reply", f"{what}: {problem}; reply: {quote(reply)}")
