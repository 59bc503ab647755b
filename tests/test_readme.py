"""The README's examples run as written (issue 9.13).

Fenced blocks whose info string is `python runnable` are executed, each in a fresh module;
the environment example is then served on 127.0.0.1:0 and verifies rows of the math_exact
sample over gRPC. The `json input-row` / `json output-row` blocks must be what that
environment really reads and writes. Other blocks (CLI synopses, fragments) are not run.
Registration (`@register_server("my_math")`) goes to a copy of the registry, dropped after
each test, so no name leaks into other tests.
"""

from __future__ import annotations

import json
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.environments import ENVIRONMENTS, resolve_server
from gym_metrics._transport.client import ResourcesClient
from gym_metrics.collector._rows import written_row
from gym_metrics.nemo_gym import RELAY_TYPE, EnvironmentServer, relay_name
from gym_metrics.environments import SimpleResourcesServer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SAMPLE = ROOT / "gym_metrics_servers" / "math_exact" / "sample.jsonl"
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)

pytestmark = pytest.mark.timeout(60)


def blocks(info: str) -> list[str]:
    """Bodies of the README's fenced blocks whose info string is exactly `info`."""
    return [m["body"] for m in FENCE.finditer(README.read_text(encoding="utf-8")) if m["info"].strip() == info]


def run_block(source: str, name: str, patch: pytest.MonkeyPatch) -> types.ModuleType:
    """Execute one block as the body of a new module `name`, in sys.modules (so pydantic and
    typing resolve its names as for a real file) until `patch` is undone."""
    module = types.ModuleType(name)
    module.__file__ = str(README)
    patch.setitem(sys.modules, name, module)
    exec(compile(source, f"{README}:{name}", "exec"), module.__dict__)
    return module


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The server registry as it was, restored (with sys.modules) after the test."""
    before = ENVIRONMENTS.snapshot()
    yield monkeypatch
    ENVIRONMENTS.restore(before)


def example_env(module: types.ModuleType) -> type[SimpleResourcesServer]:
    """The one environment class the README example defines."""
    found = [
        obj for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, SimpleResourcesServer) and obj.__module__ == module.__name__
    ]
    assert len(found) == 1, found
    return found[0]


def sample_row(agent: str, task: int, rollout: int) -> dict[str, Any]:
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if (row["agent_ref"]["name"], row["_ng_task_index"], row["_ng_rollout_index"]) == (agent, task, rollout):
            return row
    raise LookupError((agent, task, rollout))


def test_the_runnable_blocks_are_marked() -> None:
    # Dropping the marker would silently skip the example: the environment one must be there.
    runnable = blocks("python runnable")
    assert len(runnable) >= 1 and any("SimpleResourcesServer" in b for b in runnable)
    assert len(blocks("json input-row")) == 1 and len(blocks("json output-row")) == 1


@pytest.mark.parametrize("index", range(len(blocks("python runnable"))))
def test_each_runnable_block_runs(index: int, isolated: pytest.MonkeyPatch) -> None:
    run_block(blocks("python runnable")[index], f"readme_block_{index}", isolated)


def test_the_example_leaves_no_registration_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    before = ENVIRONMENTS.snapshot()
    try:
        with monkeypatch.context() as patch:
            module = run_block(env_block(), "readme_env", patch)
            assert resolve_server("my_math") is example_env(module)
    finally:
        ENVIRONMENTS.restore(before)
    assert ENVIRONMENTS.snapshot() == before and "my_math" not in ENVIRONMENTS.names()
    assert "readme_env" not in sys.modules


def env_block() -> str:
    return next(b for b in blocks("python runnable") if "SimpleResourcesServer" in b)


async def test_the_environment_example_verifies_the_sample_over_grpc(serve_env: Any, isolated: pytest.MonkeyPatch) -> None:
    env = example_env(run_block(env_block(), "readme_env", isolated))()
    correct = sample_row("strong_agent", 0, 0)  # "... \\boxed{42}", expected 42
    wrong = sample_row("medium_agent", 0, 1)  # "**Answer:** 52"
    silent = sample_row("weak_agent", 0, 0)  # no answer at all
    port, _ = await serve_env(env)
    async with ResourcesClient(f"127.0.0.1:{port}") as client:
        results = [await client.verify(row) for row in (correct, wrong, silent)]
    assert [r["reward"] for r in results] == [1.0, 0.0, 0.0]
    assert [r["extracted_answer"] for r in results] == ["42", "52", None]
    assert [r["is_correct"] for r in results] == [True, False, False]
    metrics = env.compute_metrics([[results[0], results[1]], [results[2]]])
    assert metrics == {"pass@2": 0.5, "pass@1": 0.5}
    assert env.get_key_metrics({**metrics, "mean/reward": 0.25, "other": 1.0}) == {**metrics, "mean/reward": 0.25}


async def test_the_documented_rows_are_real(serve_env: Any, isolated: pytest.MonkeyPatch) -> None:
    input_row = json.loads(blocks("json input-row")[0])
    output_row = json.loads(blocks("json output-row")[0])
    assert input_row == json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[0])
    port, _ = await serve_env(example_env(run_block(env_block(), "readme_env", isolated))())
    async with ResourcesClient(f"127.0.0.1:{port}") as client:
        verified = await client.verify(input_row)
    written = written_row(input_row, verified, EnvironmentServer(relay_name("strong_agent", "simple_agent"), RELAY_TYPE))
    assert output_row == written  # what collect writes (collector/_rows.py)
    assert list(output_row) == list(written)  # in its order too


def test_the_readme_fits_on_a_screen_or_two() -> None:
    """Issue 38: what it is, the two commands, one environment, where to read next; the full
    synopsis lives in docs/commands.md."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 220
