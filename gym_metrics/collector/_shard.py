"""One shard of `collect --processes N` (collector/_processes.py): which rollouts it owns and
where its files are."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gym_metrics._util.exclusive import hold_exclusive
from gym_metrics.collector._environments import Environments
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: the rollouts whose task index is `index` modulo `count`; with
    `environments` (`--server AGENT=...`), `count / len(environments.servers)` shards an
    environment: shard `index` holds environment `index // per` agents' rollouts whose task
    index is `index % per` modulo `per`."""

    index: int
    count: int
    environments: Environments | None = None

    @classmethod
    def parse(cls, text: str, environments: Environments | None = None) -> Shard:
        index, _, count = text.partition("/")
        try:
            shard = cls(int(index), int(count), environments)
        except ValueError:
            shard = cls(-1, 0)
        if not 0 <= shard.index < shard.count:
            raise InvalidInputError("bad --shard", [FieldViolation("--shard", f"{text!r}: expected I/N with 0 <= I < N")])
        return shard

    def owns(self, task: int, agent: str, where: str = "the input") -> bool:
        return self.owner(task, agent, where) == self.index

    @property
    def per_environment(self) -> int:
        """Shards an environment has (`count` without environments)."""
        return self.count if self.environments is None else self.count // len(self.environments.servers)

    @property
    def environment(self) -> int:
        """The environment this shard collects (0 without environments)."""
        return self.index // self.per_environment

    def owner(self, task: int, agent: str, where: str = "the input") -> int:
        """The shard of a rollout; InvalidInputError for an agent no environment serves."""
        per = self.per_environment
        return (self.environments.require(agent, where) * per if self.environments is not None else 0) + task % per

    def owned(self, tasks: np.ndarray, agent_codes: np.ndarray, agents: list[str], where: str = "the input") -> np.ndarray:
        """`owns`, column-wise: which of these rollouts (task indices, agent codes into `agents`) are this shard's."""
        per = self.per_environment
        mine = np.asarray(tasks % per == self.index % per)
        if self.environments is None:
            return mine
        codes = [code for code, name in enumerate(agents) if (agent_codes == code).any() and self.environments.require(name, where) == self.environment]
        return mine & np.isin(agent_codes, codes)

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


def refuse_other_shard_count(final: Path, count: int | None) -> None:
    """GymMetricsError when `final`'s folder holds the shard files of a `--processes` run of
    another count (`count` None: one process): it would collect their rows again."""
    counts = {int(m.group(1)) for p in shard_dir(final).glob("*-of-*.jsonl") if (m := re.fullmatch(r"\d+-of-(\d+)\.jsonl", p.name))}
    left = max(counts) if counts else None
    if left is not None and left != count:
        raise GymMetricsError(f"{shard_dir(final)} holds the shards of a --processes {left} run: resume it with --processes {left}")


__all__ = ["Shard", "refuse_other_shard_count", "shard_dir", "stats_path"]


@contextlib.contextmanager
def output_locked(final: Path, take: bool = True) -> Iterator[None]:
    """A run on `final` holds `.<name>.lock` beside the file it names (symlinks resolved; when
    `take`: a shard's parent holds it for it): a second collect on the same output, of either
    kind, through any path, is refused while one runs (it appended rows of its own, or a
    --processes run's merge replaced them). Nothing is held where the folder cannot take the
    file (it does not exist: the run fails on its output anyway)."""
    lock = None
    if take:
        try:
            real = final.resolve()  # (through a symlink or another path to it: the one file's lock)
            lock = hold_exclusive(real.parent / f".{real.name}.lock", f"another collect is running on {final}: wait for it, or stop it")
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            pass
    try:
        yield
    finally:
        if lock is not None:
            lock.close()
