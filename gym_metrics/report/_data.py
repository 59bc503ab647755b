"""What the report needs from a metrics file (and optionally its rollouts file), in numpy.

The metrics file is parsed whole (orjson), then reduced per agent to a few arrays (one value
per task or per rollout) and a bounded number of samples, so the parsed document can be freed
before anything is drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gym_metrics.aggregate import apply_errors, counted_errors_as_zero
from gym_metrics.rollouts import NumericField, RolloutColumns, read_rollouts
from gym_metrics.compare import task_rewards
from gym_metrics.errors import InvalidInputError
from gym_metrics.reducers import TaskRewards
from gym_metrics.report._bounds import MAX_REPEATS, mapping, number, objects, shown_names, wrong

SAMPLE_CHARS = 2000
"""A sample is shown as JSON cut to this many characters (the file must stay small)."""
SAMPLES_PER_AGENT = 400
"""Samples embedded per agent: the first tasks by index and the lowest-scoring ones."""
USAGE_FIELDS = ("total_tokens", "output_tokens", "input_tokens")
STATISTICS = ("mean/", "cluster_ci_low_95/", "cluster_ci_high_95/", "economics/")
"""Keys the report reads as numbers (and any `*_across_repeats/` key): a string there is an error."""


@dataclass
class AgentData:
    """One agent's numbers as the report draws them."""

    name: str
    agent_metrics: dict[str, Any]
    key_metrics: dict[str, Any]
    tasks: np.ndarray
    """Task indices, ascending (int64)."""
    task_mean: np.ndarray
    """mean/<field> of each task (NaN where the task has none)."""
    rollouts: RolloutColumns | None
    """The field's per-rollout values (from the rollouts file or the groups' rollout_infos)."""
    repeats: list[dict[str, float]] = field(default_factory=list)
    """Per rollout index: index, mean, ci_low, ci_high, count (repeat_level_metrics)."""
    usage: dict[str, np.ndarray] = field(default_factory=dict)
    """Per usage field (tokens, cost): each task's mean, aligned with `tasks`."""
    economics: dict[str, Any] = field(default_factory=dict)
    """The `economics` block (aggregate --economics), when present."""
    health: dict[str, Any] = field(default_factory=dict)
    """The `health` section (collect --health): records, verdicts, issues, ignored_checks."""
    samples: dict[int, str] = field(default_factory=dict)
    """Task index -> its sample as (cut) JSON text, for a bounded set of tasks."""
    own_name: str = ""
    """The agent's name in its own file (`name` may carry a --compare file's label)."""
    compared: bool = False
    """From the --compare file (the baseline the verdict gates the first file's agents against)."""

    def task_rewards(self, value_field: str) -> tuple[np.ndarray, TaskRewards] | None:
        """(tasks, their per-rollout values) or None without per-rollout data."""
        if self.rollouts is None:
            return None
        return task_rewards(self.rollouts, value_field)


def load_metrics(path: Path, value_field: str = "reward", rollouts: Path | None = None, label: str = "") -> list[AgentData]:
    """Every agent of a metrics file; `rollouts` (its JSONL) supplies per-rollout values when
    the file has no rollout_infos. `label` prefixes agent names (for a --compare file)."""
    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise InvalidInputError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, list) or not all(isinstance(a, dict) and "agent_ref" in a for a in doc):
        raise InvalidInputError(f"{path}: not an aggregate metrics file (a JSON array of agents with agent_ref)")
    columns = dict(read_rollouts(rollouts, keep_rows=False).agents) if rollouts is not None else {}
    out: list[AgentData] = []
    known: set[str] = set()
    while doc:
        entry = doc.pop(0)  # free each agent's groups once read
        ref = mapping(entry["agent_ref"], f"{path}: agent {len(out)}", "agent_ref")
        name = str(ref.get("name", "?"))
        where = f"{path}: agent {shown_names([name])[0]}"
        known.update(k.removeprefix("mean/") for k in mapping(entry.get("agent_metrics"), where, "agent_metrics") if str(k).startswith("mean/"))
        out.append(_agent(entry, value_field, columns.get(name), label + name, where))
        out[-1].own_name = name
    if out and value_field != "reward" and value_field not in known and not any(value_field in c.fields for c in columns.values()):
        raise InvalidInputError(f"{path}: no agent has the field {value_field!r} (--field); its fields: {', '.join(sorted(known)) or 'none'}")
    return out


