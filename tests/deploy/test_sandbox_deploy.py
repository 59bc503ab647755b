"""The shipped sandbox configuration (deploy/kubernetes/code-tests.yaml and the Dockerfile's
`docker run` line), run where no container runtime is: `serve code_tests` as root with exactly
the capabilities the manifest adds (setpriv's bounding set, as a container's) scores the sample
as it should; one capability fewer and it refuses to start, in one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import cli
from gym_metrics.sandbox import bwrap_path
from gym_metrics_servers.code_tests import SAMPLE_PATH

from _ci import missing, need_module
from _transport_helpers import serve_process

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def manifest_box() -> dict[str, Any]:
    yaml = need_module("yaml", "PyYAML, in the dev extra")
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "code-tests.yaml").read_text()))
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    (box,) = deployment["spec"]["template"]["spec"]["containers"]
    return box


def added_caps() -> list[str]:
    caps = manifest_box()["securityContext"]["capabilities"]
    assert caps["drop"] == ["ALL"]
    return caps["add"]


def as_the_container(caps: list[str]) -> list[str]:
    if os.geteuid() != 0 or bwrap_path() is None or shutil.which("setpriv") is None:
        missing("needs root, bubblewrap and setpriv (util-linux) to run the manifest's configuration")
    return ["setpriv", "--bounding-set", "-all," + ",".join("+" + c.lower() for c in caps), "--"]


def test_a_run_the_sandbox_cannot_set_up_is_its_error_not_the_programs_exit(tmp_path: Path) -> None:
    """Under the manifest's capabilities (no CAP_SETPCAP) a run kept as root cannot give up
    root's power: that is the sandbox's error (SandboxError naming why), never exit 127 read as
    the program failing (code_tests scored every test 0). A run with its own user still runs."""
    script = tmp_path / "runs.py"
    script.write_text(
        "import asyncio\nfrom gym_metrics.sandbox import Program, SandboxError, run_local\n"
        "async def main():\n"
        "    print((await run_local(Program(python='print(6 * 7)'))).stdout.decode().strip())\n"
        "    try:\n"
        "        result = await run_local(Program(python='print(1)'), users=False)\n"
        "        print('ran', result.exit_code, result.stderr.decode()[-200:])\n"
        "    except SandboxError as exc:\n"
        "        print('refused', exc)\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([*as_the_container(added_caps()), sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    assert lines[0] == "42", done.stdout + done.stderr
    assert lines[1].startswith("refused") and "CAP_SETPCAP" in lines[1], done.stdout + done.stderr


def test_the_image_installs_bubblewrap_and_documents_the_manifests_capabilities() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"apt-get install[^\n]*\bbubblewrap\b", dockerfile)
    docker_adds = set(re.findall(r"--cap-add (\w+)", dockerfile))
    docker_defaults = {"SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE"}  # Docker gives these to root unless dropped
    assert docker_adds | docker_defaults == set(added_caps())
    assert "--user 0" in dockerfile and manifest_box()["securityContext"]["runAsUser"] == 0


def test_the_manifests_configuration_serves_code_tests(tmp_path: Path) -> None:
    args = manifest_box()["args"]
    assert args[:2] == ["serve", "code_tests"]
    flags = dict(zip(args[2::2], args[3::2]))  # the manifest's --flag value pairs; here on loopback, a free port
    flags.pop("--port")
    flags["--host"] = "127.0.0.1"
    out = tmp_path / "out.jsonl"
    with serve_process("code_tests", *(x for pair in flags.items() for x in pair), prefix=as_the_container(added_caps())) as address:
        assert cli.main(["collect", "--server", address, "--input", str(SAMPLE_PATH), "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    rewards = {r["agent_ref"]["name"]: set() for r in rows}
    for r in rows:
        rewards[r["agent_ref"]["name"]].add(r["reward"])
        assert r["isolated"] is True
    assert rewards == {"careful_agent": {1.0}, "hasty_agent": {0.0}}


@pytest.mark.parametrize("dropped", ["SYS_ADMIN", "NET_ADMIN"])
def test_one_capability_fewer_and_the_server_refuses(dropped: str) -> None:
    caps = [c for c in added_caps() if c != dropped]
    done = subprocess.run([*as_the_container(caps), sys.executable, "-m", "gym_metrics.cli", "serve", "code_tests", "--port", "0"],
                          capture_output=True, text=True, timeout=90, check=False)  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines
    assert "the sandbox cannot isolate runs" in lines[0] and "docs/sandbox.md#deploy" in lines[0]


def docker_engine() -> bool:
    docker = shutil.which("docker")
    return docker is not None and subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.timeout(1800)
@pytest.mark.skipif(not docker_engine(), reason="no Docker engine answers `docker info` (this machine kind runs none)")
def test_the_image_serves_code_tests_as_documented_and_refuses_otherwise(tmp_path: Path) -> None:
    """Where an engine runs: the image built, `serve code_tests` with the Dockerfile's flags
    scores the sample; as the image's own user it refuses to start (no root), in one line."""
    image = "gym-metrics:sandbox-test"
    subprocess.run(["docker", "build", "-t", image, str(ROOT)], check=True, timeout=1500, capture_output=True)
    refused = subprocess.run(["docker", "run", "--rm", image, "serve", "code_tests"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "needs root" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    line = re.search(r"docker run --rm -p 50051:50051 (.*?) gym-metrics serve", (ROOT / "Dockerfile").read_text().replace("\\\n#", ""))
    assert line is not None
    flags = line[1].split()
    name = f"gm-sandbox-test-{os.getpid()}"
    subprocess.run(["docker", "run", "-d", "--rm", "--name", name, "-p", "127.0.0.1::50051", *flags, image,
                    "serve", "code_tests", "--host", "0.0.0.0"], check=True, timeout=120, capture_output=True)  # fmt: skip
    try:
        port = subprocess.run(["docker", "port", name, "50051"], check=True, capture_output=True, text=True).stdout.split(":")[-1].strip()
        out = tmp_path / "out.jsonl"
        assert cli.main(["collect", "--server", f"127.0.0.1:{port}", "--input", str(SAMPLE_PATH), "--output", str(out),
                         "--connect-timeout", "60"]) == 0  # fmt: skip
    finally:
        subprocess.run(["docker", "kill", name], capture_output=True, timeout=60)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["agent_ref"]["name"], r["reward"], r["isolated"]) for r in rows} == {("careful_agent", 1.0, True), ("hasty_agent", 0.0, True)}
