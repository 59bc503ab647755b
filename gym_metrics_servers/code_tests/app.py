"""code_tests: Python programs a model wrote, scored against test cases in the sandbox.

The program is the last fenced Python code block of the response's output text. Each test runs
it once in gym_metrics.sandbox (its own user, limits, no network, a private directory): a
stdin/stdout test feeds `input` and compares what it prints with `output`, trailing whitespace
stripped per line; a function test calls `function(*args, **kwargs)` after the program ran and
compares the result with `expected` as JSON. The reward is 1.0 when every test passes, else
0.0; the response says per test why it stopped. A test the sandbox itself could not run fails
the verify (an error, never a silent 0).

NeMo Gym's code_gen rows (`verifier_metadata.unit_tests` in LiveCodeBench's shape: `inputs`,
`outputs`, `fn_name`) are read as the same tests.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer, register_server
from gym_metrics._util.aio import gather_all
from gym_metrics._util.jsonio import same_json
from gym_metrics.sandbox import Limits, Program, Provider, RunResult

SAMPLE_PATH = Path(__file__).with_name("sample.jsonl")
"""The shipped sample: 6 tasks x 2 agents' programs (right, wrong, slow, crashing ...)."""

MAX_TESTS = 1_000
DETAIL_BYTES = 400
"""How much of a failing test's stderr (or of its unexpected output) the response keeps."""

Status = Literal["ok", "wrong_answer", "timeout", "memory", "output_limit", "signal", "error"]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<code>.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)
_PYTHON = {"python", "py", "python3"}


class CodeTest(BaseModel):
    """One test: stdin/stdout (`input`, `output`), or a call (`function`, `args`, `kwargs`,
    `expected`)."""

    model_config = ConfigDict(extra="forbid")

    input: str = ""
    """What the program reads on stdin."""
    output: str | None = None
    """What it must print (trailing whitespace per line, and trailing blank lines, ignored)."""
    function: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
    """A function the program defines (`name`, or `Class.method` on a fresh instance, as
    LeetCode's `Solution.twoSum`), called after the program ran."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    expected: Any = None
    """The call's result, compared as JSON (tuples are lists)."""

    @model_validator(mode="after")
    def _one_form(self) -> CodeTest:
        if (self.output is None) == (self.function is None):
            raise ValueError("a test has either `output` (stdin/stdout) or `function` (a call), not both, not neither")
        return self


class CodeTestsVerifyRequest(BaseVerifyRequest):
    """The tests, and the limits of one run of the program."""

    tests: list[CodeTest] = Field(default_factory=list, max_length=MAX_TESTS)
    verifier_metadata: dict[str, Any] | None = None
    """NeMo Gym's code_gen form: `{"unit_tests": {"inputs": [...], "outputs": [...], "fn_name": ...}}`."""
    time_limit_s: float = Field(default=10.0, gt=0, le=300)
    """Wall time of one test's run (CPU time is held to the same, rounded up)."""
    memory_limit_mb: int = Field(default=1024, ge=64, le=16_384)

    @model_validator(mode="after")
    def _some_tests(self) -> CodeTestsVerifyRequest:
        if not self.tests:
            self.tests = tests_from_unit_tests((self.verifier_metadata or {}).get("unit_tests"))
        if not self.tests:
            raise ValueError("no tests: give `tests` (or NeMo Gym's `verifier_metadata.unit_tests`)")
        return self


class TestResult(BaseModel):
    status: Status
    wall_s: float
    detail: str = ""
    """Why it failed: the end of stderr, or the output that did not match."""
    isolated: bool = True
    """Whether its run was confined (False only under `--sandbox-isolation none`)."""


class CodeTestsVerifyResponse(BaseVerifyResponse):
    extracted_code: str | None = None
    """The program found in the response (None: no fenced code block, every test fails)."""
    tests_passed: int = 0
    tests_total: int = 0
    pass_rate: float = 0.0
    test_results: list[TestResult] = []
    isolated: bool = True
    """False when a test ran unconfined (the server was started with `--sandbox-isolation none`)."""


def tests_from_unit_tests(unit_tests: Any) -> list[CodeTest]:
    """LiveCodeBench's `{"inputs", "outputs", "fn_name"}` as tests: with `fn_name`, each input
    is the call's arguments, one JSON value per line, and each output the JSON result."""
    if not isinstance(unit_tests, dict):
        return []
    inputs, outputs, fn_name = unit_tests.get("inputs") or [], unit_tests.get("outputs") or [], unit_tests.get("fn_name")
    if len(inputs) != len(outputs):
        raise ValueError(f"unit_tests: {len(inputs)} inputs but {len(outputs)} outputs")
    if not fn_name:
        return [CodeTest(input=str(i), output=str(o)) for i, o in zip(inputs, outputs)]
    tests = []
    for n, (i, o) in enumerate(zip(inputs, outputs)):
        try:
            args = [json.loads(line) for line in str(i).splitlines() if line.strip()]
            expected = json.loads(o) if isinstance(o, str) else o
        except ValueError as exc:
            raise ValueError(f"unit_tests.inputs[{n}]: not JSON lines ({exc})") from None
        tests.append(CodeTest(function=f"Solution.{fn_name}" if "." not in fn_name else fn_name, args=args, expected=expected))
    return tests


