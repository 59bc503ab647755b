"""`gym-metrics evaluate` end to end, as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parents[1] / "data" / "tool_call_accuracy"
EXPECTED = [json.loads(line) for line in (DATA / "expected.jsonl").read_text().splitlines()]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "evaluate", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def load(path: Path) -> dict[str, Any]:
    def no_constants(name: str) -> None:
        raise AssertionError(f"non-JSON constant {name} in {path}")

    return json.loads(path.read_text(), parse_constant=no_constants)


@pytest.fixture
def cases(tmp_path: Path) -> Path:
    return Path(shutil.copy(DATA / "cases.jsonl", tmp_path / "cases.jsonl"))


def test_strict_order_matches_ragas(cases: Path) -> None:
    proc = run("--scorer", "tool_call_accuracy", "--input", str(cases))
    assert proc.returncode == 0, proc.stderr
    out = cases.with_name("cases_tool_call_accuracy_results.json")  # default: beside the input
    doc = load(out)
    rows = doc["row_scores"]
    assert [r["index"] for r in rows] == list(range(len(EXPECTED)))
    assert [r["scores"]["tool_call_accuracy"] for r in rows] == [e["tool_call_accuracy"] for e in EXPECTED]
    assert not any("error" in r for r in rows)
    (agg,) = doc["aggregate_scores"]
    assert agg["name"] == "tool_call_accuracy" and agg["count"] == 15 and agg["nan_count"] == 0
    assert agg["mean"] == pytest.approx(sum(e["tool_call_accuracy"] for e in EXPECTED) / 15)
    assert "tool_call_accuracy" in proc.stdout and "15 rows" in proc.stdout and str(out) in proc.stdout
    assert proc.stderr == ""


def test_unordered_config_matches_ragas(cases: Path, tmp_path: Path) -> None:
    config = tmp_path / "unordered.json"
    config.write_text(json.dumps({"strict_order": False}))
    out = tmp_path / "out" / "unordered.json"
    out.parent.mkdir()
    proc = run("--scorer", "tool_call_accuracy", "--scorer-config", str(config), "--input", str(cases), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = load(out)["row_scores"]
    assert [r["scores"]["tool_call_accuracy"] for r in rows] == [e["tool_call_accuracy_unordered"] for e in EXPECTED]
    # NeMo Evaluator's spelling of the flags: the same run
    old = tmp_path / "out" / "old_flags.json"
    proc = run("--metric", "tool_call_accuracy", "--metric-config", str(config), "--input", str(cases), "-o", str(old))
    assert proc.returncode == 0, proc.stderr
    assert load(old) == load(out)


def test_bad_lines_and_rejected_rows_are_row_errors(tmp_path: Path) -> None:
    good = (DATA / "cases.jsonl").read_text().splitlines()[0]
    rejected = json.dumps(
        {
            "user_input": [{"content": "", "type": "ai", "tool_calls": [{"name": "f", "args": "{}"}]}],
            "reference_tool_calls": [],
        }
    )
    lines = [good, "{not json", "", "[1, 2]", rejected, good]
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "res.json"
    proc = run("--metric", "tool_call_accuracy", "--input", str(data), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = load(out)["row_scores"]
    assert len(rows) == 5  # the blank line is skipped
    assert [r["scores"]["tool_call_accuracy"] for r in rows] == [1.0, None, None, None, 1.0]
    assert rows[1]["error"]["field"] == "json" and rows[1]["error"]["reason"].startswith("line 2: not valid JSON")
    assert rows[2]["error"] == {"field": "json", "reason": "line 4: not a JSON object (got list)"}
    assert rows[3]["error"]["field"] == "user_input[0].tool_calls[0].args"
    assert f"{data}:2: not valid JSON" in proc.stderr and f"{data}:4: not a JSON object" in proc.stderr
    assert "row 3: user_input[0].tool_calls[0].args" in proc.stderr
    assert "5 rows, 3 with errors" in proc.stdout


def test_every_row_failing_is_exit_3(tmp_path: Path) -> None:
    """A run that scored nothing (every row refused here; a wrong URL or field does the same)
    exited 0, as a run that scored them all."""
    rejected = json.dumps({"user_input": [{"content": "", "type": "ai", "tool_calls": [{"name": "f", "args": "{}"}]}], "reference_tool_calls": []})
    data = tmp_path / "rows.jsonl"
    data.write_text(f"{rejected}\n{{not json\n")
    proc = run("--metric", "tool_call_accuracy", "--input", str(data), "-o", str(tmp_path / "res.json"))
    assert proc.returncode == 3, proc.stderr
    assert "error: every one of the 2 rows failed" in proc.stderr and "Traceback" not in proc.stderr
    assert len(load(tmp_path / "res.json")["row_scores"]) == 2  # the result is written all the same


def test_limit_samples_and_parallelism(cases: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run(
        "--metric",
        "tool_call_accuracy",
        "--input",
        str(cases),
        "-o",
        str(out),
        "--limit-samples",
        "4",
        "--parallelism",
        "2",
    )
    assert proc.returncode == 0, proc.stderr
    assert [r["scores"]["tool_call_accuracy"] for r in load(out)["row_scores"]] == [
        e["tool_call_accuracy"] for e in EXPECTED[:4]
    ]


def test_tool_calling_metric_from_the_cli(tmp_path: Path) -> None:
    row = {
        "response": {"choices": [{"message": {"tool_calls": [{"function": {"name": "f", "arguments": '{"a": 5}'}}]}}]},
        "expected_tool_calls": [{"function": {"name": "f", "arguments": {"a": 5.0}}}],
    }
    data = tmp_path / "openai.jsonl"
    data.write_text(json.dumps(row) + "\n")
    proc = run("--metric", "tool_calling", "--input", str(data))
    assert proc.returncode == 0, proc.stderr
    doc = load(tmp_path / "openai_tool_calling_results.json")
    assert doc["row_scores"][0]["scores"] == {"function_name_accuracy": 1.0, "function_name_and_args_accuracy": 1.0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metric", "nope"], "unknown scorer 'nope'"),
        (["--metric-config", "{config}"], "--scorer is required"),
        (["--scorer-config", "{config}"], "--scorer is required"),
        (["--metric", "tool_call_accuracy", "--metric-config", "{bad_key}"], "config.strict"),
        (["--metric", "tool_call_accuracy", "--metric-config", "{not_json}"], "not valid JSON"),
        (["--metric", "tool_call_accuracy", "--metric-config", "{list_json}"], "must be an object"),
        (["--metric", "tool_call_accuracy", "--metric-config", "{missing}"], "error: scorer config not found: --scorer-config: "),
        (["--server", "127.0.0.1:1", "--metric-config", "{config}"], "--scorer-config configures in-process scorers"),
        (["--scorer", "tool_call_accuracy", "--scorer-config", "{list_json}"], "must be an object"),
    ],
)
def test_bad_invocations_exit_2_without_traceback(cases: Path, tmp_path: Path, args: list[str], message: str) -> None:
    files = {"config": '{"strict_order": false}', "bad_key": '{"strict": false}', "not_json": "{", "list_json": "[]"}
    for name, text in files.items():
        (tmp_path / f"{name}.json").write_text(text)
    args = [a.format(**{n: str(tmp_path / f"{n}.json") for n in [*files, "missing"]}) for a in args]
    proc = run(*args, "--input", str(cases))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_input_exits_2(tmp_path: Path) -> None:
    proc = run("--metric", "tool_call_accuracy", "--input", str(tmp_path / "absent.jsonl"))
    assert proc.returncode == 2 and "error: input file not found:" in proc.stderr and "Traceback" not in proc.stderr


def test_yaml_config(cases: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("strict_order: false\n")
    out = tmp_path / "r.json"
    proc = run("--metric", "tool_call_accuracy", "--metric-config", str(config), "--input", str(cases), "-o", str(out))
    try:
        import yaml  # noqa: F401
    except ImportError:
        assert proc.returncode == 2 and "YAML needs pyyaml" in proc.stderr and "Traceback" not in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert [r["scores"]["tool_call_accuracy"] for r in load(out)["row_scores"]] == [
            e["tool_call_accuracy_unordered"] for e in EXPECTED
        ]


def test_jsonl_numbers_are_read_exactly(tmp_path: Path) -> None:
    """A 30-digit integer stays an integer (orjson would make it a float, changing its str());
    NaN literals, which Python's json writes, are accepted."""
    big = 123456789012345678901234567890

    def line(pred: Any, ref: Any) -> str:
        return json.dumps(
            {
                "user_input": [{"content": "", "type": "ai", "tool_calls": [{"name": "f", "args": {"n": pred}}]}],
                "reference_tool_calls": [{"name": "f", "args": {"n": ref}}],
            }
        )

    data = tmp_path / "numbers.jsonl"
    data.write_text("\n".join([line(big, str(big)), line(float("nan"), "nan"), line(2**64 - 1, str(2**64 - 1))]) + "\n")
    out = tmp_path / "r.json"
    proc = run("--metric", "tool_call_accuracy", "--input", str(data), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert [r["scores"]["tool_call_accuracy"] for r in load(out)["row_scores"]] == [1.0, 1.0, 1.0]
