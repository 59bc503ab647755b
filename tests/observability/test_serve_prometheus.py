"""`serve --prometheus-port`: /metrics scraped while a real `collect` runs against a real
`serve` shows the counters moving and the latency histogram's buckets, and no label value
holds the auth token or a row's text."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from _observability_helpers import need

SECRET = "s3cret-token-do-not-leak"
APP = '''
import asyncio
from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer

class Slow(SimpleResourcesServer):
    name = "slow_env"

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        await asyncio.sleep(0.03)
        if "FAIL-ME" in body.model_dump_json():
            raise RuntimeError("verify refused ROW-TEXT-FAIL-ME")  # row text in the error message
        return BaseVerifyResponse(reward=1.0)
'''
ROWS = 60


def _rows(path: Path) -> None:
    import json

    with path.open("w") as f:
        for i in range(ROWS):
            text = f"ROW-TEXT-{i}" + (" FAIL-ME" if i % 10 == 0 else "")
            row = {"agent_ref": {"name": "agent_x"}, "_ng_task_index": i, "_ng_rollout_index": 0,
                   "responses_create_params": {"input": [{"role": "user", "content": text}]},
                   "response": {"output": [{"type": "message", "role": "assistant",
                                            "content": [{"type": "output_text", "text": text}]}]}}  # fmt: skip
            f.write(json.dumps(row) + "\n")


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def _value(text: str, name: str, **labels: str) -> float:
    """The sample `name{labels...}` (labels matched as a subset); 0 when absent."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"{re.escape(name)}(?:\{{(.*)\}})? (\S+)$", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total


def _serve(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str, int]:
    (tmp_path / "app.py").write_text(APP)
    env = {**os.environ, "GYM_METRICS_AUTH_TOKEN": SECRET}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gym_metrics.cli", "serve", "app.py:Slow", "--port", "0", "--prometheus-port", "0", *extra],
        cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        found = re.search(r"listening on (\S+:\d+) .*metrics on port (\d+)", line)
        if found:
            return proc, found.group(1), int(found.group(2))
        assert line, "serve exited before listening"
    raise AssertionError("serve did not start in 30 s")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_metrics_move_during_a_real_collect_and_leak_nothing(tmp_path: Path, workers: int) -> None:
    need("prometheus_client")
    proc, address, port = _serve(tmp_path, "--workers", str(workers))
    try:
        before = _scrape(port)
        assert _value(before, "gym_metrics_rollouts_verified_total") == 0
        _rows(tmp_path / "in.jsonl")
        collect = subprocess.Popen(
            [sys.executable, "-m", "gym_metrics.cli", "collect", "--server", address, "--input", "in.jsonl",
             "--output", "out.jsonl", "--batch-size", "4", "--max-in-flight", "1", "--auth-token-env", "TOKEN"],
            cwd=tmp_path, env={**os.environ, "TOKEN": SECRET}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        seen = []
        deadline = time.monotonic() + 60
        while collect.poll() is None and time.monotonic() < deadline:
            seen.append(_value(_scrape(port), "gym_metrics_rollouts_verified_total"))
            time.sleep(0.05)
        out, err = collect.communicate(timeout=60)
        assert collect.returncode == 0, err
        after = _scrape(port)
    finally:
        _stop(proc)

    assert any(0 < v < ROWS for v in seen), f"no scrape saw the run half-way: {seen}"  # moving, not just done
    assert _value(after, "gym_metrics_rollouts_verified_total", environment="slow_env") == ROWS - ROWS // 10
    assert _value(after, "gym_metrics_rollouts_failed_total", environment="slow_env", error_kind="verify_failed") == ROWS // 10
    stream = "/gym_metrics.v1.ResourcesService/VerifyStream"
    assert _value(after, "gym_metrics_rpcs_total", method=stream, code="OK") >= 1
    assert _value(after, "gym_metrics_rpc_duration_seconds_bucket", method=stream, code="OK", le="+Inf") >= 1
    assert _value(after, "gym_metrics_rpc_duration_seconds_bucket", method=stream, le="0.001") == 0  # buckets, not one
    assert _value(after, "gym_metrics_rpcs_in_flight") == 0 and _value(after, "gym_metrics_verify_rollouts_in_flight") == 0
    for text in (before, after):
        assert SECRET not in text and "ROW-TEXT" not in text and "FAIL-ME" not in text
        labels = re.findall(r'="([^"]*)"', text)
        assert all(re.fullmatch(r"[A-Za-z0-9_./+:-]*", v) for v in labels), labels
    assert re.findall(r'="([^"]*)"', after)  # labelled samples were checked
