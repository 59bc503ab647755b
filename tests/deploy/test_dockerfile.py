"""The server image's Dockerfile, checked without a container runtime: what it copies exists
and is not docker-ignored, its entrypoint and default command are a valid `gym-metrics serve`,
and its HEALTHCHECK command reports a real server's health."""

from __future__ import annotations

import asyncio
import fnmatch
import json
import sys
from pathlib import Path

import pytest

from gym_metrics import resolve_server
from gym_metrics.cli import _parser as cli_parser
from gym_metrics.testing import serve_environment

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, pending = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def one(keyword: str) -> str:
    found = [rest for kw, rest in instructions() if kw == keyword]
    assert len(found) == 1, f"{keyword}: {found}"
    return found[0]


def dockerignored(path: str) -> bool:
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()]
    return any(p and not p.startswith("#") and fnmatch.fnmatch(path, p) for p in patterns)


def test_every_copied_file_exists_and_is_sent_to_the_build() -> None:
    copies = [rest.split()[:-1] for kw, rest in instructions() if kw == "COPY"]
    sources = [src for srcs in copies for src in srcs if not src.startswith("--")]
    assert {"pyproject.toml", "gym_metrics", "gym_metrics_servers"} <= set(sources)
    for src in sources:
        assert (ROOT / src).exists(), f"Dockerfile copies {src}, which does not exist"
        assert not dockerignored(src), f"Dockerfile copies {src}, which .dockerignore leaves out"
    assert dockerignored(".git") and dockerignored(".venv") and dockerignored("tests")


def test_the_entrypoint_and_command_are_a_valid_serve() -> None:
    entrypoint, command = json.loads(one("ENTRYPOINT")), json.loads(one("CMD"))
    assert entrypoint == ["gym-metrics"]
    ns = cli_parser().parse_args(command)
    assert ns.command == "serve" and ns.host == "0.0.0.0"
    assert one("EXPOSE") == str(ns.port) == "50051"
    resolve_server(ns.target)  # the default environment is installed by `pip install .`


def test_the_build_checks_that_every_native_module_was_compiled() -> None:
    """The ext-modules are optional (a failed compile falls back to Python, slower): the image
    imports each one after `pip install .`, so a compiler missing there fails the build, and
    from the installed package (`python -c` in the WORKDIR imported the copied sources, where
    no module is compiled: the build always failed)."""
    import re

    pyproject = (ROOT / "pyproject.toml").read_text()
    modules = re.findall(r'\[\[tool\.setuptools\.ext-modules\]\]\s*name = "([^"]+)"', pyproject)
    assert len(modules) >= 3, modules
    run = " ".join(rest for kw, rest in instructions() if kw == "RUN")
    imported = re.search(r'python -P -c "import ([^"]+)"', run)  # -P: the WORKDIR's copied sources hid the installed package
    assert imported is not None, run
    assert sorted(m.strip() for m in imported.group(1).split(",")) == sorted(modules)


def test_the_image_runs_as_a_non_root_user() -> None:
    user = one("USER")
    assert user not in ("root", "0"), user
    assert f"--uid {user}" in " ".join(rest for kw, rest in instructions() if kw == "RUN")


@pytest.mark.slow  # a CLI subprocess
def test_serve_help_runs() -> None:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "serve", "--help"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and "--grace" in done.stdout, done.stderr


async def _healthcheck(port: int) -> int:
    argv = json.loads(one("HEALTHCHECK").split(" CMD ", 1)[1])
    assert argv[0] == "python" and "127.0.0.1:50051" in argv[2]
    argv = [sys.executable, argv[1], argv[2].replace("127.0.0.1:50051", f"127.0.0.1:{port}")]
    proc = await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.DEVNULL)
    return await asyncio.wait_for(proc.wait(), 60)


@pytest.mark.slow  # two Python subprocesses that import grpc
async def test_the_healthcheck_reports_a_real_servers_health() -> None:
    async with serve_environment("math_exact") as server:
        port = server.port
        assert await _healthcheck(port) == 0
    assert await _healthcheck(port) != 0  # stopped: the check fails
