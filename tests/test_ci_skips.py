"""A test that skips because something is missing fails under CI=true (issue 24.13).

Every such skip goes through tests/_ci.py (skip locally, fail under CI=true; .ci/run installs
what they need). Only skips for a reason no install can change may be written directly: they
are listed in ALLOWED, each with why, and an entry that no longer matches fails.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import _ci

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SKIP = re.compile(r"pytest\.skip\(|pytest\.importorskip\(|\.skipif\(|pytest\.mark\.skip\(|pytest\.mark\.skip\b")

ALLOWED = {
    # (file, text on the line): why it is not a missing dependency
    ("tests/sandbox/test_docker.py", "skipif(not engine()"):
        "a Docker engine is a service, not a package: the machine kinds CI runs on have the docker client only",
    ("tests/deploy/test_sandbox_deploy.py", "skipif(not docker_engine()"):
        "a Docker engine is a service, not a package: the machine kinds CI runs on have the docker client only",
    ("tests/aggregate/test_tdist.py", "pytest.skip(f\"scipy {scipy.__version__} uses Cephes"):
        "scipy < 1.16 (the last for Python 3.10) is a different reference, not a missing one",
    ("tests/aggregate/test_tdist.py", 'pytest.importorskip("scipy")'): "scipy is a core dependency: never skips",
    ("tests/aggregate/test_fast_paths.py", 'skipif(sys.platform != "linux"'): "Linux-only code path",
    ("tests/collector/test_collector_workers.py", 'skipif(sys.platform == "win32"'): "fork and SO_REUSEPORT",
    ("tests/targets/test_connect_ports.py", "skipif(not spreads()"): "a kernel feature (Linux 6.3+), not a package",
    ("tests/transport/test_fork_in_verify.py", 'skipif(sys.platform == "win32"'): "the environment forks",
    ("tests/evaluation/test_evaluate.py", "skipif(sys.version_info >= (3, 12)"): "a pre-3.12 code path",
    ("tests/test_registry.py", 'importorskip("tomllib"'): "Python < 3.11 has no tomllib",
    ("tests/test_packaging.py", 'importorskip("tomllib"'): "Python < 3.11 has no tomllib",
    ("tests/reducers/test_metrics_plugin.py", 'pytest.skip("pip is not available'): "a venv without pip",
    ("tests/_ci.py", "pytest.skip(reason)"): "the helper itself",
    ("tests/_ci.py", "# the README stage: absent by design"): "the helper itself, in the stage whose venv has only what the README installs",
    ("tests/integrations/test_nemo_rl.py", 'pytest.importorskip("nemo_rl.experience.rollouts"'): "a trainer's own package (torch, its source tree), run in a venv of its own as the file's docstring says; the call-shape tests beside it run in CI",
    ("tests/integrations/test_nemo_rl.py", 'torch = pytest.importorskip("torch")'): "a trainer's own package (torch, its source tree), run in a venv of its own as the file's docstring says; the call-shape tests beside it run in CI",
    ("tests/integrations/test_verl.py", 'verl = pytest.importorskip("verl"'): "a trainer's own package (torch, its source tree), run in a venv of its own as the file's docstring says; the call-shape tests beside it run in CI",
    ("tests/integrations/test_verl.py", 'torch = pytest.importorskip("torch")'): "a trainer's own package (torch, its source tree), run in a venv of its own as the file's docstring says; the call-shape tests beside it run in CI",
    ("tests/integrations/test_verifiers.py", 'vf = pytest.importorskip("verifiers"'): "a trainer's own package, whose mcp<2 pin conflicts with the mcp extra: .ci/run runs this file in a venv of its own with it",
    ("tests/integrations/test_verifiers.py", 'pytest.skip("this verifiers has no vf.Rubric'): "verifiers 0.4 moved Rubric to verifiers.v1: not a missing package",
    ("tests/recording/test_model_call_capture.py", "skipif(not NEMO_PYTHON"):
        "NeMo Gym 0.7.0 itself in a venv of its own (1.4 GB): the reference tool, not a dependency",
    ("tests/nemo_gym/test_check_env.py", "skipif(not NEMO_PYTHON"):
        "NeMo Gym itself is the reference tool, not a dependency (a 1.4 GB venv, 5 minutes to install, past CI's budget): "
        "the whole check runs where GYM_METRICS_NEMO_PYTHON names such a venv; its comparison and its errors run in CI",
    ("tests/openenv/_openenv_reference.py", 'pytest.skip(f"openenv is not installed'):
        "openenv 0.10.0 cannot share a venv with the mcp extra (fastmcp 3 pins mcp < 2): .ci/run runs tests/openenv "
        "in its mcp<2 venv with GYM_METRICS_NEED_OPENENV=1, where a missing openenv fails instead",
    ("tests/openenv/test_openenv_repository.py", "pytest.skip(reason)"):
        "OpenEnv's example environments are in its GitHub repository, not on PyPI, and CI reaches no repository host: "
        "the test runs beside a checkout GYM_METRICS_OPENENV_REPO names (TextArena's Wordle also needs NLTK data fetched at run time)",
    ("tests/openenv/test_openenv_repository.py", "pytest.importorskip(module"):
        "an example environment's own dependency, in the test that runs only beside a checkout of OpenEnv's repository (never in CI)",
    ("tests/scorers/test_jsonpath_limits.py", "skipif(sys.version_info < (3, 11)"):
        "jsonpath-ng 1.8, the last for Python 3.10, has no `||` or `$` in a filter",
}


def direct_skips() -> list[tuple[str, str]]:
    found = []
    for path in sorted([*TESTS.rglob("*.py"), *(ROOT / "gym_metrics_servers").rglob("*.py")]):
        if "node_modules" in path.parts or path == Path(__file__).resolve():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if SKIP.search(line) and "fmt: skip" not in line:
                found.append((path.relative_to(ROOT).as_posix(), line.strip()))
    return found


def test_every_skip_for_a_missing_dependency_goes_through_the_ci_helper() -> None:
    unexplained = [(f, line) for f, line in direct_skips() if not any(f == af and at in line for af, at in ALLOWED)]
    assert not unexplained, (
        "skips that would hide a missing dependency under CI=true: use tests/_ci.py "
        f"(missing / need_module / need_tool / need_native), or list a real reason in ALLOWED: {unexplained}"
    )
    stale = [key for key in ALLOWED if not any(f == key[0] and key[1] in line for f, line in direct_skips())]
    assert not stale, f"ALLOWED entries that match nothing: {stale}"


def test_missing_skips_locally_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-tool"):
        _ci.need_tool("gym-metrics-no-such-tool", "a check")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="with CI=true this test must run"):
        _ci.need_tool("gym-metrics-no-such-tool", "a check")
    with pytest.raises(pytest.fail.Exception, match="no_such_module_xyz is not installed"):
        _ci.need_module("no_such_module_xyz", "nowhere")
    with pytest.raises(pytest.fail.Exception, match="was not built"):
        _ci.need_native(None, "gym_metrics.aggregate._nothing")
    assert _ci.need_module("json", "stdlib").dumps(1) == "1"


def test_a_folder_of_the_packages_name_is_not_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test folder named like an optional package (tests/ray once) imports as a namespace
    package where the package is absent: need_module skips there instead of handing it over."""
    (tmp_path / "gm_absent_pkg").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="found only a folder"):
        _ci.need_module("gm_absent_pkg", "nowhere")


