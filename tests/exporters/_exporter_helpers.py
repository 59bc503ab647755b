"""Shared by the exporter and observability tests: skip without an extra, fail under CI=true."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def need(module: str) -> ModuleType:
    """The module; skip (fail under CI=true) when its extra is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        why = f"{module} is not installed (pip install -e '.[mlflow,wandb,tensorboard]')"
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; with CI=true the exporter tests must run, not skip", pytrace=False)
        pytest.skip(why)
