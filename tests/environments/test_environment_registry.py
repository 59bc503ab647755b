"""One place registers an environment (issue 38): a built-in's `@register_server` in
gym_metrics_servers/<name>/app.py, found by its folder; a plugin's entry point alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import gym_metrics_servers
from gym_metrics.environments import ENVIRONMENTS, ENTRY_POINT_GROUP, resolve_server
from gym_metrics.errors import InvalidInputError, NotFoundError

BUILT_INS = Path(gym_metrics_servers.__file__).parent


def test_each_built_in_is_found_by_its_folder_in_a_fresh_process() -> None:
    """`gym-metrics serve NAME` in a process that imported nothing of the environment: the
    folder's app.py is imported and its decorator registers that name, nothing else needed."""
    code = textwrap.dedent("""
        import sys
        from gym_metrics.environments import resolve_server, registered_servers
        for name in sys.argv[1:]:
            assert f"gym_metrics_servers.{name}.app" not in sys.modules
            cls = resolve_server(name)
            assert cls.__module__ == f"gym_metrics_servers.{name}.app", (name, cls)
        print(" ".join(registered_servers()))
    """)
    names = ["code_tests", "inventory", "llm_judge", "math_exact", "reasoning_gym", "remote_metric", "tool_calling"]
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == names


def test_built_ins_declare_no_entry_point() -> None:
    """The decorator is the one place: no second list of built-ins in pyproject.toml."""
    assert not [ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.value.startswith("gym_metrics_servers.")]
    decorated = {p.parent.name for p in BUILT_INS.glob("*/app.py") if "@register_server(" in p.read_text(encoding="utf-8")}
    assert {"code_tests", "inventory", "math_exact"} <= decorated


def test_a_name_no_built_in_registers_is_unknown() -> None:
    with pytest.raises(NotFoundError, match="unknown environment 'short_answer'"):
        resolve_server("short_answer")  # a NeMo Gym port served from its config: registers no name
    with pytest.raises(NotFoundError, match="unknown environment 'no_such_env'"):
        resolve_server("no_such_env")


def test_a_plugin_registers_with_its_entry_point_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A third-party package: its class (no decorator) named by one entry point."""
    package = tmp_path / "plugin_envs"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent("""
        from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer

        class Echo(SimpleResourcesServer):
            async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
                return BaseVerifyResponse(**body.model_dump(), reward=1.0)
    """))
    dist = tmp_path / "plugin_envs-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-envs\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\necho_plugin = plugin_envs:Echo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = ENVIRONMENTS.snapshot()
    try:
        cls = resolve_server("echo_plugin")
        assert cls.__name__ == "Echo" and cls.__module__ == "plugin_envs"
    finally:
        ENVIRONMENTS.restore(before)


def test_a_built_in_is_found_again_after_the_registry_is_restored() -> None:
    """Tests snapshot and restore the registry; a built-in imported in between registers again."""
    before = ENVIRONMENTS.snapshot()
    try:
        first = resolve_server("math_exact")
        ENVIRONMENTS.restore(ENVIRONMENTS.snapshot().__class__({}, {}, frozenset()))  # an empty registry
        assert resolve_server("math_exact") is first
    finally:
        ENVIRONMENTS.restore(before)


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable package of its own name per test (a module imported once stays imported)."""
    root = tmp_path / f"pkg_{tmp_path.name.replace('-', '_').replace('[', '_').replace(']', '_')}"
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    return root


@pytest.mark.parametrize(
    ("body", "line", "said"),
    [
        ("import not_a_real_dependency_zz\n", 1, "ModuleNotFoundError: No module named 'not_a_real_dependency_zz'"),
        ("x = 1\ndef broken(:\n    pass\n", 2, "SyntaxError: invalid syntax"),
        ("x = 1\nraise RuntimeError('boom at import')\n", 2, "RuntimeError: boom at import"),
        ("import sys\nsys.exit(3)\n", 2, "SystemExit: 3"),
    ],
    ids=["missing dependency", "syntax error", "raises", "exits"],
)
@pytest.mark.parametrize("with_class", [True, False], ids=["module:Class", "module"])
def test_a_module_that_does_not_load_names_its_file_and_line(package: Path, body: str, line: int, said: str, with_class: bool) -> None:
    """`module:Class` refused only an ImportError or a SyntaxError clearly: a module raising
    anything else at import was an internal error (exit 1), one calling sys.exit ended the
    command silently with its code."""
    (package / "env.py").write_text(body)
    target = f"{package.name}.env" + (":Env" if with_class else "")
    with pytest.raises(InvalidInputError) as caught:
        resolve_server(target)
    assert str(caught.value) == f"cannot load the environment {package.name}.env: {package / 'env.py'}:{line}: {said}" + (
        " (it exits when imported: a script's own part goes under `if __name__ == '__main__':`)" if "SystemExit" in said else ""
    )


def test_a_file_that_exits_when_imported_is_refused_naming_it(tmp_path: Path) -> None:
    """A script without a `__main__` guard: its sys.exit ended `serve` silently with its code."""
    app = tmp_path / "app.py"
    app.write_text("import sys\n\nsys.exit(3)\n")
    with pytest.raises(InvalidInputError, match=r"^cannot load the environment: .*app\.py:3: SystemExit: 3 \(it exits when imported"):
        resolve_server(f"{app}:Env")
    assert not [m for m in sys.modules.values() if getattr(m, "__file__", None) == str(app)]  # not left half-imported


def test_a_file_python_does_not_load_says_so(tmp_path: Path) -> None:
    (tmp_path / "app.txt").write_text("x = 1\n")
    for target in (f"{tmp_path}/app.txt:Env", f"{tmp_path}/app.txt"):
        with pytest.raises(NotFoundError) as caught:
            resolve_server(target)
        assert str(caught.value) == f"cannot load {tmp_path}/app.txt: not a Python file (give path/app.py:Class)"
    with pytest.raises(NotFoundError, match=r"^no such file: .*missing\.py$"):
        resolve_server(f"{tmp_path}/missing.py:Env")


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("json:NoSuch", "'json' has no attribute 'NoSuch'"),
        ("json:JSONDecoder", "'json:JSONDecoder' is not an environment class (a SimpleResourcesServer subclass, or an OpenEnv Environment)"),
        ("not_a_real_package_zz:Env", "cannot import 'not_a_real_package_zz': No module named 'not_a_real_package_zz'"),
        ("json.decoder", "'json.decoder' names no class: write json.decoder:ClassName"),
        ("not_a_real_package_zz.app", "unknown environment 'not_a_real_package_zz.app'"),
    ],
)
def test_a_target_naming_no_environment_says_what_it_names(target: str, said: str) -> None:
    with pytest.raises(NotFoundError) as caught:
        resolve_server(target)
    assert str(caught.value).startswith(said), caught.value
