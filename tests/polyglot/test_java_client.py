"""The Java user's path (clients/java): classes generated with protoc and grpc-java's plugin
from Debian's packages, compiled with the example, run against a live server: the reward and
the bad field it reads back equal the Python client's."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from _ci import missing, need_tool
from _compare import ROOT, TOKEN, TOKEN_ENV
from gym_metrics import InvalidInputError, ResourcesClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
JARS = Path("/usr/share/java")


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("javac", "java", "protoc", "grpc_java_plugin"):
        need_tool(tool, "apt-get install default-jdk-headless protobuf-compiler protobuf-compiler-grpc-java-plugin")
    for jar in ("grpc-netty.jar", "grpc-protobuf.jar", "protobuf.jar", "netty-codec-http2.jar"):
        if not (JARS / jar).exists():
            missing(f"{JARS / jar} is missing (apt-get install libgrpc-java libprotobuf-java libnetty-java libperfmark-java)")
    out = tmp_path_factory.mktemp("java")
    done = subprocess.run([str(ROOT / "clients" / "java" / "build.sh"), str(out)], capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stdout + done.stderr
    return out / "classes"


def test_the_example_gets_the_python_clients_answers(classes: Path, servers: dict[str, str]) -> None:
    done = subprocess.run(["java", "-cp", f"{classes}:{JARS}/*", "Example", servers["resources"]],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()

    async def python() -> tuple[float, str]:
        async with ResourcesClient(servers["resources"]) as client:
            reward = (await client.verify({"expected_answer": "4", "model_output": "The answer is 4."}))["reward"]
            with pytest.raises(InvalidInputError) as bad:
                await client.verify({"model_output": "4"})
            return reward, str(bad.value)

    reward, error = asyncio.run(python())
    assert lines[0].startswith("server math_exact ")
    assert lines[1] == f"reward {reward}" and reward == 1.0
    field = lines[2].removeprefix("bad field ").split(":")[0]
    assert field == "body_json.expected_answer" and field in error, (lines[2], error)


def test_a_failed_compile_fails_the_build(classes: Path, tmp_path: Path) -> None:
    """javac's errors once went through a filter that kept its exit status from the build: a
    broken Example.java built "fine" where an earlier build had left Example.class."""
    copy = tmp_path / "clients" / "java"
    copy.mkdir(parents=True)
    (tmp_path / "protos").symlink_to(ROOT / "protos")
    shutil.copy(ROOT / "clients" / "java" / "build.sh", copy / "build.sh")
    (copy / "Example.java").write_text((ROOT / "clients" / "java" / "Example.java").read_text() + "\nthis is not Java\n")
    done = subprocess.run([str(copy / "build.sh"), str(classes.parent)], capture_output=True, text=True, timeout=500)
    assert done.returncode != 0 and "javac failed" in done.stderr, done.stdout + done.stderr


def test_a_token_is_sent_and_a_failed_call_is_one_line(classes: Path, servers: dict[str, str]) -> None:
    """With --auth-token-env the example's calls pass a server that requires the token; without,
    the failure is its status code and description, not a stack trace (nor the token)."""
    command = ["java", "-cp", f"{classes}:{JARS}/*", "Example", servers["auth"]]
    env = {**os.environ, TOKEN_ENV: TOKEN}
    done = subprocess.run([*command, "--auth-token-env", TOKEN_ENV], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and "reward 1.0" in done.stdout.splitlines(), done.stderr
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    errors = [line for line in done.stderr.splitlines() if not line.startswith("SLF4J")]
    assert done.returncode == 1 and errors[0].startswith("error: UNAUTHENTICATED") and len(errors) == 1, done.stderr
    assert TOKEN not in done.stdout + done.stderr
