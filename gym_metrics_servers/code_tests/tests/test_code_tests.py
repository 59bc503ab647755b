"""code_tests over a real gRPC server: programs run in the sandbox against stdin/stdout and
function tests, each way a run can fail has its status, the program is the last Python block,
NeMo Gym's unit_tests are read as tests, bad requests are refused naming the field, and
`collect` scores the shipped sample."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import gym_metrics
from gym_metrics import InvalidInputError, ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.testing import serve_environment
from gym_metrics_servers.code_tests import make_sample
from gym_metrics_servers.code_tests.app import SAMPLE_PATH, CodeTestsServer, extract_code

pytestmark = pytest.mark.timeout(60)


def _need_sandbox() -> None:
    """The tests that run programs need the sandbox's strict isolation (bubblewrap, root): they
    skip without it (fail under CI=true; tests/_ci.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
    from _ci import need_sandbox

    need_sandbox()


@asynccontextmanager
async def _client() -> AsyncIterator[ResourcesClient]:
    """A client of a code_tests server; its sandbox launchers stopped afterwards."""
    _need_sandbox()
    env = CodeTestsServer()
    try:
        async with serve_environment(env) as server, ResourcesClient(server.address) as client:
            yield client
    finally:
        await env.pool.aclose()


def _row(text: str | None, tests: list[dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
    """A rollout whose answer is `text` (None: no message at all)."""
    output = [] if text is None else [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    ]  # fmt: skip
    row: dict[str, Any] = {"responses_create_params": {"input": "Write the program."}, "response": {"output": output}}
    if tests is not None:
        row["tests"] = tests
    return {**row, **fields}


def _answer(program: str) -> str:
    return f"Here is my solution.\n\n```python\n{program}```\n"


def _statuses(verified: dict[str, Any]) -> list[str]:
    return [r["status"] for r in verified["test_results"]]


# ----------------------------------------------------------------------------- stdin/stdout

REVERSE = "print(input()[::-1])\n"


async def test_a_correct_program_passes_every_test() -> None:
    tests = [
        {"input": "abc\n", "output": "cba"}, {"input": "racecar\n", "output": "racecar\n"}, {"input": "x\n", "output": "x"},
    ]  # fmt: skip
    async with _client() as client:
        verified = await client.verify(_row(_answer(REVERSE), tests))
    assert verified["reward"] == 1.0 and verified["pass_rate"] == 1.0
    assert verified["tests_passed"] == verified["tests_total"] == 3
    assert _statuses(verified) == ["ok"] * 3
    assert verified["extracted_code"] == REVERSE
    assert all(r["wall_s"] > 0 and r["detail"] == "" for r in verified["test_results"])


async def test_trailing_whitespace_is_ignored_a_different_line_is_not() -> None:
    program = "print('a  ')\nprint('b\\t')\nprint()\nprint()\n"
    printed = "a  \nb\t\n\n\n"
    tests = [
        {"output": "a\nb"},
        {"output": "a\nb\n\n"},
        {"output": "a \nb  \n"},
        {"output": "a\nc"},  # a different line
        {"output": "\na\nb"},  # a leading blank line is not trailing
        {"output": "a\nb\nc"},  # a missing line
    ]
    async with _client() as client:
        verified = await client.verify(_row(_answer(program), tests))
    assert _statuses(verified) == ["ok", "ok", "ok", "wrong_answer", "wrong_answer", "wrong_answer"]
    assert [r["detail"] for r in verified["test_results"][3:]] == [printed] * 3  # what it printed
    assert verified["reward"] == 0.0 and verified["pass_rate"] == 0.5
    assert (verified["tests_passed"], verified["tests_total"]) == (3, 6)


# The program passes on input "ok" and fails its own way on anything else: each verify has one
# test that passes and one that does not, so pass_rate is 0.5, never 0 or 1 by accident.
FAILURES: dict[str, tuple[str, dict[str, Any]]] = {  # status -> (what it does on "bad", request limits)
    "wrong_answer": ("print('nope')", {}),
    "error": ("raise ValueError('cannot handle ' + s)", {}),
    "timeout": ("while True:\n        pass", {"time_limit_s": 1}),
    "memory": ("data = bytearray(1 << 30)\n    print(len(data))", {"memory_limit_mb": 128}),
    "output_limit": ("while True:\n        print('x' * 1000)", {"time_limit_s": 2}),
    "signal": ("import os, signal\n    os.kill(os.getpid(), signal.SIGSEGV)", {}),
}


def _failing(bad: str) -> str:
    return f"s = input()\nif s == 'ok':\n    print('fine')\nelse:\n    {bad}\n"


async def test_each_way_a_run_fails_has_its_status() -> None:
    tests = [{"input": "ok\n", "output": "fine"}, {"input": "bad\n", "output": "fine"}]
    async with _client() as client:
        results = await asyncio.gather(*(
            client.verify(_row(_answer(_failing(bad)), tests, **limits)) for bad, limits in FAILURES.values()
        ))  # fmt: skip
    got = dict(zip(FAILURES, results))
    for status, verified in got.items():
        assert _statuses(verified) == ["ok", status], status
        assert verified["reward"] == 0.0 and verified["pass_rate"] == 0.5, status
        assert (verified["tests_passed"], verified["tests_total"]) == (1, 2), status
    assert got["wrong_answer"]["test_results"][1]["detail"] == "nope\n"
    error = got["error"]["test_results"][1]["detail"]  # the end of the traceback
    assert error.endswith("ValueError: cannot handle bad\n") and 'File "main.py", line 5' in error
    assert "MemoryError" in got["memory"]["test_results"][1]["detail"]
    assert got["signal"]["test_results"][1]["detail"] == "signal 11"
    assert 0.9 <= got["timeout"]["test_results"][1]["wall_s"] < 10  # stopped near its 1 s, not at the default 10


# ----------------------------------------------------------------------------- function tests

TWO_SUM = make_sample.TWO_SUM


async def test_function_tests_call_the_program() -> None:
    two_sum = [
        {"function": "Solution.twoSum", "args": [[2, 7, 11, 15], 9], "expected": [0, 1]},
        {"function": "Solution.twoSum", "args": [[3, 2, 4], 6], "expected": [1, 2]},
        {"function": "Solution.twoSum", "args": [[3, 3]], "kwargs": {"target": 6}, "expected": [0, 1]},
    ]
    add = "def add(a, b=0):\n    print('noise on stdout')\n    return a + b\n"
    adds = [
        {"function": "add", "args": [2, 3], "expected": 5},
        {"function": "add", "args": [[1], [2]], "expected": [1, 2]},
        {"function": "add", "args": [1], "kwargs": {"b": 1}, "expected": 3},  # wrong: 2
    ]
    swapped = TWO_SUM.replace("[seen[target - x], i]", "[i, seen[target - x]]")
    exits = "import sys\nsys.exit(0)\n" + add
    async with _client() as client:
        right, added, wrong, exited = await asyncio.gather(
            client.verify(_row(_answer(TWO_SUM), two_sum)),
            client.verify(_row(_answer(add), adds)),
            client.verify(_row(_answer(swapped), two_sum[:1])),
            client.verify(_row(_answer(exits), adds[:1])),
        )
    assert right["reward"] == 1.0 and _statuses(right) == ["ok"] * 3 and right["tests_passed"] == 3
    assert _statuses(added) == ["ok", "ok", "wrong_answer"] and added["pass_rate"] == pytest.approx(2 / 3)
    assert added["test_results"][2]["detail"] == "2"  # the result, as JSON
    assert _statuses(wrong) == ["wrong_answer"] and wrong["test_results"][0]["detail"] == "[1, 0]"
    assert wrong["reward"] == 0.0
    assert _statuses(exited) == ["error"] and "not called" in exited["test_results"][0]["detail"]
    assert exited["reward"] == 0.0


async def test_function_results_are_compared_as_json_values() -> None:
    """`True == 1` in Python: `[False, True]` passed for `[0, 1]` and `1` for `true`. As JSON, a
    boolean is no number; `1` and `1.0` are one number; a tuple is an array."""
    cases = [("[False, True]", [0, 1], "wrong_answer"), ("1", True, "wrong_answer"), ("True", 1, "wrong_answer"),
             ("{'a': [True]}", {"a": [1]}, "wrong_answer"), ("(0, 1.0)", [0, 1], "ok"), ("1.0", 1, "ok"), ("None", None, "ok")]  # fmt: skip
    async with _client() as client:
        verified = await asyncio.gather(*(
            client.verify(_row(_answer(f"def f():\n    return {value}\n"), [{"function": "f", "args": [], "expected": expected}]))
            for value, expected, _ in cases
        ))  # fmt: skip
    assert [_statuses(v) for v in verified] == [[status] for _, _, status in cases]


async def test_an_answer_without_code_is_as_isolated_as_the_runs_would_be() -> None:
    """users=False on a root server: every run says isolated false, and so must an answer
    with no program to run (it said true)."""
    _need_sandbox()
    from gym_metrics.sandbox import Pool

    env = CodeTestsServer(Pool(users=False))
    try:
        async with serve_environment(env) as server, ResourcesClient(server.address) as client:
            none, some = await asyncio.gather(client.verify(_row("no code here", [{"input": "", "output": ""}])),
                                              client.verify(_row(_answer("print()\n"), [{"input": "", "output": ""}])))  # fmt: skip
    finally:
        await env.pool.aclose()
    assert none["isolated"] is some["isolated"] is False and some["reward"] == 1.0


# ----------------------------------------------------------------------------- finding the program


async def test_the_program_is_the_last_python_block() -> None:
    text = (
        "A first try:\n```python\nprint('first')\n```\nA better one:\n```python\nprint('second')\n```\n"
        "It prints:\n```text\nsecond\n```\nAnd a shell line:\n```bash\necho third\n```\n"
    )
    tests = [{"output": "second"}, {"output": "second\n"}]
    async with _client() as client:
        found = await client.verify(_row(text, tests))
        prose = await client.verify(_row("The answer is print('second'), no code block.", tests))
        nothing = await client.verify(_row(None, tests))
    assert found["extracted_code"] == "print('second')\n" and found["reward"] == 1.0
    for missing in (prose, nothing):
        assert missing["reward"] == 0.0 and missing["extracted_code"] is None
        assert (missing["tests_passed"], missing["tests_total"], missing["pass_rate"]) == (0, 2, 0.0)
        assert missing["test_results"] == []


def test_extract_code_prefers_python_blocks_then_unlabelled_ones() -> None:
    assert extract_code("```\nplain()\n```\n```py\nlabelled()\n```\n```\nlater_plain()\n```") == "labelled()\n"
    assert extract_code("```\none()\n```\ntext\n```\ntwo()\n```") == "two()\n"
    assert extract_code("```Python3\nupper()\n```") == "upper()\n"
    assert extract_code("```text\nnot code\n```\n```json\n{}\n```") is None
    assert extract_code("no fence at all") is None


async def test_a_function_test_leaves_stdin_to_the_program() -> None:
    """The call's arguments come in a file: a program reading stdin at its top still gets called."""
    reads = "import sys\ndata = sys.stdin.read()\n\ndef add(a, b):\n    return a + b\n"
    async with _client() as client:
        verified = await client.verify(_row(_answer(reads), [{"function": "add", "args": [2, 3], "expected": 5}]))
    assert _statuses(verified) == ["ok"], verified["test_results"]


async def test_a_block_closing_one_message_or_indented_in_a_list_is_found() -> None:
    message = lambda text: {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}  # noqa: E731
    split = {"responses_create_params": {"input": "x"}, "tests": [{"output": "1"}],
             "response": {"output": [message("```python\nprint(1)\n```"), message("Done.")]}}  # fmt: skip
    indented = "1. Read nothing.\n2. Print one:\n\n   ```python\n   print(1)\n   ```\n"
    async with _client() as client:
        across = await client.verify(split)
        in_list = await client.verify(_row(indented, [{"output": "1"}]))
    assert across["reward"] == 1.0 and across["extracted_code"] == "print(1)\n"
    assert in_list["reward"] == 1.0 and in_list["extracted_code"] == "print(1)\n"


async def test_an_error_shows_the_programs_own_traceback() -> None:
    crash = "def parse(s):\n    return int(s)\n\nparse('x')\n"
    quiet = "import sys\nprint('x')\nsys.exit(3)\n"
    warns = "import sys\nprint(1)\nprint('no MemoryError here', file=sys.stderr)\n"
    async with _client() as client:
        crashed, exited, warned = await asyncio.gather(*(client.verify(_row(_answer(c), [{"output": "1"}])) for c in (crash, quiet, warns)))
    detail = crashed["test_results"][0]["detail"]
    assert "_launch.py" not in detail and "return int(s)" in detail and 'File "main.py", line 2, in parse' in detail, detail
    assert exited["test_results"][0] == {**exited["test_results"][0], "status": "error", "detail": "exit code 3"}
    assert _statuses(warned) == ["ok"]  # a word on stderr is not a memory failure


# ----------------------------------------------------------------------------- NeMo Gym's form


async def test_nemo_gym_unit_tests_are_read_as_tests() -> None:
    io = {"unit_tests": {"inputs": ["abc\n", "ab\n"], "outputs": ["cba\n", "ba"], "fn_name": None}}
    calls = {"unit_tests": {
        "inputs": ["[2, 7, 11, 15]\n9", "[3, 2, 4]\n6"], "outputs": ["[0, 1]", "[1, 2]"], "fn_name": "twoSum",
    }}  # fmt: skip
    swapped = TWO_SUM.replace("[seen[target - x], i]", "[i, seen[target - x]]")
    async with _client() as client:
        stdin_stdout = await client.verify(_row(_answer(REVERSE), verifier_metadata=io))
        wrong_io = await client.verify(_row(_answer("print(input())\n"), verifier_metadata=io))
        called = await client.verify(_row(_answer(TWO_SUM), verifier_metadata=calls))
        wrong_call = await client.verify(_row(_answer(swapped), verifier_metadata=calls))
    assert stdin_stdout["reward"] == 1.0 and _statuses(stdin_stdout) == ["ok", "ok"]
    assert _statuses(wrong_io) == ["wrong_answer", "wrong_answer"] and wrong_io["test_results"][0]["detail"] == "abc\n"
    assert called["reward"] == 1.0 and _statuses(called) == ["ok", "ok"] and called["tests_total"] == 2
    assert _statuses(wrong_call) == ["wrong_answer", "wrong_answer"]  # called as Solution.twoSum: its result
    assert wrong_call["test_results"][0]["detail"] == "[1, 0]"


# ----------------------------------------------------------------------------- refused requests

ONE_TEST = [{"input": "", "output": "1"}]


def _unit_tests(inputs: list[str], outputs: list[str], fn_name: str | None = None) -> dict[str, Any]:
    return {"unit_tests": {"inputs": inputs, "outputs": outputs, "fn_name": fn_name}}


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({}, "no tests: give `tests`"),
        ({"tests": []}, "no tests: give `tests`"),
        ({"tests": [{"input": "", "output": "1", "function": "f"}]}, r"body_json\.tests\[0\]: .*either `output`.* or `function`"),
        ({"tests": [{"input": "1"}]}, r"body_json\.tests\[0\]: .*either `output`.* or `function`"),
        ({"verifier_metadata": _unit_tests(["1", "2"], ["1"])}, "unit_tests: 2 inputs but 1 outputs"),
        ({"verifier_metadata": _unit_tests(["{oops"], ["1"], "f")}, r"unit_tests\.inputs\[0\]: not JSON"),
        ({"tests": ONE_TEST, "time_limit_s": 0}, "time_limit_s"),
        ({"tests": ONE_TEST, "memory_limit_mb": 1}, "memory_limit_mb"),
        ({"tests": [{"function": "os.system('x')", "expected": 0}]}, r"body_json\.tests\[0\]\.function"),
    ],
)
async def test_bad_requests_are_refused_naming_the_field(fields: dict[str, Any], named: str) -> None:
    async with _client() as client:
        with pytest.raises(InvalidInputError, match=named):
            await client.verify(_row(_answer("print(1)\n"), **fields))
        assert (await client.verify(_row(_answer("print(1)\n"), ONE_TEST)))["reward"] == 1.0  # the server goes on


# ----------------------------------------------------------------------------- the sample

# task -> the statuses of each of its hasty rollouts: make_sample's "a wrong answer, an exception,
# a loop that never ends, a wrong function result"
HASTY = {
    0: ["wrong_answer", "wrong_answer", "wrong_answer"],  # "2" + "3"
    1: ["error", "error"],  # s[len(s)]: IndexError
    2: ["ok", "wrong_answer"],  # no FizzBuzz: right up to 14
    3: ["wrong_answer", "wrong_answer"],  # the indices swapped
    4: ["timeout", "timeout"],  # counts primes forever
    5: ["ok", "error"],  # max() of no words
}


async def test_collect_scores_the_sample(tmp_path: Path) -> None:
    async with _client() as client:
        result = await collect_async(client, SAMPLE_PATH, tmp_path / "code.jsonl", CollectOptions())
    rows = [json.loads(line) for line in (tmp_path / "code.jsonl").read_text().splitlines()]
    assert len(rows) == 24
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_agent.setdefault(row["agent_ref"]["name"], []).append(row)
    assert all(_statuses(r) == ["ok"] * r["tests_total"] and r["reward"] == 1.0 for r in by_agent["careful_agent"])
    hasty = {(r["_ng_task_index"], tuple(_statuses(r))) for r in by_agent["hasty_agent"]}
    assert hasty == {(task, tuple(statuses)) for task, statuses in HASTY.items()}  # both repeats alike
    assert all(r["reward"] == 0.0 for r in by_agent["hasty_agent"])
    metrics = {m["agent_ref"]["name"]: m for m in json.loads(result.metrics_path.read_text())}
    assert metrics["careful_agent"]["agent_metrics"]["mean/reward"] == 1.0
    assert metrics["hasty_agent"]["agent_metrics"]["mean/reward"] == 0.0
    assert metrics["hasty_agent"]["agent_metrics"]["mean/pass_rate"] == pytest.approx(1 / 6)  # two tasks half passed
    assert set(metrics["careful_agent"]["key_metrics"]) == {"mean/reward", "mean/pass_rate", "pass@1"}


def test_the_sample_is_up_to_date() -> None:
    lines = SAMPLE_PATH.read_text(encoding="utf-8").splitlines()
    assert lines == [json.dumps(row) for row in make_sample.rows()]  # python gym_metrics_servers/code_tests/make_sample.py
    assert len(lines) == len(make_sample.TASKS) * 2 * make_sample.REPEATS == 24


def test_the_server_is_registered() -> None:
    assert gym_metrics.resolve_server("code_tests") is CodeTestsServer