def extract_code(text: str) -> str | None:
    """The last fenced code block labelled python (py, python3); else the last unlabelled one."""
    blocks = [(m["lang"].lower(), textwrap.dedent(m["code"])) for m in _FENCE.finditer(text)]  # a fence in a list item is indented
    python = [code for lang, code in blocks if lang in _PYTHON]
    plain = [code for lang, code in blocks if not lang]
    found = python or plain
    return found[-1] if found else None


def normalized(text: str) -> list[str]:
    """Lines with trailing whitespace stripped, trailing blank lines dropped."""
    return [line.rstrip() for line in text.rstrip().splitlines()]


_CALL_FILE = "__gm_call.json"
_CALL = """

def __gm_call():
    import json as __json, sys as __sys
    with open("__gm_call.json") as __f:
        __case = __json.load(__f)
    __owner, _, __name = __case["function"].rpartition(".")
    __fn = getattr(globals()[__owner](), __name) if __owner else globals()[__name]
    __result = __fn(*__case["args"], **__case["kwargs"])
    __sys.stdout.write("\\n__GM_RESULT__" + __json.dumps(__result))
__gm_call()
"""
_RESULT_MARK = "\n__GM_RESULT__"


def _status(test: CodeTest, run: RunResult) -> tuple[Status, str]:
    stderr = run.stderr.decode(errors="replace")[-DETAIL_BYTES:]
    if run.stop == "timeout" or run.stop == "cpu":
        return "timeout", ""
    if run.stop in ("memory", "output_limit"):
        return run.stop, stderr
    if run.stop == "signal":
        return "signal", f"signal {run.signal}"
    if run.exit_code != 0:
        return "error", stderr or f"exit code {run.exit_code}"
    out = run.stdout.decode(errors="replace")
    if test.function is None:
        ok = normalized(out) == normalized(test.output or "")
        return ("ok", "") if ok else ("wrong_answer", out[-DETAIL_BYTES:])
    _, mark, result = out.rpartition(_RESULT_MARK)
    if not mark:
        return "error", stderr or "the function was not called (the program exited first)"
    try:
        value = json.loads(result)
    except (ValueError, RecursionError):
        return "error", "the result is not JSON (or nests too deep)"
    expected = json.loads(json.dumps(test.expected))
    return ("ok", "") if same_json(value, expected) else ("wrong_answer", result[-DETAIL_BYTES:])



@register_server("code_tests")
class CodeTestsServer(SimpleResourcesServer):
    """Python programs against test cases, in the sandbox: reward 1.0 iff every test passes."""

    name = "code_tests"
    sample = SAMPLE_PATH
    reducers = ["pass@1", "mean_reward"]
    key_metrics = ["mean/reward", "mean/pass_rate", "pass@1"]

    def __init__(self, pool: Provider | None = None) -> None:
        """`pool`: what runs the programs (default: the provider the server was started with,
        `serve --sandbox-provider`, the local Pool unless said; made now, so a host that
        cannot isolate runs refuses to start the server)."""
        self.pool: Provider = pool if pool is not None else self.sandbox()

    async def aclose(self) -> None:
        """The server stops: a provider it was given goes too (its own `sandbox()` the server closes)."""
        await self.pool.aclose()

    async def run_test(self, code: str, test: CodeTest, limits: Limits) -> TestResult:
        if test.function is None:
            program = Program(python=code, stdin=test.input.encode())
        else:
            case = {"function": test.function, "args": test.args, "kwargs": test.kwargs}
            program = Program(python=code + _CALL, files={_CALL_FILE: json.dumps(case)})  # stdin stays the program's
        run = await self.pool.run(program, limits)
        status, detail = _status(test, run)
        return TestResult(status=status, wall_s=round(run.wall_s, 4), detail=detail, isolated=run.isolated)

    async def verify(self, body: CodeTestsVerifyRequest) -> CodeTestsVerifyResponse:
        code = extract_code(_text(body.response))
        total = len(body.tests)
        if code is None:
            isolated = getattr(self.pool, "isolated", getattr(self.pool, "isolation", "strict") != "none")  # what its runs would say
            return CodeTestsVerifyResponse(reward=0.0, tests_total=total, isolated=bool(isolated))
        cpu = max(1, int(-(-body.time_limit_s // 1)))
        limits = Limits(wall_s=body.time_limit_s, cpu_s=cpu, memory_mb=body.memory_limit_mb)
        # one test the sandbox cannot run cancels the others and fails the verify: no score from part of them
        results = await gather_all(*(self.run_test(code, test, limits) for test in body.tests))
        passed = sum(r.status == "ok" for r in results)
        return CodeTestsVerifyResponse(
            reward=1.0 if passed == total else 0.0, extracted_code=code, tests_passed=passed, tests_total=total,
            pass_rate=passed / total, test_results=list(results), isolated=all(r.isolated for r in results),
        )  # fmt: skip


def _text(response: Any) -> str:
    """The response's output text, one message per line (a fence closing one message stays a
    line of its own)."""
    if not isinstance(response, dict):
        return ""
    texts = []
    for item in response.get("output") or ():
        if isinstance(item, dict) and item.get("type", "message") == "message":
            content = item.get("content")
            parts = [{"type": "output_text", "text": content}] if isinstance(content, str) else content or []
            texts.append("".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "output_text"))
    return "\n".join(texts)
