"""Every old name that still works, in one table: each warns once per use with a
DeprecationWarning naming its replacement and the release that removes it.

Old names resolve by import path (importlib), so an alias never adds an import edge from a
package to one above it. CHANGELOG.md ("Deprecated") lists the same names."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

REMOVAL = "0.3.0"
"""The release that removes every name below."""

OLD_MODULES: dict[str, str] = {
    "gym_metrics.server": "gym_metrics.environments",
    "gym_metrics.metrics": "gym_metrics.reducers",
    "gym_metrics.judge": "gym_metrics.scorers.judge",
    "gym_metrics.evaluate": "gym_metrics.evaluation",
    "gym_metrics.paired": "gym_metrics.compare",
    "gym_metrics.economics": "gym_metrics.reducers",
}
"""Old module -> the module to use instead (the old module re-exports it and warns on import)."""

_REDUCERS = {
    "Metric": "gym_metrics.reducers:Reducer",
    "MetricResult": "gym_metrics.reducers:ReducerResult",
    "get_metric": "gym_metrics.reducers:get_reducer",
    "register_metric": "gym_metrics.reducers:register_reducer",
}
_ROW_METRICS = {
    "RowMetric": "gym_metrics.scorers:Scorer",
    "get_row_metric": "gym_metrics.scorers:get_scorer",
    "register_row_metric": "gym_metrics.scorers:register_scorer",
    "row_metric_names": "gym_metrics.scorers:scorer_names",
}
_JUDGE = {
    "JudgeMetric": "gym_metrics.scorers.judge:JudgeScorer",
    "JudgeMetricConfig": "gym_metrics.scorers.judge:JudgeScorerConfig",
}

OLD_NAMES: dict[str, dict[str, str]] = {
    "gym_metrics": {
        **_REDUCERS,
        **{k: v for k, v in _ROW_METRICS.items() if k != "row_metric_names"},
        "EvaluationResult": "gym_metrics.evaluation:EvaluationScores",
    },
    "gym_metrics.metrics": {
        **_REDUCERS,
        "registered_metrics": "gym_metrics.reducers:reducer_names",
        "resolve_metrics": "gym_metrics.reducers:resolve_reducers",
        "summarize_metrics": "gym_metrics.reducers:summarize_reducers",
    },
    "gym_metrics.evaluate": {**_ROW_METRICS, "EvaluationResult": "gym_metrics.evaluation:EvaluationScores"},
    "gym_metrics.judge": _JUDGE,
    "gym_metrics.evaluation": {"EvaluationResult": "gym_metrics.evaluation:EvaluationScores"},
    "gym_metrics.jobs": {
        "Progress": "gym_metrics.jobs:JobProgress",
        "RunConfig": "gym_metrics.jobs:JobRunConfig",
    },
    "gym_metrics.compare": {
        "PairedReport": "gym_metrics.compare:ComparisonReport",
        "PairedComparison": "gym_metrics.compare:Comparison",
    },
    "gym_metrics.scorers": {
        **_ROW_METRICS,
        "ScorerEnvironment": "gym_metrics.environments:ScorerEnvironment",
    },
    "gym_metrics.scorers.judge": _JUDGE,
    "gym_metrics.scorers.remote": {
        "RemoteMetric": "gym_metrics.scorers.remote:RemoteScorer",
        "NatRemoteMetric": "gym_metrics.scorers.remote:NatRemoteScorer",
        "RemoteMetricConfig": "gym_metrics.scorers.remote:RemoteScorerConfig",
    },
    "gym_metrics.scorers.tool_calls": {
        "ToolCallAccuracyMetric": "gym_metrics.scorers.tool_calls:ToolCallAccuracyScorer",
        "ToolCallingMetric": "gym_metrics.scorers.tool_calls:ToolCallingScorer",
    },
    "gym_metrics.targets": {
        "run_episode": "gym_metrics.collector:run_episode",
        "Episode": "gym_metrics.collector:EpisodeResult",
        "CallTool": "gym_metrics.collector:CallTool",
        "add_usage": "gym_metrics.collector:add_usage",
    },
    "gym_metrics.environments": {
        "Episodes": "gym_metrics.environments:Sessions",
    },
    "gym_metrics.sandbox": {
        "PythonSession": "gym_metrics.sandbox:PythonInterpreter",
    },
    "gym_metrics.testing": {
        "ScorerEnvironment": "gym_metrics.environments:ScorerEnvironment",
    },
}
"""Package -> old attribute name -> `module:name` of its replacement."""

OLD_ENTRY_POINT_GROUPS: dict[str, str] = {
    "gym_metrics.metrics": "gym_metrics.reducers",
    "gym_metrics.row_metrics": "gym_metrics.scorers",
}
"""Old entry-point group -> the group plugins declare now (plugins of the old one still load)."""

OLD_FLAGS: dict[str, dict[str, str]] = {
    "compare": {"--metric": "--reducer"},
    "serve": {"--metrics": "--reducers"},
}
"""Command -> old spelling of a flag -> the flag to use (`evaluate --metric` and
`jobs submit --metric` are NeMo Evaluator's spellings, kept without a warning)."""

OLD_CLASS_ATTRIBUTES: dict[str, dict[str, str]] = {
    "gym_metrics.environments:SimpleResourcesServer": {"metrics": "reducers"},
}
"""`module:Class` -> old ClassVar a subclass may still set -> the ClassVar to set instead."""


def warn(old: str, new: str, stacklevel: int = 3) -> None:
    warnings.warn(f"{old} is deprecated; use {new} (removal in {REMOVAL})", DeprecationWarning, stacklevel=stacklevel)


def warn_module(module: str) -> None:
    """Called at the top of an old module: the warning points at the importing line."""
    warn(module, OLD_MODULES[module], stacklevel=4)


def old_name(package: str, name: str) -> Any:
    """A package's `__getattr__` for its old names: the replacement, with a warning."""
    target = OLD_NAMES.get(package, {}).get(name)
    if target is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module, _, attribute = target.partition(":")
    warn(f"{package}.{name}", f"{module}.{attribute}")
    return getattr(importlib.import_module(module), attribute)


def old_names(package: str) -> Callable[[str], Any]:
    """`__getattr__ = old_names(__name__)`: a package's hook for its old names."""
    return lambda name: old_name(package, name)


def old_groups(group: str) -> list[str]:
    """The old entry-point groups whose plugins now belong to `group`."""
    return [old for old, new in OLD_ENTRY_POINT_GROUPS.items() if new == group]


def warn_old_group(old: str, new: str, plugin: str) -> None:
    """A plugin found only under an old entry-point group: loaded, with a warning."""
    warn(f"entry-point group {old!r} (plugin {plugin!r})", f"entry-point group {new!r}", stacklevel=2)


def old_flags_used(command: str, argv: list[str]) -> list[tuple[str, str]]:
    """(old flag, its replacement) for each old spelling `argv` uses with `command`."""
    table = OLD_FLAGS.get(command, {})
    return [(old, new) for old, new in table.items() if any(arg == old or arg.startswith(old + "=") for arg in argv)]


def warn_class_attribute(owner: str, cls: type) -> None:
    """Called from `owner`'s `__init_subclass__`: a subclass setting an old ClassVar warns."""
    for old, new in OLD_CLASS_ATTRIBUTES[owner].items():
        if old in cls.__dict__:
            base = owner.partition(":")[2]
            warn(f"{base}.{old} (set by {cls.__qualname__})", f"{base}.{new}", stacklevel=4)


__all__ = [
    "OLD_CLASS_ATTRIBUTES",
    "OLD_ENTRY_POINT_GROUPS",
    "OLD_FLAGS",
    "OLD_MODULES",
    "OLD_NAMES",
    "REMOVAL",
    "old_flags_used",
    "old_groups",
    "old_name",
    "old_names",
    "warn",
    "warn_class_attribute",
    "warn_module",
    "warn_old_group",
]
