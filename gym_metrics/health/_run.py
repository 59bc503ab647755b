"""A run's health: every rollout of its files checked (`_read`, in worker processes when the
run is large), rollouts that claim one identity flagged and the task checks run (`_summary`),
NeMo Gym's two reports (`quality_summary.json`, `rollout_verdicts.jsonl`) with its one-line
report, and the counts per agent that go into the metrics file."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gym_metrics._util.atomic import same_file, written_atomically
from gym_metrics._util.memory import fewer_gc_passes
from gym_metrics.health._checks import Digest, check_ignored
from gym_metrics.health._read import read_run, worker_count
from gym_metrics.health._summary import VERDICTS, TaskChecks, code, flag_duplicates, issue_counts, json_bytes, summary, task_checks, verdicts, write_verdicts
from gym_metrics.health._table import Table

SUMMARY_FILE = "quality_summary.json"
VERDICTS_FILE = "rollout_verdicts.jsonl"
INPUTS_FILE = "rollout_verdicts.inputs.json"
"""Beside the two NeMo Gym reports (kept byte for byte NeMo Gym's): the rollout files the
verdicts are of, so a viewer shows them on those files only."""


def verdicts_cover(rollouts: Path, verdicts: Path) -> bool:
    """Whether the verdicts file `verdicts` is of `rollouts`: listed in the inputs file beside
    it, or, without one (NeMo Gym's own reports), when `rollouts` is the only rollouts file in
    its folder (a verdict names a task and rollout, never a file)."""
    try:
        listed = orjson.loads((verdicts.parent / INPUTS_FILE).read_bytes())["inputs"]
        return str(rollouts.resolve()) in listed
    except FileNotFoundError:
        pass
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return False
    others = [p for p in rollouts.parent.glob("*.jsonl") if p.name != VERDICTS_FILE and not p.name.endswith("_failures.jsonl")]
    return [p.name for p in others] == [rollouts.name]


@dataclass
class Health:
    """A run's health: the summary, where the reports went, and each rollout's digest."""

    summary: dict[str, Any]
    summary_path: Path
    verdicts_path: Path
    table: Table = field(repr=False)
    verdict: np.ndarray = field(repr=False)
    tasks: TaskChecks = field(repr=False)

    @cached_property
    def rollouts(self) -> list[Digest]:
        """Each rollout's digest in the run's order (made when first asked for: a large run
        keeps its digests as columns)."""
        return [self.table.digest(row) for row in range(len(self.table))]

    def line(self) -> str:
        """NeMo Gym's report: the verdict counts (and the ignored checks), then the summary's path."""
        verdicts = self.summary["run"]["verdicts"]
        ignored = self.summary["run"]["ignored_checks"]
        note = f" (ignored: {', '.join(ignored)})" if ignored else ""
        return (f"Rollout health: {sum(verdicts.values())} checked, {verdicts['healthy']} healthy, {verdicts['unhealthy']} unhealthy, "
                f"{verdicts['unobserved']} unobserved{note}\nQuality summary: {self.summary_path}")  # fmt: skip

    def by_agent(self, agents: Sequence[str], default: str | None = None) -> dict[str, dict[str, Any]]:
        """Per agent of `agents` with rollouts in the run, their health as the metrics file keeps
        it: records, verdict counts, findings per check (a task flag counts for each agent with
        a rollout of that task) and the ignored checks. Rows naming no agent (unreadable lines
        too) count for `default`, else for the only agent when there is one."""
        fallback = default if default is not None else agents[0] if len(agents) == 1 else None
        coded, names = code([a if a is not None else fallback for a in self.table.agent])
        out = {}
        for name in agents:
            if name not in names:
                continue
            mine = coded == names.index(name)
            counted = np.bincount(self.verdict[mine], minlength=3)
            out[name] = {"records": int(mine.sum()), "verdicts": {v: int(counted[i]) for i, v in enumerate(VERDICTS)},
                         "issues": issue_counts(self.table, self.tasks, mine), "ignored_checks": list(self.summary["run"]["ignored_checks"])}  # fmt: skip
        return out

    def add_to_metrics(self, metrics: Path, default_agent: str | None = None) -> dict[str, dict[str, Any]]:
        """Writes each agent's `by_agent` counts into the metrics file as its `health` section
        (every other key and number as it was); returns them."""
        from gym_metrics.aggregate import add_agent_sections, agent_names

        blocks = self.by_agent(agent_names(metrics), default_agent)
        add_agent_sections(metrics, {name: {"health": block} for name, block in blocks.items()})
        return blocks


def _analyse(table: Table, ignored: Sequence[str], duplicates: bool = True) -> tuple[np.ndarray, TaskChecks, dict[str, Any]]:
    skip = frozenset(ignored)
    task, values = code(table.task)
    rollout, _ = code(table.rollout)
    if duplicates:
        flag_duplicates(table, task, rollout, skip)
    verdict = verdicts(table)
    tasks = task_checks(table, task, values, rollout, verdict, skip)
    return verdict, tasks, summary(table, verdict, tasks, ignored)


def summarize(digests: list[Digest], ignored: Sequence[str]) -> dict[str, Any]:
    """NeMo Gym's quality summary of a run's digests (duplicates already flagged)."""
    return _analyse(Table.of(digests), ignored, duplicates=False)[2]


def check_health(paths: Path | Sequence[Path], *, output_dir: Path | None = None, ignore: Iterable[str] = (), workers: int | None = None) -> Health:
    """Checks every rollout of `paths` and writes the two reports into `output_dir` (default:
    the first file's folder), as NeMo Gym's `gym eval health-check` does. `workers`: processes
    that check a large run's byte ranges (default: one per core, at most 8; 1: this process)."""
    files = [paths] if isinstance(paths, Path) else list(paths)
    if not files:
        raise ValueError("at least one rollouts file is needed")
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"rollouts file not found: {path}")
    ignored = check_ignored(ignore)
    out = output_dir or files[0].parent
    summary_path, verdicts_path = out / SUMMARY_FILE, out / VERDICTS_FILE
    for written in (summary_path, verdicts_path):
        if any(same_file(written, path) for path in files):
            raise ValueError(f"{written} is one of the rollout files: writing it would overwrite them; give -o another folder")
    with fewer_gc_passes():  # containers by the million, all kept or all freed at once
        table = read_run(files, frozenset(ignored), worker_count(workers))
        verdict, tasks, summary = _analyse(table, ignored)
        with written_atomically(summary_path) as tmp:
            tmp.write_bytes(json_bytes(summary, orjson.OPT_INDENT_2))
        with written_atomically(out / INPUTS_FILE) as tmp:  # first: a viewer re-reads the verdicts when they change
            tmp.write_bytes(orjson.dumps({"inputs": [str(path.resolve()) for path in files]}, option=orjson.OPT_INDENT_2))
        with written_atomically(verdicts_path) as tmp, tmp.open("wb") as f:
            write_verdicts(f, table, verdict)
    return Health(summary, summary_path, verdicts_path, table, verdict, tasks)
