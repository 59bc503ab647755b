"""Input files: nothing silent, nothing raw (issue 9, points 7-11).

Non-UTF-8 bytes are bad lines; text / objects / lists in numeric fields are kept out of the
stats and counted (`non_numeric_counts`); a UTF-8 BOM is accepted by aggregate and collect;
flags are never abbreviated and unknown ones are named; one message for a missing input; exit
codes as the README's table; one line per error unless --debug.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import cli
from gym_metrics._transport._convert import aggregate_to_metrics, metrics_to_aggregate
from gym_metrics.aggregate import Aggregator, aggregate_file
from gym_metrics.rollouts import _reader
from gym_metrics.rollouts import RolloutColumns, read_rollouts
from gym_metrics.collector._input import read_input
from gym_metrics_servers.math_exact import SAMPLE_PATH, MathExactServer

from _transport_helpers import server_in_thread

BOM = b"\xef\xbb\xbf"


def row(task: int, rollout: int = 0, agent: str = "a", **fields: Any) -> dict[str, Any]:
    return {"agent_ref": {"name": agent}, "_ng_task_index": task, "_ng_rollout_index": rollout, **fields}


def write_rows(path: Path, rows: list[dict[str, Any]], prefix: bytes = b"") -> Path:
    path.write_bytes(prefix + "".join(json.dumps(r) + "\n" for r in rows).encode())
    return path


def run(*args: str) -> tuple[int, str, str]:
    """The CLI in a fresh process (logging configured from scratch), as a user runs it."""
    proc = subprocess.run([sys.executable, "-m", "gym_metrics.cli", *args], capture_output=True, text=True, timeout=90)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """math_exact (its compute_metrics reads rows, so collect sends them) on 127.0.0.1:0, in a
    thread of its own so `cli.main` can run its own event loop here."""
    with server_in_thread(MathExactServer()) as address:
        yield address


# ------------------------------------------------------------------ 7: bytes that are not UTF-8


@pytest.mark.parametrize("where", ["value", "agent"])
def test_non_utf8_byte_is_a_bad_line_in_aggregate(tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    good = json.dumps(row(0, reward=1.0)).encode()
    bad = (
        b'{"agent_ref": {"name": "a"}, "_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 0.0, "note": "caf\xe9"}'
        if where == "value"
        else b'{"agent_ref": {"name": "a\xff"}, "_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 0.0}'
    )
    src = tmp_path / "r.jsonl"
    src.write_bytes(good + b"\n" + bad + b"\n" + json.dumps(row(2, reward=0.5)).encode() + b"\n")
    assert cli.main(["aggregate", str(src)]) == 2
    err = capsys.readouterr().err
    assert "line 2: json: not UTF-8 text" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1  # one line: file, line and field
    assert cli.main(["aggregate", str(src), "--on-bad-line", "skip"]) == 0
    captured = capsys.readouterr()
    assert "skipped" in captured.err and "line 2" in captured.err and "1 bad lines skipped" in captured.out
    agent = json.loads((tmp_path / "r_aggregate_metrics.json").read_text())[0]
    assert agent["agent_metrics"]["mean/reward"] == 0.75


def test_non_utf8_byte_is_a_bad_line_in_collect(tmp_path: Path, server: str, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        json.dumps(row(0, reward=1.0)).encode()
        + b"\n"
        + b'{"agent_ref": {"name": "a"}, "_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 0.0, "x": "\xff"}\n'
    )
    out = tmp_path / "out.jsonl"
    assert cli.main(["collect", "--server", server, "--input", str(src), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "line 2: json: not UTF-8 text" in err and "Traceback" not in err and "CancelledError" not in err
    out.unlink()
    assert cli.main(["collect", "--server", server, "--input", str(src), "--output", str(out), "--on-bad-line", "skip"]) == 0
    assert len(out.read_text().splitlines()) == 1


def test_a_lone_surrogate_is_a_bad_line_in_collect_naming_the_field(tmp_path: Path, server: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Python's json reads "\\ud800" into a str no UTF-8 writer takes: a row to verify that
    holds one is a bad line naming its field (it crashed collect after the rows before it)."""
    lines = SAMPLE_PATH.read_text().splitlines()[:6]
    lines[3] = lines[3].replace('"responses_create_params"', '"note": {"why": ["ok", "\\ud800x"]}, "responses_create_params"', 1)
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    assert cli.main(["collect", "--server", server, "--input", str(src), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "line 4: note.why[1]: holds a lone surrogate" in err and "Traceback" not in err, err
    out.unlink(missing_ok=True)
    assert cli.main(["collect", "--server", server, "--input", str(src), "--output", str(out), "--on-bad-line", "skip"]) == 0
    assert len(out.read_text().splitlines()) == 5


# ------------------------------------------------------------------ 8: non-numeric values counted


MIXED = [
    row(0, 0, reward=1.0, extracted_answer="4", score=3),
    row(0, 1, reward="1.0", extracted_answer="5", score=1),  # text is not converted
    row(1, 0, reward={"value": 1}, extracted_answer="6"),
    row(1, 1, reward=[1], extracted_answer=None, score="high"),
    row(2, 0, reward=None, score=2),  # null is missing, not counted
    row(2, 1, reward="0", mask_sample=True),  # masked: out of every stat, not counted
    row(3, 0, reward=0.0, response={"usage": {"input_tokens": "12", "output_tokens": 3}}),
    row(3, 1, reward=0.0, response={"usage": {"input_tokens": 10, "output_tokens": 4}}),
]


@pytest.mark.parametrize("path", ["fast", "per_line", "chunked"])
def test_non_numeric_values_are_left_out_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    if path == "per_line":
        monkeypatch.setattr(_reader, "_read_fast", lambda *args: None)
    rows = MIXED
    if path == "chunked":  # each chunk on its own is uniform enough for the columnar path
        rows = [row(t, 0, reward=1.0) for t in range(4)] + [row(t, 1, reward="1.0") for t in range(4)]
        monkeypatch.setattr(_reader, "CHUNK_BYTES", len(json.dumps(rows[0])) * 4 + 4)
    src = write_rows(tmp_path / "r.jsonl", rows)
    out, (agg,), _ = aggregate_file(src)
    if path == "chunked":
        assert agg.non_numeric_counts == {"reward": 4} and agg.agent_metrics["mean/reward"] == 1.0
        return
    assert agg.non_numeric_counts == {"input_tokens": 1, "reward": 3, "score": 1}
    assert "extracted_answer" not in agg.non_numeric_counts  # text in every row: not a numeric field
    assert agg.agent_metrics["mean/reward"] == pytest.approx(1 / 3)  # 1.0, 0.0, 0.0: "1.0" not converted
    assert agg.agent_metrics["mean/input_tokens"] == 10
    entry = json.loads(out.read_text())[0]
    assert entry["non_numeric_counts"] == {"input_tokens": 1, "reward": 3, "score": 1}
    assert list(entry)[-2:] == ["non_numeric_counts", "non_finite_counts"]
    assert [len(g["rollout_infos"]) for g in entry["group_level_metrics"]] == [2, 2, 1, 2]  # rows kept


def test_non_numeric_counts_in_the_engine_and_the_metrics_message() -> None:
    agg_ = Aggregator("a")
    agg_.add(RolloutColumns.from_rows(MIXED))
    result = agg_.finalize()
    assert result.non_numeric_counts == {"input_tokens": 1, "reward": 3, "score": 1}
    message = aggregate_to_metrics(result)
    assert dict(message.non_numeric_counts) == {"input_tokens": 1, "reward": 3, "score": 1}
    assert metrics_to_aggregate(message).non_numeric_counts == {"input_tokens": 1, "reward": 3, "score": 1}


def test_failed_rollouts_are_not_counted(tmp_path: Path) -> None:
    rows = [row(0, 0, reward=1.0), row(0, 1, reward="x", _gm_error={"kind": "verify_failed", "message": "boom"})]
    src = write_rows(tmp_path / "r.jsonl", rows)
    for as_zero in (False, True):
        (agg,) = read_and_aggregate(src, as_zero)
        assert agg.non_numeric_counts == {}


def read_and_aggregate(src: Path, as_zero: bool) -> list[Any]:
    from gym_metrics.aggregate import AggregateOptions

    out = []
    for name, cols in read_rollouts(src).agents.items():
        a = Aggregator(name, AggregateOptions(count_errors_as_zero=as_zero))
        a.add(cols)
        out.append(a.finalize())
    return out


def test_aggregate_prints_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_rows(tmp_path / "r.jsonl", MIXED)
    assert cli.main(["aggregate", str(src)]) == 0
    err = capsys.readouterr().err
    assert "note: a: non-numeric values" in err and "(input_tokens: 1, reward: 3, score: 1)" in err


def test_collect_counts_and_prints_non_numeric_values(tmp_path: Path, server: str, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_rows(tmp_path / "in.jsonl", [row(0, 0, reward=1.0, score=2), row(0, 1, reward=0.0, score="high")])
    out = tmp_path / "out.jsonl"
    assert cli.main(["collect", "--server", server, "--input", str(src), "--output", str(out)]) == 0
    assert "note: a: non-numeric values" in capsys.readouterr().err
    entry = json.loads((tmp_path / "out_aggregate_metrics.json").read_text())[0]
    assert entry["non_numeric_counts"] == {"score": 1} and entry["agent_metrics"]["mean/score"] == 2


# ------------------------------------------------------------------ 9: byte-order mark


def test_bom_is_accepted_by_aggregate_and_collect(tmp_path: Path, server: str, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [row(0, reward=1.0), row(1, reward=0.0)]
    src = write_rows(tmp_path / "in.jsonl", rows, prefix=BOM)
    assert cli.main(["aggregate", str(src), "-o", str(tmp_path / "agg.json")]) == 0
    out = tmp_path / "out.jsonl"
    assert cli.main(["collect", "--server", server, "--input", str(src), "--output", str(out)]) == 0, capsys.readouterr().err
    assert not out.read_bytes().startswith(BOM)
    entry = json.loads((tmp_path / "out_aggregate_metrics.json").read_text())[0]
    assert entry["agent_metrics"]["mean/reward"] == 0.5
    assert entry["group_level_metrics"][0]["sample"]["reward"] == 1.0


def test_bom_of_concatenated_files_and_on_task_lines(tmp_path: Path, server: str) -> None:
    first = write_rows(tmp_path / "a.jsonl", [row(0, reward=1.0)], prefix=BOM)
    second = write_rows(tmp_path / "b.jsonl", [row(1, reward=0.0)], prefix=BOM)
    both = tmp_path / "both.jsonl"
    both.write_bytes(first.read_bytes() + second.read_bytes())
    rollouts = read_rollouts(both)
    assert rollouts.rows_read == 2 and not rollouts.bad_lines
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(BOM + SAMPLE_PATH.read_bytes().split(b"\n", 1)[0] + b"\n")
    assert cli.main(["collect", "--server", server, "--input", str(tasks), "--output", str(tmp_path / "o.jsonl")]) == 0
    out = tmp_path / "o2.jsonl"
    assert cli.main(["collect", "--server", server, "--input", str(both), "--output", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 2


# ------------------------------------------------------------------ 10: flags


def test_every_parser_refuses_abbreviations() -> None:
    parser = cli._parser()
    subparsers = next(a for a in parser._actions if isinstance(a, cli.argparse._SubParsersAction))
    assert parser.allow_abbrev is False
    assert all(p.allow_abbrev is False for p in subparsers.choices.values())


def test_abbreviated_flag_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_rows(tmp_path / "in.jsonl", [row(0, reward=1.0)])
    args = ["collect", "--server", "127.0.0.1:1", "--input", str(src), "--output", str(tmp_path / "o.jsonl")]
    assert cli.main([*args, "--num-repeat", "3"]) == 2
    assert "unrecognized arguments: --num-repeat (did you mean --num-repeats?)" in capsys.readouterr().err
    assert cli.main(["aggregate", str(src), "--expected", "3"]) == 2
    assert "unrecognized arguments: --expected" in capsys.readouterr().err


def test_unknown_flag_is_named_before_missing_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_rows(tmp_path / "in.jsonl", [row(0, reward=1.0)])
    assert cli.main(["collect", "--server", "127.0.0.1:1", "--input", str(src), "--ouput", "o.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --ouput (did you mean --output?)" in err and "required" not in err


def test_num_repeats_composes_with_given_task_indices_in_the_reader(tmp_path: Path) -> None:
    """As NeMo Gym 0.7.0: a given `_ng_task_index` is kept and `--num-repeats` counts rollouts
    on it (this was refused); a given rollout index is replaced; `task_index` is data on a
    line to verify (a dataset column), so that line gets a task index of its own."""
    task = {"agent_ref": {"name": "a"}, "question": "q"}
    src = write_rows(tmp_path / "in.jsonl", [{**task, "_ng_task_index": 40, "_ng_rollout_index": 9}, {**task, "task_index": 4}])
    assert [(r.task, r.rollout) for r in read_input(src, 2)] == [(40, 0), (40, 1), (0, 0), (0, 1)]
    src = write_rows(tmp_path / "in2.jsonl", [{**task, "_ng_rollout_index": None}, {**task, "_ng_rollout_index": 1}])
    assert [(r.task, r.rollout) for r in read_input(src, 2)] == [(0, 0), (0, 1), (1, 0), (1, 1)]  # two distinct lines


# ------------------------------------------------------------------ 11: messages, codes, logging


def test_serve_file_without_class_says_the_class_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    app = Path(__file__).parents[2] / "gym_metrics_servers" / "math_exact" / "app.py"
    assert cli.main(["serve", str(app)]) == 2
    err = capsys.readouterr().err
    assert "names no class" in err and f"{app}:MathExactServer" in err


@pytest.mark.parametrize(
    "args",
    [
        ["aggregate", "{p}"],
        ["compare", "{p}", "--agents", "a", "b"],
        ["collect", "--server", "127.0.0.1:1", "--input", "{p}", "--output", "o.jsonl"],
        ["evaluate", "--metric", "tool_call_accuracy", "--input", "{p}"],
    ],
)
def test_missing_input_reads_the_same_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    missing = tmp_path / "absent.jsonl"
    assert cli.main([a.format(p=missing) for a in args]) == 2
    assert capsys.readouterr().err == f"error: input file not found: {missing}\n"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"gym-metrics {version('gym-metrics')}\n"


def test_evaluate_summary_says_where_the_result_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "sub" / "rows.jsonl"
    src.parent.mkdir()
    src.write_text(json.dumps({"user_input": [], "reference_tool_calls": []}) + "\n")
    assert cli.main(["evaluate", "--metric", "tool_call_accuracy", "--input", str(src)]) == 0
    out = capsys.readouterr().out
    assert f"result written to {src.with_name('rows_tool_call_accuracy_results.json')} (beside the input" in out


def test_one_line_errors_and_debug_tracebacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_rows(tmp_path / "r.jsonl", [row(0, reward=1.0)])

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("engine exploded")

    monkeypatch.setattr("gym_metrics.aggregate.aggregate_file", crash)
    assert cli.main(["aggregate", str(src)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RuntimeError: engine exploded" in err and "--debug" in err
    with pytest.raises(RuntimeError, match="engine exploded"):
        cli.main(["aggregate", str(src), "--debug"])
    with pytest.raises(RuntimeError, match="engine exploded"):
        cli.main(["--debug", "aggregate", str(src)])


def test_http_client_logs_stay_quiet_unless_debug(tmp_path: Path) -> None:
    from gym_metrics.testing import Reply, ScriptedJudge

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"q": "x"}) + "\n")
    answer = Reply(200, json.dumps({"result": {"score": 1}}), {"Content-Type": "application/json"})
    with ScriptedJudge([answer, answer]) as judge:
        config = tmp_path / "remote.json"
        config.write_text(json.dumps({"type": "nemo-agent-toolkit-remote", "url": f"{judge.url}/chat/completions",
                                      "evaluator_name": "e"}))  # fmt: skip
        base = ["evaluate", "--metric", "remote", "--metric-config", str(config), "--input", str(rows)]
        code, _, err = run(*base)
        assert code == 0, err
        assert "HTTP Request" not in err
        code, _, err = run(*base, "--log-level", "debug")
        assert code == 0, err
        assert "HTTP Request: POST" in err
