"""One shard of `collect --processes N` (collector/_processes.py): which rollouts it owns and
where its files are."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gym_metrics.errors import FieldViolation, InvalidInputError


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: the rollouts whose task index is `index` modulo `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        index, _, count = text.partition("/")
        try:
            shard = cls(int(index), int(count))
        except ValueError:
            shard = cls(-1, 0)
        if not 0 <= shard.index < shard.count:
            raise InvalidInputError("bad --shard", [FieldViolation("--shard", f"{text!r}: expected I/N with 0 <= I < N")])
        return shard

    def owns(self, task: int) -> bool:
        return task % self.count == self.index

    def output(self, final: Path) -> Path:
        return shard_dir(final) / f"{self.index}-of-{self.count}.jsonl"

    def log(self, final: Path) -> Path:
        return shard_dir(final) / f"{self.index}-of-{self.count}.log"


def stats_path(shard_output: Path) -> Path:
    """Where a shard process writes its counts: beside its file (`I-of-N.stats.json`)."""
    return shard_output.with_suffix(".stats.json")




def shard_dir(final: Path) -> Path:
    """Where the shards of `final` are collected: `.<name>.shards` beside it."""
    return final.with_name(f".{final.name}.shards")


__all__ = ["Shard", "shard_dir", "stats_path"]
