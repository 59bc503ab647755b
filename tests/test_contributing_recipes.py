"""docs/contributing.md's recipes work as written (issue 38: a newcomer adds a tool
environment, a trainer adaptor and a sandbox provider from that page alone): each worked
example is taken from the page, run as a module, and used the way its recipe says, against
real servers on loopback."""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.environments import ENVIRONMENTS, resolve_server
from gym_metrics.errors import InvalidInputError
from gym_metrics.sandbox import OPTIONS_ENV, PROVIDER_ENV, PROVIDERS, Program
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment

pytestmark = pytest.mark.timeout(120)
PAGE = Path(__file__).resolve().parents[1] / "docs" / "contributing.md"
BLOCK = re.compile(r"^(?P<indent>[ \t]*)```python\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.MULTILINE | re.DOTALL)


def recipe(marker: str, tmp_path: Path) -> types.ModuleType:
    """The page's one python block holding `marker`, run as a module of its own."""
    blocks = [textwrap.dedent(m["body"]) for m in BLOCK.finditer(PAGE.read_text(encoding="utf-8"))]
    [code] = [b for b in blocks if marker in b]
    path = tmp_path / f"recipe_{abs(hash(marker))}.py"
    path.write_text(code, encoding="utf-8")
    module = types.ModuleType(path.stem)
    module.__file__ = str(path)
    exec(compile(code, str(path), "exec"), module.__dict__)
    return module


@pytest.fixture(autouse=True)
def _undo_registrations() -> Any:
    environments, providers = ENVIRONMENTS.snapshot(), PROVIDERS.snapshot()
    yield
    ENVIRONMENTS.restore(environments)
    PROVIDERS.restore(providers)


async def test_the_tool_environment_recipe_serves_and_scores_an_episode(tmp_path: Path) -> None:
    module = recipe('@register_server("piggy_bank")', tmp_path)
    assert resolve_server("piggy_bank") is module.PiggyBank
    task = {"start": 2, "goal": 7, "responses_create_params": {"input": [{"role": "user", "content": "Save 7 coins."}]}}
    async with serve_environment(module.PiggyBank()) as server, ResourcesClient(server.address) as client:
        session = await client.seed_session(task)
        assert json.loads((await client.call_tool(session, "deposit", {"amount": 5})).output) == {"coins": 7}
        with pytest.raises(InvalidInputError, match="arguments_json.amount: Input should be greater than 0"):
            await client.call_tool(session, "deposit", {"amount": -1})  # the arguments model's bound, named
        assert (await client.verify({**task, "response": {"output": []}}, session_id=session))["reward"] == 1.0

        script = {"Save 7 coins.": [PolicyAnswer(tool_calls=[{"name": "deposit", "arguments": {"amount": 3}}]),
                                    PolicyAnswer(tool_calls=[{"name": "count", "arguments": {}}]), PolicyAnswer(text="Done.")],
                  "Save 9 coins.": [PolicyAnswer(tool_calls=[{"name": "deposit", "arguments": {"amount": 3}}]), PolicyAnswer(text="Done.")]}  # fmt: skip
        rows = tmp_path / "tasks.jsonl"
        rows.write_text("\n".join(json.dumps(t) for t in (
            {**task, "start": 4, "agent_ref": {"name": "saver"}},
            {"start": 2, "goal": 9, "responses_create_params": {"input": [{"role": "user", "content": "Save 9 coins."}]}, "agent_ref": {"name": "saver"}},
        )) + "\n")  # fmt: skip
        with ScriptedPolicyServer(script) as policy:
            target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
            result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target))
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted(row["reward"] for row in out) == [0.0, 1.0]  # 4 + 3 = 7 reaches its goal; 2 + 3 != 9
    assert result.tool_calls == 3 and result.failed_tool_calls == 0


async def test_the_trainer_adaptor_recipe_groups_scores_and_settles(tmp_path: Path) -> None:
    module = recipe("def reward_function(server: str", tmp_path)
    with pytest.raises(ValueError, match="my trainer takes 'nan', 'zero', 'raise'"):
        module.reward_function("127.0.0.1:1", on_failure="none")
    async with serve_environment("math_exact") as server:
        score = module.reward_function(server.address)
        prompts = ["What is 2+2?"] * 3 + ["What is 3+3?"]
        completions = ["The answer is 4.", "5", "The answer is 4", "The answer is 6."]
        rewards = await asyncio.to_thread(score, prompts, completions, ["4", "4", "4", "6"])
    assert rewards == [1.0, 0.0, 1.0, 1.0]


async def test_the_sandbox_provider_recipe_runs_code_tests_and_closes_with_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe('@register_provider("audited")', tmp_path)
    log = tmp_path / "audit.jsonl"
    # as `serve code_tests --sandbox-provider audited --sandbox-option log=... --sandbox-option isolation=none`
    # would set them (isolation none: this test's host may have no bubblewrap; the audit is what is tested)
    monkeypatch.setenv(PROVIDER_ENV, "audited")
    monkeypatch.setenv(OPTIONS_ENV, json.dumps({"log": str(log), "isolation": "none"}))
    env = resolve_server("code_tests")()
    assert type(env.pool).__name__ == "AuditedProvider"
    sample = [json.loads(line) for line in Path(env.sample).read_text().splitlines()][:4]
    async with serve_environment(env) as server, ResourcesClient(server.address) as client:
        rewards = [(await client.verify(row))["reward"] for row in sample]
    assert 1.0 in rewards
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(entries) >= len(sample) and {"exit_code", "stop", "wall_s"} <= entries[0].keys()
    with pytest.raises(RuntimeError, match="the sandbox pool is closed"):  # closed with the server
        await env.pool.inner.run(Program(python="print(1)"))
