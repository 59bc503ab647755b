"""`serve`'s flags refused before it listens: one line naming the flag, exit 2, never a
traceback nor a server that starts anyway (each case runs in its own process, cut off if it
serves). The sandbox's flags are checked at start even for an environment that never uses the
sandbox: a misspelt option was accepted silently there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gym_metrics_servers

CONFIG = next(Path(gym_metrics_servers.__file__).parent.glob("*/configs/*.yaml"))
"""A NeMo Gym config of a built-in port (its --server flags are read)."""
LOCAL_OPTIONS = "isolation, launchers, max_open, max_open_per_client, queue_timeout_s, size, users"


def refused(tmp_path: Path, *args: str) -> str:
    """The one line `serve ARGS --port 0` says on stderr, refused with exit 2."""
    try:
        done = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "serve", *args, "--port", "0"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args}: not refused (it served)")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    return lines[-1]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--max-message-mb", "abc"], "gym-metrics serve: error: argument --max-message-mb: must be a number of MiB above 0 and at most 2047 (gRPC's limit), got abc"),
        (["--max-message-mb", "2048"], "gym-metrics serve: error: argument --max-message-mb: must be a number of MiB above 0 and at most 2047 (gRPC's limit), got 2048"),
        (["--sandbox-provider", "nope"], "error: --sandbox-provider: unknown sandbox provider 'nope'; known: docker, local"),
        (["--sandbox-option", "size"], "error: --sandbox-option 'size' (option 1): expected KEY=VALUE"),
        (["--sandbox-option", "size=2", "--sandbox-option", "=2"], "error: --sandbox-option '=2' (option 2): expected KEY=VALUE"),
        (["--sandbox-option", "sise=2"], f"error: --sandbox-option: sandbox provider 'local' takes no option 'sise'; it takes: {LOCAL_OPTIONS}"),
        (["--sandbox-provider", "docker", "--sandbox-option", "max_open=2"],
         "error: --sandbox-option: sandbox provider 'docker' takes no option 'max_open'; it takes: docker, image, size, status_python, user"),
        (["--tls-cert", "cert.pem"], "error: --tls-cert and --tls-key go together"),
        (["--tls-key", "key.pem"], "error: --tls-cert and --tls-key go together"),
        (["--mcp-port", "0", "--workers", "2"], "error: --mcp-port serves one process's sessions: --workers: use --workers 1 with --mcp-port"),
        (["--set", "a=1"], "error: NeMo Gym flags without a config: --config: --set, --server and --name need a config YAML"),
        (["--server", "judge=http://127.0.0.1:1"], "error: NeMo Gym flags without a config: --config: --set, --server and --name need a config YAML"),
        (["--name", "block"], "error: NeMo Gym flags without a config: --config: --set, --server and --name need a config YAML"),
        (["--openenv-action", "NoColon"], "error: cannot load NoColon: --openenv-action: expected MODULE:NAME"),
        (["--openenv-action", ":Action"], "error: cannot load :Action: --openenv-action: expected MODULE:NAME"),
        (["--openenv-action", "not_a_real_module_zz:Action"], "error: cannot load not_a_real_module_zz:Action: --openenv-action: No module named 'not_a_real_module_zz'"),
        (["--openenv-action", "json:NoSuch"], "error: cannot load json:NoSuch: --openenv-action: module 'json' has no attribute 'NoSuch'"),
        (["--openenv-action", "json:JSONDecoder"], "error: --openenv-action is for an OpenEnv environment: --openenv-action: math_exact is not one"),
    ],
)
def test_serve_refuses_a_bad_flag_naming_it(tmp_path: Path, args: list[str], said: str) -> None:
    assert refused(tmp_path, "math_exact", *args) == said


@pytest.mark.parametrize(
    ("server", "said"),
    [
        ("judge", "error: bad --server: --server: 'judge': expected NAME=URL"),
        ("=http://127.0.0.1:1", "error: bad --server: --server: '=http://127.0.0.1:1': expected NAME=URL"),
        ("judge=", "error: bad --server: --server: 'judge=': expected NAME=URL"),
        ("judge=ftp://127.0.0.1", "error: bad --server: --server judge: 'ftp://127.0.0.1': expected an http(s) URL or a TARGET.json file"),
    ],
)
def test_serve_refuses_a_bad_model_server_of_a_config(tmp_path: Path, server: str, said: str) -> None:
    assert refused(tmp_path, str(CONFIG), "--server", server) == said