def _agent(entry: dict[str, Any], value_field: str, cols: RolloutColumns | None, name: str, where: str) -> AgentData:
    groups = objects(entry.get("group_level_metrics"), where, "group_level_metrics")
    tasks = _indices(groups, "_ng_task_index", where, "group_level_metrics")
    mean = _column(groups, f"mean/{value_field}")
    usage = {f: _column(groups, f"mean/{f}") for f in _usage_fields(groups)}
    data = AgentData(
        name=name,
        agent_metrics=_numbers(entry, "agent_metrics", where),
        key_metrics=_numbers(entry, "key_metrics", where),
        tasks=tasks,
        task_mean=mean,
        rollouts=_from_infos(groups, value_field, tasks, where) or _as_counted(cols, groups),  # the file's own values first: they are what its metrics counted
        repeats=_repeats(objects(entry.get("repeat_level_metrics"), where, "repeat_level_metrics"), value_field, where),
        usage={f: v for f, v in usage.items() if np.isfinite(v).any()},
        economics=_numbers(entry, "economics", where),
        health=_health(entry, where),
    )
    data.samples = _samples(groups, tasks, mean)
    return data


def _as_counted(cols: RolloutColumns | None, groups: list[dict[str, Any]]) -> RolloutColumns | None:
    """The rollouts file's rows as its metrics counted them (`counted_errors_as_zero` tells how:
    the file does not record the option); failed rows left out when it cannot tell, as compare
    leaves them out."""
    if cols is None or cols.errors is None:
        return cols
    return apply_errors(cols, as_zero=True) if counted_errors_as_zero(groups, cols.masked, cols.errors != 0) else cols


def _health(entry: dict[str, Any], where: str) -> dict[str, Any]:
    """An agent's `health` section, checked: counts are numbers, ignored checks are texts."""
    block = mapping(entry.get("health"), where, "health")
    if not block:
        return {}
    verdicts = {k: number(v, where, f"health.verdicts.{k}") for k, v in mapping(block.get("verdicts"), where, "health.verdicts").items()}
    issues = {k: number(v, where, f"health.issues.{k}") for k, v in mapping(block.get("issues"), where, "health.issues").items()}
    ignored = block.get("ignored_checks") or []
    if not isinstance(ignored, list) or not all(isinstance(c, str) for c in ignored):
        raise wrong(ignored, where, "health.ignored_checks", "a list of strings")
    records = number(block.get("records"), where, "health.records")
    return {"records": records, "verdicts": verdicts, "issues": issues, "ignored_checks": ignored}


def _numbers(entry: dict[str, Any], block: str, where: str) -> dict[str, Any]:
    """The block's statistics as floats (null: NaN); other values as they are."""
    metrics = mapping(entry.get(block), where, block)
    out = dict(metrics)
    for key, value in metrics.items():
        if key.startswith(STATISTICS) or "_across_repeats/" in key:
            out[key] = number(value, f"{where}: {block}", key)
    return out


def _indices(rows: list[dict[str, Any]], key: str, where: str, block: str, default: bool = True) -> np.ndarray:
    """Each row's integer `key` (its position where absent, if `default`), checked in one pass."""
    raw = [row.get(key, i if default else None) for i, row in enumerate(rows)]
    if set(map(type, raw)) <= {int}:
        return np.array(raw, dtype=np.int64)
    i, bad = next((i, v) for i, v in enumerate(raw) if type(v) is not int)
    raise wrong(bad, where, f"{block}[{i}].{key}", "an integer")


