"""NeMo Gym's own environments, ported for the tests: the nemo-gym 0.7.0 wheel (never committed)
is fetched once with `pip download --no-deps` into .cache/ (or named by GYM_METRICS_NEMO_GYM_WHEEL),
and an environment's folder is unzipped and ported by the documented rule alone (its imports)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gym_metrics.nemo_gym.port import port_folder

ROOT = Path(__file__).resolve().parents[2]
WHEEL = "nemo_gym-0.7.0-py3-none-any.whl"


def nemo_gym_wheel() -> Path:
    given = os.environ.get("GYM_METRICS_NEMO_GYM_WHEEL")
    if given:
        return Path(given)
    cached = ROOT / ".cache" / WHEEL
    if not cached.is_file():
        cached.parent.mkdir(exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--ignore-requires-python", "nemo-gym==0.7.0", "-d", str(cached.parent)],
            check=True, timeout=900,
        )  # fmt: skip
    return cached


CONFIG_TREE = ROOT / "tests" / "data" / "nemo_gym_configs" / "tree"


@pytest.fixture()
def config_tree(tmp_path: Path) -> Path:
    """tests/data/nemo_gym_configs/tree (configs and benchmarks written as NeMo Gym's are),
    its environment ported (its imports rewritten) as the tests port NeMo Gym's."""
    import shutil

    shutil.copytree(CONFIG_TREE / "benchmarks", tmp_path / "benchmarks")
    port_folder(CONFIG_TREE / "resources_servers" / "demo_env", tmp_path / "resources_servers" / "demo_env")
    return tmp_path


@pytest.fixture(scope="session")
def ported(tmp_path_factory: pytest.TempPathFactory) -> "Ported":
    return Ported(nemo_gym_wheel(), tmp_path_factory.mktemp("nemo_gym_envs"))


class Ported:
    """Environments of the wheel, each unzipped and ported on first use."""

    def __init__(self, wheel: Path, root: Path) -> None:
        self.wheel, self.root = wheel, root

    def folder(self, env: str) -> Path:
        """<root>/resources_servers/<env>/, ported (the whole tree the first time: environments
        import each other's modules by `resources_servers.<env>` paths)."""
        tree = self.root / "resources_servers"
        if not tree.exists():
            source = self.root / "_wheel"
            with zipfile.ZipFile(self.wheel) as wheel:
                wheel.extractall(source, [m for m in wheel.namelist() if m.startswith("resources_servers/")])
            port_folder(source / "resources_servers", tree)
        assert (tree / env).is_dir(), f"{env} is not in {self.wheel.name}"
        return tree / env
