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
    key_metrics: dict[str, float | int]
    agent_metrics: dict[str, float | int]


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
    skipped: int = 0
    """Metric values left out: not numbers (text, null, lists) or not finite."""

    def flat(self, sanitise: Callable[[str], str] = str, limit: int | None = None) -> dict[str, float | int]:
        """Every number as `<agent>/key/<name>` (key metrics) and `<agent>/<name>` (agent
        metrics), a nested one as `<name>/<inner>`; names passed through `sanitise`; names that
        collide after it get `_2`, ... (sanitised again, so a name stays within `limit`)."""
        out: dict[str, float | int] = {}
        for agent in self.metrics:
            for prefix, values in ((f"{agent.agent}/key/", agent.key_metrics), (f"{agent.agent}/", agent.agent_metrics)):
                for name, value in values.items():
                    out[_unique(prefix + name, out, sanitise, limit)] = value
        return out

    def skipped_note(self) -> str:
        """`, N values not numbers: left out` for the line an exporter prints ("" for none)."""
        return f", {self.skipped} value{'s' if self.skipped != 1 else ''} not numbers: left out" if self.skipped else ""


def _unique(raw: str, taken: dict[str, float | int], sanitise: Callable[[str], str], limit: int | None) -> str:
    name, n = sanitise(raw), 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = sanitise(raw + suffix)
        if limit is not None and len(name) > limit:
            name = name[: limit - len(suffix)] + suffix
    return name


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
    skipped: list[str] = []
    metrics = [
        AgentMetrics(
            agent=str((a.get("agent_ref") or {}).get("name", "agent")),
            key_metrics=dict(_numbers(a.get("key_metrics"), skipped)),
            agent_metrics=dict(_numbers(a.get("agent_metrics"), skipped)),
        )
        for a in agents
        if isinstance(a, dict)
    ]
    stem = metrics_path.stem
    name = stem[: -len(METRICS_SUFFIX)] if stem.endswith(METRICS_SUFFIX) and stem != METRICS_SUFFIX else stem
    artifacts = (metrics_path, *([report] if report is not None and report.is_file() else []))
    key = hashlib.sha256(str(metrics_path.resolve()).encode()).hexdigest()[:32]
    return ExportRun(metrics_path, metrics, name, artifacts, resume, key, len(skipped))


def _numbers(values: Any, skipped: list[str], prefix: str = "") -> Iterator[tuple[str, float | int]]:
    """The numbers of a metrics block, nested blocks' as `name/inner`; integers kept exact (a
    tracker that stores floats converts them), booleans as 0/1; what is not a finite number is
    named in `skipped`."""
    if not isinstance(values, dict):
        return
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _numbers(value, skipped, f"{name}/")
        elif isinstance(value, bool):
            yield name, int(value)
        elif isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
            yield name, value
        else:
            skipped.append(name)


MLFLOW_KEY_LIMIT = 250
"""MLflow's longest metric name."""
_MLFLOW_BAD = re.compile(r"[^\w\-. :/]")


def mlflow_key(name: str) -> str:
    """A metric name MLflow accepts (letters, digits, `_-. :/`, at most 250 characters):
    `@` and `^` are spelled out so pass@k and pass^k stay apart, anything else becomes `_`;
    path segments MLflow refuses (empty, `.`, `..`: an agent named `/models/llama` or `../x`)
    become `_` too."""
    key = _MLFLOW_BAD.sub("_", name.replace("@", "_at_").replace("^", "_hat_"))
    key = "/".join("_" if part in ("", ".", "..") else part for part in key.split("/"))
    if len(key) > MLFLOW_KEY_LIMIT:
        key = key[: MLFLOW_KEY_LIMIT - 13] + "_" + hashlib.sha256(name.encode()).hexdigest()[:12]
    return key