def _column(groups: list[dict[str, Any]], key: str) -> np.ndarray:
    def value(g: dict[str, Any]) -> float:
        v = g.get(key)
        return float(v) if isinstance(v, (int, float)) else np.nan

    return np.fromiter(map(value, groups), np.float64, len(groups))


def _usage_fields(groups: list[dict[str, Any]]) -> list[str]:
    """Token counts and any cost-like field the groups hold a mean of."""
    keys = groups[0].keys() if groups else ()
    found = [f for f in USAGE_FIELDS if f"mean/{f}" in keys]
    found += sorted(k[5:] for k in keys if k.startswith("mean/") and "cost" in k[5:].lower())
    return found


def _from_infos(groups: list[dict[str, Any]], value_field: str, tasks: np.ndarray, where: str) -> RolloutColumns | None:
    """Per-rollout values from the groups' rollout_infos (None when the file omits them)."""
    if not groups or "rollout_infos" not in groups[0]:
        return None
    per_group = [objects(g.get("rollout_infos"), where, f"group_level_metrics[{i}].rollout_infos") for i, g in enumerate(groups)]
    lengths = np.fromiter(map(len, per_group), np.int64, len(per_group))
    infos = [info for group in per_group for info in group]
    rollout = _indices(infos, "_ng_rollout_index", where, "rollout_infos", default=False)
    raw = [info.get(value_field) for info in infos]
    if set(map(type, raw)) <= {float, int, bool, type(None)}:
        vals = np.array(raw, dtype=np.float64)  # None -> NaN; the common case, in C
    else:  # text or objects are not numbers (docs/metrics.md#non-numeric-values)
        vals = np.array([v if isinstance(v, (int, float)) else np.nan for v in raw], dtype=np.float64)
    present = np.isfinite(vals)
    return RolloutColumns(
        task_index=np.repeat(tasks, lengths),
        rollout_index=rollout,
        fields={value_field: NumericField(vals, present)},
        masked=np.zeros(len(vals), bool),
    )


def _repeats(levels: list[dict[str, Any]], value_field: str, where: str) -> list[dict[str, float]]:
    """The first MAX_REPEATS rollout indices' means and intervals (each is a point drawn)."""
    out: list[dict[str, float]] = []
    for i, r in enumerate(levels[:MAX_REPEATS]):
        at = f"repeat_level_metrics[{i}]."
        mean = number(r.get(f"mean/{value_field}"), where, f"{at}mean/{value_field}")
        if math.isnan(mean):
            continue
        low, high = (number(r.get(f"ci_{s}_95/{value_field}", mean), where, f"{at}ci_{s}_95/{value_field}") for s in ("low", "high"))
        count = number(r.get("sample_count", 0), where, f"{at}sample_count")
        index = number(r.get("_ng_rollout_index", len(out)), where, f"{at}_ng_rollout_index")
        out.append({"index": index, "mean": mean, "ci_low": low, "ci_high": high, "count": count})
    return out


def _samples(groups: list[dict[str, Any]], tasks: np.ndarray, mean: np.ndarray) -> dict[int, str]:
    """The first tasks and the lowest-scoring ones (what people open), each cut short."""
    half = SAMPLES_PER_AGENT // 2
    low = np.argsort(np.where(np.isnan(mean), np.inf, mean), kind="stable")[:half]
    picked = sorted(set(range(min(half, len(groups)))) | set(low.tolist()))
    out = {}
    for i in picked:
        sample = groups[i].get("sample")
        if sample is None:
            continue
        text = _sample_text(sample)
        out[int(tasks[i])] = text if len(text) <= SAMPLE_CHARS else text[:SAMPLE_CHARS] + "\n... (cut)"
    return out


def _sample_text(sample: Any) -> str:
    """Indented JSON, unless indenting would more than double it (deep nesting: each level
    indents every line below it, so a small sample could fill SAMPLE_CHARS)."""
    try:
        compact = orjson.dumps(sample, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:  # nested deeper than orjson writes
        return "(the sample is nested too deep to show; see the metrics file)"
    indented = orjson.dumps(sample, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    return indented if len(indented) <= 2 * len(compact) + 40 else compact
