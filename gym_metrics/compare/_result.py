"""The one result type of every comparison method: `ComparisonReport`, a list of `Comparison`
rows (one A - B difference each) and the settings they were computed with."""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

CONFIDENCE = 0.95
BOOTSTRAP = "paired bootstrap over common tasks (percentile interval)"
"""`Comparison.method` of `compare_agents` (the default, as before rows carried other methods)."""


@dataclass(frozen=True)
class Comparison:
    """metric(A) - metric(B) over the tasks both agents have, with an interval at `confidence`.

    Every method fills the common fields; its own numbers (the paired test's df, p_value,
    p_adjusted, mde, ...; the bootstrap's resamples and seed) are in `stats` and read as
    attributes too (`c.p_value`)."""

    metric: str
    agent_a: str
    agent_b: str
    value_a: float
    """The metric of A over the common tasks."""
    value_b: float
    difference: float
    """value_a - value_b: the point estimate."""
    ci_low: float
    ci_high: float
    standard_error: float
    common_tasks: int
    only_a_tasks: tuple[int, ...]
    """Tasks with a measured value for A only (not used)."""
    only_b_tasks: tuple[int, ...]
    field: str = "reward"
    confidence: float = CONFIDENCE
    method: str = BOOTSTRAP
    stats: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The method's own numbers, by name."""
    layout: tuple[str, ...] = ()
    """The keys of `to_dict`, in order (the method's JSON shape); empty: every field but these."""
    notes: tuple[str, ...] = ()
    """Method-specific lines `summary` shows after the values (e.g. the bootstrap's resamples)."""

    def __getattr__(self, name: str) -> Any:
        stats = self.__dict__.get("stats")
        if stats is not None and name in stats:
            return stats[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def name(self) -> str:
        return f"{self.metric}({self.field}): {self.agent_a} - {self.agent_b}"

    def to_dict(self) -> dict[str, Any]:
        keys = self.layout or tuple(k for k in self.__dataclass_fields__ if k not in ("stats", "layout", "notes"))
        return {k: _plain(getattr(self, k)) for k in keys}

    def summary(self) -> str:
        """A few lines for a terminal."""
        pct = f"{100 * self.confidence:g}%"
        lines = [
            (
                f"{self.metric}: {self.agent_a} - {self.agent_b} = {self.difference:+.4f}"
                f"  ({pct} CI [{self.ci_low:+.4f}, {self.ci_high:+.4f}], se {self.standard_error:.4f})"
            ),
            (
                f"  {self.agent_a}: {self.value_a:.4f}   {self.agent_b}: {self.value_b:.4f}"
                f"   over {self.common_tasks} common tasks"
            ),
            *self.notes,
        ]
        return "\n".join(lines + only_tasks_lines(self))


def only_tasks_lines(c: Comparison) -> list[str]:
    """One line per agent with tasks the other lacks (the first ten shown)."""
    lines = []
    for name, only in ((c.agent_a, c.only_a_tasks), (c.agent_b, c.only_b_tasks)):
        if only:
            shown = ", ".join(map(str, only[:10])) + (", ..." if len(only) > 10 else "")
            lines.append(f"  {len(only)} task(s) measured only for {name} (the other's rollouts of them are absent, failed or masked; not used): {shown}")
    return lines


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, dict):
        return dict(value)
    return value


@dataclass(frozen=True)
class ComparisonReport:
    """Every comparison one method made (pairs x metrics x fields), with its settings.
    `method_name` is the method's registry name (`get_method`), which renders it."""

    comparisons: list[Comparison]
    adjust: str
    """The p-value adjustment over the comparisons ("" where the method has no p-values)."""
    confidence: float
    alpha: float
    power: float
    method: str = "paired by task: clustered standard error, Student t with tasks - 1 df"
    method_name: str = "paired"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in ("adjust", "confidence", "alpha", "power", "method")}
        out["comparisons"] = [c.to_dict() for c in self.comparisons]
        return out
