"""The exporter interface: one finished metrics file (and report) sent to an experiment
tracker. Exporters are registered by name like reducers and scorers (entry-point group
`gym_metrics.exporters`), so a third party adds one without touching the CLI."""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from gym_metrics._util.registry import Registry
from gym_metrics.errors import ExitCode, GymMetricsError

METRICS_SUFFIX = "_aggregate_metrics"
"""`<stem>_aggregate_metrics.json`: the run is named after `<stem>`."""


class ExporterMissingError(GymMetricsError):
    """An exporter's optional extra is not installed (exit code 2, before any work)."""

    exit_code = ExitCode.BAD_INPUT


class ExportError(GymMetricsError):
    """An exporter failed after the metrics file was written (the file is kept)."""

    exit_code = ExitCode.FAILED


@dataclass(frozen=True)
class AgentMetrics:
    """What an exporter sends of one agent: its key metrics and its numeric agent metrics."""

    agent: str
    key_metrics: dict[str, float]
    agent_metrics: dict[str, float]


@dataclass(frozen=True)
class ExportRun:
    """One export: the metrics file, its parsed numbers, the run's name and files."""

    metrics_path: Path
    metrics: list[AgentMetrics]
    name: str
    """The output stem: the run is named after it."""
    artifacts: tuple[Path, ...] = ()
    """The metrics file, and the HTML report when one was written."""
    resume: bool = False
    """`collect --resume`: log into the run an earlier export of this output started."""
    key: str = field(default="")
    """Stable identity of the output (a hash of its absolute path): how a resumed run is found."""

    def flat(self, sanitise: Callable[[str], str] = str) -> dict[str, float]:
        """Every number as `<agent>/key/<name>` (key metrics) and `<agent>/<name>` (agent
        metrics), names passed through `sanitise`; names that collide after it get `_2`, ..."""
        out: dict[str, float] = {}
        for agent in self.metrics:
            for prefix, values in ((f"{agent.agent}/key/", agent.key_metrics), (f"{agent.agent}/", agent.agent_metrics)):
                for name, value in values.items():
                    out[_unique(sanitise(prefix + name), out)] = value
        return out


def _unique(name: str, taken: dict[str, float]) -> str:
    if name not in taken:
        return name
    n = 2
    while f"{name}_{n}" in taken:
        n += 1
    return f"{name}_{n}"


class Exporter(ABC):
    """Sends one metrics file somewhere. `target` is what follows `=` in `--export NAME=TARGET`
    (a tracking URI, a directory, a project), None when nothing does."""

    name: ClassVar[str] = ""
    extra: ClassVar[str] = ""
    """The pip extra that installs what it needs: `pip install 'gym-metrics[<extra>]'`."""
    requires: ClassVar[tuple[str, ...]] = ()
    """Modules that must be importable; checked before any work (exit 2 when missing)."""

    def __init__(self, target: str | None = None) -> None:
        self.target = target or None

    @classmethod
    def check_installed(cls) -> None:
        """ExporterMissingError naming the pip extra when a required module is missing."""
        missing = [m for m in cls.requires if not _importable(m)]
        if missing:
            raise ExporterMissingError(
                f"--export {cls.name} needs {', '.join(missing)}, which is not installed: "
                f"pip install 'gym-metrics[{cls.extra or cls.name}]'"
            )

    @abstractmethod
    def export(self, run: ExportRun) -> str:
        """Send the run; returns where it went (one line for the user, never a secret)."""


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ValueError, ImportError):  # a module set to None in sys.modules (how tests hide it)
        return False


EXPORTERS: Registry[Exporter] = Registry(
    "exporter", Exporter, ("gym_metrics.exporters",), named=True  # type: ignore[type-abstract]
)
E = TypeVar("E", bound=type[Exporter])


def register_exporter(name: str) -> Callable[[E], E]:
    """Class decorator: make an Exporter subclass available as `--export <name>`."""
    return EXPORTERS.register(name)


def get_exporter(name: str) -> type[Exporter]:
    """The exporter class registered as `name`; NotFoundError listing the known names."""
    return EXPORTERS.get(name)


def exporter_names() -> list[str]:
    return EXPORTERS.names()


def load_run(metrics_path: Path, *, resume: bool = False, report: Path | None = None) -> ExportRun:
    """The ExportRun of a written metrics file (a list of agents, as `collect` and
    `aggregate` write it): finite numbers only, rollout-level entries left out."""
    import orjson

    data: Any = orjson.loads(metrics_path.read_bytes())
    agents = data if isinstance(data, list) else [data]
    metrics = [
        AgentMetrics(
            agent=str((a.get("agent_ref") or {}).get("name", "agent")),
            key_metrics=dict(_numbers(a.get("key_metrics"))),
            agent_metrics=dict(_numbers(a.get("agent_metrics"))),
        )
        for a in agents
        if isinstance(a, dict)
    ]
    stem = metrics_path.stem
    name = stem[: -len(METRICS_SUFFIX)] if stem.endswith(METRICS_SUFFIX) and stem != METRICS_SUFFIX else stem
    artifacts = (metrics_path, *([report] if report is not None and report.is_file() else []))
    key = hashlib.sha256(str(metrics_path.resolve()).encode()).hexdigest()[:32]
    return ExportRun(metrics_path, metrics, name, artifacts, resume, key)


def _numbers(values: Any) -> Iterator[tuple[str, float]]:
    if not isinstance(values, dict):
        return
    for name, value in values.items():
        if isinstance(value, (int, float)) and math.isfinite(value):
            yield str(name), float(value)


_MLFLOW_BAD = re.compile(r"[^\w\-. :/]")


def mlflow_key(name: str) -> str:
    """A metric name MLflow accepts (letters, digits, `_-. :/`, at most 250 characters):
    `@` and `^` are spelled out so pass@k and pass^k stay apart, anything else becomes `_`;
    path segments MLflow refuses (empty, `.`, `..`: an agent named `/models/llama` or `../x`)
    become `_` too."""
    key = _MLFLOW_BAD.sub("_", name.replace("@", "_at_").replace("^", "_hat_"))
    key = "/".join("_" if part in ("", ".", "..") else part for part in key.split("/"))
    if len(key) > 250:
        key = key[:237] + "_" + hashlib.sha256(name.encode()).hexdigest()[:12]
    return key
