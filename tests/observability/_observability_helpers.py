"""Skip without an optional extra, except under CI=true, where a missing extra fails."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def need(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        why = f"{module} is not installed (pip install -e '.[dev]')"
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; with CI=true these tests must run, not skip", pytrace=False)
        pytest.skip(why)