def test_an_installed_namespace_package_is_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """opentelemetry.sdk ships no __init__.py (only a stub): a namespace folder under
    site-packages is the installed package, not a stray folder."""
    folder = tmp_path / "site-packages" / "gm_installed_ns"
    folder.mkdir(parents=True)
    (folder / "__init__.pyi").write_text("")
    (folder / "part.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    monkeypatch.setenv("CI", "true")
    module = _ci.need_module("gm_installed_ns", "nowhere")
    assert importlib.import_module(f"{module.__name__}.part").VALUE == 7


def test_the_readme_stage_skips_only_optional_packages_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """CI_OPTIONAL=absent (a venv with exactly the README's install): a package an extra beyond
    dev brings skips, with its hint; one dev should bring, or one with no hint, still fails."""
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("CI_OPTIONAL", "absent")
    with pytest.raises(pytest.skip.Exception, match=r"pip install -e '\.\[ray\]'"):
        _ci.need_module("no_such_module_xyz", "the optional extra: pip install -e '.[ray]'")
    with pytest.raises(pytest.fail.Exception, match="must run"):
        _ci.need_module("no_such_module_xyz", "pip install -e '.[dev]' (or the prometheus extra)")
    with pytest.raises(pytest.fail.Exception, match="must run"):
        _ci.need_module("no_such_module_xyz", "comes with the machine")
    monkeypatch.delenv("CI_OPTIONAL")
    with pytest.raises(pytest.fail.Exception, match="must run"):
        _ci.need_module("no_such_module_xyz", "the optional extra: pip install -e '.[ray]'")
