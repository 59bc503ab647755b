"""CI-strict skips, shared by every test that needs something the machine may lack (a CLI
tool, an optional extra, a native module built at install, a browser).

Locally such a test skips with the reason. Under CI=true it fails instead: .ci/run installs
everything these tests need, so a skip there would be a check that silently did not run.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest


def strict() -> bool:
    """True under CI=true, where a missing dependency fails the test instead of skipping it."""
    return os.environ.get("CI") == "true"


def missing(reason: str) -> NoReturn:
    """Skip the test for `reason`; under CI=true fail it (the reason says what to install)."""
    if strict():
        pytest.fail(f"{reason}; with CI=true this test must run, not skip", pytrace=False)
    pytest.skip(reason)


def optional_absent() -> bool:
    """True in .ci/run's README stage (CI_OPTIONAL=absent): a venv with exactly what the README
    installs, where a test of an optional package (one the dev extra does not bring) skips, with
    a hint that says how to get it; anything else missing still fails under CI=true."""
    return os.environ.get("CI_OPTIONAL") == "absent"


def need_module(name: str, install: str) -> ModuleType:
    """The module `name`; missing() when it cannot be imported (`install` says how to get it).
    A namespace package (no `__file__`) counts only where one of its folders is installed (under
    site-packages, as opentelemetry.sdk is): elsewhere it is a folder of that name somewhere on
    sys.path, as a test folder once was for `ray`, not the package."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        if optional_absent() and "pip install" in install and not any(dev in install for dev in (".[dev]", "dev extra")):
            pytest.skip(f"{name} is not installed ({install})")  # the README stage: absent by design
        missing(f"{name} is not installed ({install})")
    if getattr(module, "__file__", None) is None and not any(
        part in ("site-packages", "dist-packages") for folder in module.__path__ for part in Path(folder).parts
    ):
        missing(f"{name} is not installed ({install}; `import {name}` found only a folder: {list(module.__path__)})")
    return module


def need_tool(name: str, why: str) -> str:
    """The path of the command-line tool `name` on PATH; missing() when absent."""
    path = shutil.which(name)
    if path is None:
        missing(f"{why}: {name} is not on PATH")
    return path


def need_sandbox() -> None:
    """missing() unless the sandbox's default isolation (`strict`: bubblewrap and root) is here:
    without it a Pool refuses to exist, as a server refuses to start (docs/sandbox.md)."""
    from gym_metrics.sandbox import SandboxUnavailableError, check_isolation

    try:
        check_isolation("strict")
    except SandboxUnavailableError as exc:
        missing(str(exc))


def imported(name: str) -> object:
    """The module `name`, None where it cannot be imported (a native module not built)."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def need_native(module: object, name: str) -> object:
    """A native module the install builds (`module` is what the package imported, or None)."""
    if module is None:
        missing(f"{name} was not built (the install needs a C compiler and Python's headers)")
    return module
