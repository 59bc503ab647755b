"""Exporters: send a finished metrics file to an experiment tracker (`--export NAME[=TARGET]`
on `collect` and `aggregate`). Built-ins: mlflow, wandb, tensorboard, each an optional extra;
third parties register more through the `gym_metrics.exporters` entry-point group. Also the
Pushgateway push of `collect --pushgateway` (`Pusher`)."""

from __future__ import annotations

from gym_metrics.exporters._base import (
    EXPORTERS,
    AgentMetrics,
    Exporter,
    ExportError,
    ExporterMissingError,
    ExportRun,
    exporter_names,
    get_exporter,
    load_run,
    mlflow_key,
    register_exporter,
)
from gym_metrics.exporters._mlflow import MlflowExporter
from gym_metrics.exporters._pushgateway import CollectCounters, Pusher, PushgatewayError
from gym_metrics.exporters._tensorboard import TensorboardExporter
from gym_metrics.exporters._wandb import WandbExporter

__all__ = [
    "EXPORTERS",
    "AgentMetrics",
    "CollectCounters",
    "ExportError",
    "ExportRun",
    "Exporter",
    "ExporterMissingError",
    "MlflowExporter",
    "Pusher",
    "PushgatewayError",
    "TensorboardExporter",
    "WandbExporter",
    "exporter_names",
    "get_exporter",
    "load_run",
    "mlflow_key",
    "register_exporter",
]
