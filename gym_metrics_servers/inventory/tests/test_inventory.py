"""inventory over a real gRPC server: tools change the session's state, a refused or malformed
call answers its error to the model, verify's reward follows the final state, and `collect`
runs the shipped sample as multi-step episodes of a scripted policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gym_metrics
from gym_metrics import InvalidInputError, ResourcesClient
from gym_metrics._transport.client import RemoteCallError
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import ScriptedPolicyServer, serve_environment
from gym_metrics_servers.inventory import make_sample
from gym_metrics_servers.inventory.scripted import SCRIPT
from gym_metrics_servers.inventory.app import SAMPLE_PATH, InventoryServer, trajectory_counts

TASK = {"initial_stock": {"chair": 4, "table": 1}, "goal_stock": {"chair": 0, "table": 1}, "goal_shipped": {"chair": 6}}


def _body(output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {**TASK, "responses_create_params": {"input": "Ship 6 chairs."}, "response": {"output": output or []}}


async def test_tools_change_the_session_and_verify_reads_it() -> None:
    async with serve_environment(InventoryServer()) as server, ResourcesClient(server.address) as client:
        info = await client.server_info()
        assert [t["name"] for t in info.tools] == ["list_stock", "receive_stock", "ship_order", "write_off"]
        assert info.tools[2]["parameters"]["required"] == ["item", "quantity"]
        session = await client.seed_session(TASK)
        assert json.loads((await client.call_tool(session, "receive_stock", {"item": "chair", "quantity": 2})).output) == {
            "item": "chair", "in_stock": 6,
        }  # fmt: skip
        shipped = await client.call_tool(session, "ship_order", {"item": "chair", "quantity": 6})
        assert not shipped.failed and json.loads(shipped.output) == {"item": "chair", "shipped": 6, "in_stock": 0}
        listed = json.loads((await client.call_tool(session, "list_stock", {})).output)
        assert listed == {"stock": {"chair": 0, "table": 1}, "shipped": {"chair": 6}}
        other = await client.seed_session(TASK)  # its own state: nothing done there
        verified = await client.verify(_body(), session_id=session)
        assert verified["reward"] == 1.0 and verified["goal_reached"] and verified["changes"] == 2
        assert verified["final_stock"] == {"chair": 0, "table": 1} and verified["units_off"] == 0
        missed = await client.verify(_body(), session_id=other)
        assert missed["reward"] == 0.0 and missed["units_off"] == 4 + 6 and missed["changes"] == 0
        assert len(server.handler.sessions.store) == 0  # verify ended both sessions


async def test_what_the_inventory_refuses_is_the_models_to_read() -> None:
    async with serve_environment(InventoryServer()) as server, ResourcesClient(server.address) as client:
        session = await client.seed_session(TASK)
        too_many = await client.call_tool(session, "ship_order", {"item": "chair", "quantity": 5})
        assert too_many.failed and json.loads(too_many.output) == {"error": "InventoryError: only 4 chair in stock, cannot take 5"}
        unknown = await client.call_tool(session, "write_off", {"item": "sofa", "quantity": 1, "reason": "broken"})
        assert unknown.failed and "no item 'sofa' in the catalogue (items: chair, table)" in unknown.output
        with pytest.raises(InvalidInputError, match="arguments_json.quantity"):  # the agent loop gives this to the model
            await client.call_tool(session, "receive_stock", {"item": "chair", "quantity": -2})
        with pytest.raises(InvalidInputError, match="arguments_json.reason"):
            await client.call_tool(session, "write_off", {"item": "chair", "quantity": 1})
        with pytest.raises(RemoteCallError, match="ship_order"):  # an unknown tool: NOT_FOUND listing them
            await client.call_tool(session, "restock", {})
        assert server.handler.sessions.tool_calls == {"error": 2}
        verified = await client.verify(_body(), session_id=session)  # nothing changed: the goal is missed
        assert verified["reward"] == 0.0 and verified["final_stock"] == TASK["initial_stock"]
        with pytest.raises(InvalidInputError, match="initial_stock"):
            await client.seed_session({**TASK, "initial_stock": {"chair": "four"}})
        with pytest.raises(InvalidInputError, match="session_id"):  # a rollout verified outside a session
            await client.verify(_body())


def test_the_trajectory_counts_calls_errors_and_turns() -> None:
    output = [
        {"type": "reasoning", "summary": []},
        {"type": "function_call", "name": "ship_order", "arguments": "{}", "call_id": "a"},
        {"type": "function_call", "name": "list_stock", "arguments": "{}", "call_id": "b"},
        {"type": "function_call_output", "call_id": "a", "output": '{"error": "bad"}'},
        {"type": "function_call_output", "call_id": "b", "output": '{"stock": {}}'},
        {"type": "function_call", "name": "list_stock", "arguments": "{}", "call_id": "c"},
        {"type": "function_call_output", "call_id": "c", "output": "not json"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]
    assert trajectory_counts({"output": output}) == (3, 1, 3)
    assert trajectory_counts({"output": []}) == (0, 0, 0) and trajectory_counts(None) == (0, 0, 0)


# ----------------------------------------------------------------------------- collect, end to end

EXPECTED = {  # id -> (reward, tool calls, tool errors, steps, units off)
    "ship": (1.0, 1, 0, 2, 0),
    "receive": (1.0, 2, 1, 3, 0),
    "write_off_then_ship": (1.0, 2, 0, 2, 0),
    "receive_before_ship": (0.0, 1, 1, 2, 10),
    "recount": (0.0, 1, 0, 2, 3),
    "ship_and_restock": (1.0, 4, 1, 4, 0),
    "expired_milk": (0.0, 3, 0, 4, 1),
    "ship_all_pens": (1.0, 2, 0, 3, 0),
}


async def test_collect_runs_the_sample_as_episodes(tmp_path: Path) -> None:
    with ScriptedPolicyServer(SCRIPT) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
        async with serve_environment(InventoryServer()) as server, ResourcesClient(server.address) as client:
            result = await collect_async(client, SAMPLE_PATH, tmp_path / "out.jsonl", CollectOptions(target=target))
            assert len(server.handler.sessions.store) == 0  # every episode's session ended
        assert sum(policy.calls.values()) == sum(len(steps) for steps in SCRIPT.values())
    rows = {row["id"]: row for row in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    got = {key: (r["reward"], r["tool_calls"], r["tool_errors"], r["steps"], r["units_off"]) for key, r in rows.items()}
    assert got == EXPECTED
    assert result.generated == 8 and result.tool_calls == 16 and result.failed_tool_calls == 3
    errors = [i["output"] for i in rows["receive"]["response"]["output"] if i["type"] == "function_call_output"]
    assert "arguments.quantity" in errors[0] and json.loads(errors[1]) == {"item": "bolt", "in_stock": 14}  # the model's word
    assert rows["expired_milk"]["final_stock"] == {"milk": 12} and rows["expired_milk"]["shipped"] == {"milk": 4}
    metrics = json.loads(result.metrics_path.read_text())
    [agent] = [m for m in metrics if m["agent_ref"]["name"] == "inventory_agent"]
    assert agent["agent_metrics"]["mean/reward"] == pytest.approx(5 / 8)
    assert agent["agent_metrics"]["pass@1"] == pytest.approx(5 / 8)
    assert agent["key_metrics"]["mean/tool_errors"] == pytest.approx(3 / 8)
    assert agent["key_metrics"]["mean/steps"] == pytest.approx(22 / 8)


def test_the_sample_is_up_to_date_and_the_server_is_registered() -> None:
    assert SAMPLE_PATH.read_text(encoding="utf-8") == make_sample.render()  # python gym_metrics_servers/inventory/make_sample.py
    assert {json.loads(line)["responses_create_params"]["input"][0]["content"] for line in SAMPLE_PATH.open()} == set(SCRIPT)
    assert gym_metrics.resolve_server("inventory") is InventoryServer
