"""The sandbox fails closed (issue 35, item 1): a server whose environment runs model code
refuses to start, in one line naming what is missing, unless its isolation is there or
`--sandbox-isolation none` is asked for by name (then it warns, and every result says
`isolated: false`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.sandbox import bwrap_path

sys.path.insert(0, str(Path(__file__).parents[1]))
import _ci  # noqa: E402
from _transport_helpers import serve_process  # noqa: E402

pytestmark = pytest.mark.timeout(120)
SERVE = [sys.executable, "-m", "gym_metrics.cli", "serve", "code_tests", "--port", "0"]


def refused(env: dict[str, str], *flags: str) -> tuple[int, list[str]]:
    done = subprocess.run([*SERVE, *flags], env=env, capture_output=True, text=True, timeout=90, check=False)
    return done.returncode, done.stderr.strip().splitlines()


def test_without_bubblewrap_the_server_refuses_to_start(tmp_path: Path) -> None:
    code, lines = refused({**os.environ, "PATH": str(tmp_path)})  # an empty PATH: no bwrap on it
    assert code == 2 and len(lines) == 1, lines
    assert "bubblewrap (bwrap) is not installed" in lines[0] and "apt-get install bubblewrap" in lines[0]
    assert "--sandbox-isolation none" in lines[0]


def test_a_bubblewrap_that_cannot_make_namespaces_is_refused_with_its_words(tmp_path: Path) -> None:
    """As in a container without the capabilities (docs/sandbox.md#deploy): the probe fails."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    if os.geteuid() != 0:
        _ci.missing("the probe runs only for a root server (else the missing root is named first)")
    code, lines = refused({**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert code == 2 and len(lines) == 1, lines
    assert "No permissions to create new namespace" in lines[0] and "docs/sandbox.md#deploy" in lines[0]


@pytest.mark.slow  # three servers started: on the default Python only (CI's time bound)
@pytest.mark.parametrize(("cap", "named"), [("setuid", "CAP_SETUID"), ("chown", "CAP_CHOWN"), ("dac_override", "CAP_DAC_OVERRIDE")])
def test_a_root_without_a_capability_a_run_needs_is_refused_naming_it(cap: str, named: str) -> None:
    """A container that dropped one of them started, then failed every verify ("cannot set the
    run up: Operation not permitted"); the start-up probe tries each."""
    if os.geteuid() != 0 or bwrap_path() is None:
        _ci.missing("needs root (to drop a capability) and bubblewrap")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        _ci.missing("util-linux's setpriv drops a capability for the server")
    done = subprocess.run([setpriv, "--bounding-set", f"-{cap}", "--", *SERVE], capture_output=True, text=True, timeout=90, check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and named in lines[0], lines


def test_without_root_strict_isolation_is_refused() -> None:
    if os.geteuid() != 0 or bwrap_path() is None:
        _ci.missing("needs root (to drop it) and bubblewrap")
    script = (
        "import os\nfrom gym_metrics.sandbox import SandboxUnavailableError, check_isolation\nos.seteuid(65534)\n"
        "try:\n    check_isolation('strict')\nexcept SandboxUnavailableError as exc:\n    print(exc)"
    )
    said = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "needs root to give each run a user of its own (uid 65534" in said


def test_an_unknown_isolation_is_named() -> None:
    code, lines = refused({**os.environ, "GYM_METRICS_SANDBOX_ISOLATION": "weak"})
    assert code == 2 and lines == ["error: GYM_METRICS_SANDBOX_ISOLATION='weak': expected one of strict, none"]


async def test_isolation_none_warns_and_every_result_says_so(tmp_path: Path) -> None:
    said: list[str] = []
    text = "```python\nprint(int(input()) * 2)\n```"
    body = {"response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": text}]}]},
            "tests": [{"input": "21", "output": "42"}]}  # fmt: skip
    with serve_process("code_tests", "--sandbox-isolation", "none", env={**os.environ, "PATH": str(tmp_path)}, said=said) as address:
        assert any("sandbox isolation is off (none)" in line for line in said), said
        async with ResourcesClient(address) as client:
            result = await client.verify(body)
    assert result["reward"] == 1.0 and result["isolated"] is False
    assert [t["isolated"] for t in result["test_results"]] == [False]
