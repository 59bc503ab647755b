"""`gym-metrics evaluate --target-config TARGET.json --prompt-template TEMPLATE.json` end to end:
a real subprocess against the scripted policy on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer

pytestmark = pytest.mark.timeout(120)
KEY = "sk-online-cli-4242"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "evaluate", *args],
        capture_output=True, text=True, timeout=100, env={**os.environ, **(env or {})},
    )  # fmt: skip


def write(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value))
    return path


def test_online_tool_call_accuracy_from_files(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in [
        {"question": "weather in Paris?", "reference_tool_calls": [{"name": "weather", "args": {"city": "Paris"}}]},
        {"question": "weather in Rome?", "reference_tool_calls": [{"name": "weather", "args": {"city": "Rome"}}]},
        {"question": "what is down?", "reference_tool_calls": []},
    ]) + "\nnot json\n")  # fmt: skip
    template = write(tmp_path / "template.json", {
        "messages": [{"role": "user", "content": "{{ item.question }}"}],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}],
    })  # fmt: skip
    answers = {
        "weather in Paris?": PolicyAnswer(text="<think>Paris</think>Checking.", tool_calls=[{"name": "weather", "arguments": {"city": "Paris"}}]),
        "weather in Rome?": PolicyAnswer(tool_calls=[{"name": "weather", "arguments": {"city": "Milan"}}]),
    }  # "what is down?" gets HTTP 400: a row error on `target`
    out = tmp_path / "result.json"
    with ScriptedPolicyServer(answers) as policy:
        target = write(tmp_path / "target.json", {
            "type": "model", "url": policy.url, "model": "policy", "api_key_env": "POLICY_KEY",
            "reasoning": {"end_token": "</think>"}, "max_retries": 0,
        })  # fmt: skip
        proc = run("--metric", "tool_call_accuracy", "--input", str(rows), "--target-config", str(target),
                   "--prompt-template", str(template), "-o", str(out), env={"POLICY_KEY": KEY})  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert {r.header("Authorization") for r in policy.requests} == {f"Bearer {KEY}"}
        assert all(r.body["tools"][0]["function"]["name"] == "weather" for r in policy.requests)
    assert KEY not in proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    rows_out = doc["row_scores"]
    assert [r["scores"]["tool_call_accuracy"] for r in rows_out] == [1.0, 0.0, None, None]
    assert rows_out[0]["generated"]["response"] == "Checking."
    assert rows_out[0]["generated"]["tool_calls"] == [{"name": "weather", "arguments": {"city": "Paris"}}]
    assert rows_out[2]["error"]["field"] == "target" and rows_out[3]["error"]["field"] == "json"
    (agg,) = doc["aggregate_scores"]
    assert (agg["count"], agg["nan_count"], agg["mean"]) == (2, 2, 0.5)
    assert "generated 2 responses (1 failed)" in proc.stdout
    assert "note: row 2: target:" in proc.stderr


def test_online_flags_that_do_not_go_together(tmp_path: Path) -> None:
    rows = write(tmp_path / "rows.jsonl", {"user_input": "hi"})
    template = write(tmp_path / "t.json", {"messages": []})
    proc = run("--scorer", "tool_call_accuracy", "--input", str(rows), "--prompt-template", str(template))
    assert proc.returncode == 2 and "--prompt-template goes with --target-config" in proc.stderr
    proc = run("--server", "127.0.0.1:1", "--input", str(rows), "--target-config", str(template))
    assert proc.returncode == 2 and "--target-config works with in-process scorers" in proc.stderr
    bad = write(tmp_path / "target.json", {"url": "ftp://x", "model": "m"})
    proc = run("--scorer", "tool_call_accuracy", "--input", str(rows), "--target-config", str(bad))
    assert proc.returncode == 2 and "target.json.url" in proc.stderr
    unset = write(tmp_path / "target2.json", {"url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": "GM_TEST_UNSET_VAR"})
    proc = run("--scorer", "tool_call_accuracy", "--input", str(rows), "--target-config", str(unset))
    assert proc.returncode == 2 and "GM_TEST_UNSET_VAR" in proc.stderr
