"""Comparison methods by name: the `CompareMethod` base a method subclasses, and the registry
(`@register_method`, entry-point group `gym_metrics.compare_methods`) that `compare`, the
verdict and the report read them from."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from gym_metrics._util.registry import Registry
from gym_metrics.rollouts import RolloutColumns
from gym_metrics.compare._result import Comparison, ComparisonReport
from gym_metrics.statistics import CONFIDENCE, POWER

Cell = float | int | str | tuple[float, float]
"""A report table cell: a number, a count, text, or an interval (low, high)."""


@dataclass(frozen=True)
class CompareOptions:
    """What `gym-metrics compare` passes every method (a method reads the options it uses)."""

    reducers: Sequence[str] = ("mean_reward",)
    fields: Sequence[str] = ("reward",)
    adjust: str = "holm"
    alpha: float | None = None
    """When given, the confidence is 1 - alpha."""
    confidence: float = CONFIDENCE
    power: float = POWER
    resamples: int = 10_000
    seed: int = 0
    where: str = ""
    """Names the source in errors (" in FILE")."""


class CompareMethod(ABC):
    """One way to compare agents: `run` makes a report; the rest renders its rows for the
    terminal, JSON, the HTML report and the verdict, so none of those names a method."""

    name: ClassVar[str] = ""
    """Its registry name (`--method NAME`), set when registered."""

    @abstractmethod
    def run(self, agents: Mapping[str, RolloutColumns], names: Sequence[str], options: CompareOptions) -> ComparisonReport:
        """Compare the agents `names` (in order: A - B, A - C, B - C, ...)."""

    @abstractmethod
    def lines(self, report: ComparisonReport, c: Comparison) -> list[str]:
        """Terminal lines of one comparison."""

    def columns(self, report: ComparisonReport) -> list[str]:
        """Headings of the HTML report's table after "A - B" (one per `cells` item)."""
        return ["difference", f"{100 * report.confidence:g}% interval", "common tasks"]

    def cells(self, c: Comparison) -> list[Cell]:
        return [c.difference, (c.ci_low, c.ci_high), c.common_tasks]

    def describe(self, report: ComparisonReport) -> str:
        """A few words for the HTML report's note, e.g. "paired by task (...), holm adjusted"."""
        return report.method

    def to_json(self, report: ComparisonReport, verdict: dict[str, Any] | None) -> dict[str, Any]:
        """`compare --json`: the report and its verdict (None without a rule)."""
        return {**report.to_dict(), "verdict": verdict}

    def verdict_confidence(self, report: ComparisonReport, m: int) -> float:
        """The confidence of each interval a verdict over m checks uses: Bonferroni by default."""
        return 1 - (1 - report.confidence) / m

    def verdict_interval(self, c: Comparison, confidence: float, m: int) -> tuple[float, float]:
        """The interval of `c` at `confidence` that a verdict over m checks compares to a margin.
        A method whose interval cannot be recomputed at another confidence overrides both hooks."""
        if m == 1:
            return c.ci_low, c.ci_high
        raise NotImplementedError(f"method {self.name!r} has no interval at confidence {confidence:g}")


METHODS: Registry[CompareMethod] = Registry(
    "compare method", CompareMethod, ("gym_metrics.compare_methods",), named=True  # type: ignore[type-abstract]
)
M = TypeVar("M", bound=type[CompareMethod])


def register_method(name: str) -> Callable[[M], M]:
    """Class decorator: make a CompareMethod subclass available as `get_method(name)`."""
    return METHODS.register(name)


def get_method(name: str) -> CompareMethod:
    """An instance of the method registered as `name`; NotFoundError lists the known ones."""
    return METHODS.get(name)()


def method_names() -> list[str]:
    return METHODS.names()
