"""evaluate --server: rows scored through a running environment over gRPC."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from gym_metrics_servers.math_exact import SAMPLE_PATH as MATH_SAMPLE
from gym_metrics_servers.math_exact import MathExactServer
from gym_metrics_servers.tool_calling import ToolCallingServer

from gym_metrics.evaluation import evaluate_remote_async
from gym_metrics.scorers import RowError
from gym_metrics.evaluation._remote import score_fields

DATA = Path(__file__).parents[1] / "data" / "tool_call_accuracy"
CASES = [json.loads(line) for line in (DATA / "cases.jsonl").read_text().splitlines()]
EXPECTED = [json.loads(line) for line in (DATA / "expected.jsonl").read_text().splitlines()]


async def test_scores_come_from_the_verify_response(serve_env: Any) -> None:
    port, _ = await serve_env(ToolCallingServer())
    rejected = {"user_input": [{"content": None, "type": "human"}], "reference_tool_calls": []}
    rows: list[Any] = [*CASES, RowError("json", "line 16: not valid JSON"), rejected, CASES[0]]
    result = await evaluate_remote_async(f"127.0.0.1:{port}", rows, batch_size=4)
    assert result.metric == "tool_calling"
    assert result.score_names == (
        "tool_call_accuracy",
        "tool_call_accuracy_unordered",
        "function_name_accuracy",
        "function_name_and_args_accuracy",
    )
    n = len(CASES)
    assert result.column("tool_call_accuracy")[:n].tolist() == [e["tool_call_accuracy"] for e in EXPECTED]
    assert result.column("tool_call_accuracy_unordered")[:n].tolist() == [
        e["tool_call_accuracy_unordered"] for e in EXPECTED
    ]
    assert result.column("tool_call_accuracy")[n + 2] == 1.0
    assert sorted(result.errors) == [n, n + 1]
    assert result.errors[n].field == "json"
    failure = result.errors[n + 1]
    assert failure.field == "verify" and failure.reason.startswith("invalid_request:")
    assert "body_json.user_input[0].content" in failure.reason
    stats = {s.name: s for s in result.stats}
    assert (stats["tool_call_accuracy"].count, stats["tool_call_accuracy"].nan_count) == (n + 1, 2)


async def test_a_row_that_cannot_be_sent_is_a_row_error_not_a_cancelled_run(serve_env: Any) -> None:
    """A row Python's json read with a lone surrogate has no UTF-8 form: its row fails with a
    reason, the others are scored (the whole run died as a CancelledError traceback)."""
    port, _ = await serve_env(ToolCallingServer())
    odd = {**CASES[1], "note": "\ud800x"}
    result = await evaluate_remote_async(f"127.0.0.1:{port}", [CASES[0], odd, CASES[2]], batch_size=2)
    assert sorted(result.errors) == [1] and result.errors[1].field == "row" and "surrogate" in result.errors[1].reason
    assert result.column("tool_call_accuracy")[[0, 2]].tolist() == [EXPECTED[0]["tool_call_accuracy"], EXPECTED[2]["tool_call_accuracy"]]


async def test_limit_samples_over_the_server(serve_env: Any) -> None:
    port, _ = await serve_env(ToolCallingServer())
    result = await evaluate_remote_async(f"127.0.0.1:{port}", iter(CASES), limit_samples=3)
    assert result.column("tool_call_accuracy").tolist() == [e["tool_call_accuracy"] for e in EXPECTED[:3]]


async def test_environment_without_score_fields_is_scored_by_reward(serve_env: Any) -> None:
    env = MathExactServer()
    port, _ = await serve_env(env)
    rows = [json.loads(line) for line in MATH_SAMPLE.read_text().splitlines()[:12]]
    result = await evaluate_remote_async(f"127.0.0.1:{port}", rows)
    assert result.score_names == ("reward",)
    assert result.column("reward").tolist() == [(await env.verify_model(r)).reward for r in rows]


@pytest.mark.parametrize(
    ("properties", "names"),
    [
        ({"reward": {"type": "number"}, "mask_sample": {"type": "boolean"}}, ("reward",)),
        (
            {
                "reward": {"type": "number"},
                "a": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                "b": {"type": "integer"},
            },
            ("a", "b"),
        ),
        (
            {
                "reward": {"type": "number"},
                "c": {"type": ["number", "null"]},
                "s": {"type": "string"},
                "o": {"type": "object"},
            },
            ("c",),
        ),
        ({}, ("reward",)),
    ],
)
def test_score_fields_rule(properties: dict[str, Any], names: tuple[str, ...]) -> None:
    assert score_fields({"properties": properties}) == names


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gym_metrics.cli",
        "evaluate",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_cli_through_a_server_matches_ragas(serve_env: Any, tmp_path: Path) -> None:
    port, _ = await serve_env(ToolCallingServer())
    cases = tmp_path / "cases.jsonl"
    cases.write_bytes((DATA / "cases.jsonl").read_bytes())
    code, out, err = await _cli("--server", f"127.0.0.1:{port}", "--input", str(cases))
    assert code == 0, err
    doc = json.loads((tmp_path / "cases_tool_calling_results.json").read_text())
    rows = doc["row_scores"]
    assert [r["scores"]["tool_call_accuracy"] for r in rows] == [e["tool_call_accuracy"] for e in EXPECTED]
    assert [r["scores"]["tool_call_accuracy_unordered"] for r in rows] == [
        e["tool_call_accuracy_unordered"] for e in EXPECTED
    ]
    assert "function_name_and_args_accuracy" in out


async def test_cli_unreachable_server_exits_4(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_bytes((DATA / "cases.jsonl").read_bytes())
    code, _, err = await _cli("--server", "127.0.0.1:1", "--input", str(cases))
    assert code == 4 and "error:" in err and "Traceback" not in err
