"""Progress of a collection: a live line on a terminal, periodic log lines otherwise (the line
itself is gym_metrics._util.progress's, shared with evaluate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from gym_metrics._util.progress import ProgressLine


@dataclass
class _AgentTally:
    done: int = 0
    reward_sum: float = 0.0
    scored: int = 0
    errors: int = 0


class Progress(ProgressLine):
    """Counts verified rollouts per agent and reports rate, ETA, running mean reward and errors."""

    def __init__(self, total: int | None, stream: IO[str] | None = None, log_every_s: float = 10.0) -> None:
        super().__init__(total, stream, log_every_s, name="collect")
        self.agents: dict[str, _AgentTally] = {}
        self.skipped = 0
        self.generating = False
        """Whether rollouts are generated (then the line shows generated, verified, failed and
        tokens/s)."""
        self.generated_ok = self.generation_failed = self.output_tokens = 0

    @property
    def done(self) -> int:
        return sum(a.done for a in self.agents.values())

    @property
    def errors(self) -> int:
        return sum(a.errors for a in self.agents.values())

    def add(self, agent: str, reward: float | None, error: bool = False) -> None:
        tally = self.agents.setdefault(agent, _AgentTally())
        tally.done += 1
        if error:
            tally.errors += 1
        elif reward is not None:
            tally.reward_sum += reward
            tally.scored += 1

    def add_many(self, agent: str, count: int, reward_sum: float, scored: int) -> None:
        tally = self.agents.setdefault(agent, _AgentTally())
        tally.done += count
        tally.reward_sum += reward_sum
        tally.scored += scored

    def generated(self, output_tokens: int | None, failed: bool = False) -> None:
        """One generation finished (or failed after its retries)."""
        self.generating = True
        if failed:
            self.generation_failed += 1
        else:
            self.generated_ok += 1
            self.output_tokens += output_tokens or 0

    def summary(self) -> str:
        done = self.done
        means = ", ".join(
            f"{name} {t.reward_sum / t.scored:.3f}" for name, t in sorted(self.agents.items()) if t.scored
        )
        line = f"{self.head('rollouts')}, {self.errors} errors"
        if self.generating:
            line += (
                f" | generated {self.generated_ok:,}, verified {done - self.errors:,}, "
                f"failed {self.errors:,}, {self.output_tokens / self.elapsed():,.0f} tokens/s"
            )
        return line + (f" | mean reward: {means}" if means else "")
