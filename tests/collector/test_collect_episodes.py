"""The agent loop of `collect` under what the model and the servers get wrong: a tool the
environment does not have, arguments that are not JSON or do not fit, a tool that raises (each
answered to the model as an error output, the episode going on), `--max-steps`, and a replica
SIGKILLed mid-episode (its episodes start again on the other replica: the rollouts and the
metrics file equal a clean run's)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from test_collector_faults import Procs, free_port, start_server

from gym_metrics import ResourcesClient
from gym_metrics._transport.client import ServerUnavailableError
from gym_metrics.collector import CollectOptions, RetryPolicy, collect_async
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import Counter, Register  # noqa: E402

TOOLS = [
    {"type": "function", "name": "increment_counter", "parameters": {"type": "object", "properties": {"count": {"type": "integer"}}}},
    {"type": "function", "name": "get_counter_value", "parameters": {"type": "object", "properties": {}}},
]
PROMPT = re.compile(r"Task (\d+), rollout (\d+): add (\d+) then (\d+)")


def call(name: str, arguments: Any) -> PolicyAnswer:
    return PolicyAnswer(tool_calls=[{"name": name, "arguments": arguments}])


def script(prompt: str) -> list[Any]:
    """Two increments (in one turn on odd tasks), a read, then the answer; every fifth task
    adds one too many (reward 0)."""
    match = PROMPT.fullmatch(prompt)
    assert match, prompt
    task, a, b = int(match.group(1)), int(match.group(3)), int(match.group(4))
    b += task % 5 == 4
    increments = [{"name": "increment_counter", "arguments": {"count": n}} for n in (a, b)]
    turns = [PolicyAnswer(tool_calls=increments)] if task % 2 else [call("increment_counter", {"count": a}), call("increment_counter", {"count": b})]
    return [*turns, call("get_counter_value", {}), PolicyAnswer(text="Done.")]


def write_rows(path: Path, tasks: int, repeats: int) -> Path:
    with path.open("w") as f:
        for t in range(tasks):
            for r in range(repeats):
                request = {"input": [{"role": "user", "content": f"Task {t}, rollout {r}: add {t} then {r + 1}"}], "tools": TOOLS}
                row = {"agent_ref": {"name": "agent"}, "_ng_task_index": t, "_ng_rollout_index": r,
                       "responses_create_params": request, "initial_count": 10, "expected_count": 10 + t + r + 1}  # fmt: skip
                f.write(json.dumps(row) + "\n")
    return path


def target(policy: ScriptedPolicyServer, **more: Any) -> ModelTargetConfig:
    return ModelTargetConfig(url=policy.url, model="scripted", api="responses", **more)


async def test_what_the_model_gets_wrong_is_answered_and_the_episode_goes_on(tmp_path: Path) -> None:
    prompt = "Task 0, rollout 0: add 1 then 2"
    steps = [
        call("decrement_counter", {"count": 1}),  # no such tool
        call("increment_counter", "{not json"),  # not JSON
        call("increment_counter", {"count": "one"}),  # does not fit
        call("explode", {}),  # raises
        PolicyAnswer(tool_calls=[{"name": "increment_counter", "arguments": {"count": 3}}]),
        PolicyAnswer(text="Done."),
    ]
    rows = tmp_path / "rows.jsonl"
    row = {"agent_ref": {"name": "agent"}, "responses_create_params": {"input": prompt}, "initial_count": 0, "expected_count": 3}
    rows.write_text(json.dumps(row) + "\n")
    with ScriptedPolicyServer({prompt: steps}) as policy:
        async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
            result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target(policy)))
    [written] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    outputs = [item["output"] for item in written["response"]["output"] if item["type"] == "function_call_output"]
    assert "no tool 'decrement_counter'" in outputs[0] and "increment_counter" in outputs[0]
    assert outputs[1].startswith('{"error": "Invalid tool call arguments: JSONDecodeError(')
    assert "arguments.count" in outputs[2]
    assert "RuntimeError: the tool broke" in outputs[3]
    assert outputs[4] == '{"success":true}'
    assert (written["reward"], written["final_count"]) == (1.0, 3)
    assert (result.tool_calls, result.failed_tool_calls) == (5, 4)
    first = policy.requests[0].body  # the row's string input became a message; its tools were given
    assert first["input"] == [{"role": "user", "content": prompt}]
    assert [t["name"] for t in first["tools"]] == ["increment_counter", "get_counter_value", "explode"]


async def test_max_steps_ends_an_episode(tmp_path: Path) -> None:
    rows = write_rows(tmp_path / "rows.jsonl", tasks=2, repeats=1)
    with ScriptedPolicyServer(script) as policy:
        async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
            opts = CollectOptions(target=target(policy), max_steps=2)
            result = await collect_async(client, rows, tmp_path / "out.jsonl", opts)
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(policy.requests) == 4 and result.verified == 2  # two policy calls per episode
    by_task = {r["_ng_task_index"]: r for r in written}
    assert (by_task[0]["final_count"], by_task[1]["final_count"]) == (10 + 0 + 1, 10 + 1 + 1)
    # cut after the second turn's tool calls, before the answer (task 0 before its read too)
    assert all(r["response"]["output"][-1]["type"] == "function_call_output" for r in written)
    calls = {t: [i["name"] for i in r["response"]["output"] if i["type"] == "function_call"] for t, r in by_task.items()}
    assert calls == {0: ["increment_counter"] * 2, 1: ["increment_counter", "increment_counter", "get_counter_value"]}
    # why the loop stopped is in each row and counted (the reward stays verify's and the response
    # NeMo Gym's, whose simple_agent adds nothing to it)
    assert all(r["_gm_stop_reason"] == "max_steps" and not r["response"].get("metadata") for r in written)
    assert result.episodes_at_max_steps == 2
    from gym_metrics.cli._collect import report

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert report(result, 1.0) == 0
    assert "2 episodes stopped at their max_steps" in printed.getvalue()


async def test_an_episode_that_ends_by_itself_is_not_counted_as_stopped(tmp_path: Path) -> None:
    rows = write_rows(tmp_path / "rows.jsonl", tasks=2, repeats=1)
    with ScriptedPolicyServer(script) as policy:
        async with serve_environment(Counter()) as server, ResourcesClient(server.address) as client:
            result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target(policy), max_steps=10))
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert result.episodes_at_max_steps == 0 and result.verified == 2
    assert not any("_gm_stop_reason" in r for r in written)


@pytest.mark.parametrize("parallel", [False, True])
async def test_the_calls_of_one_turn_run_in_the_models_order(tmp_path: Path, parallel: bool) -> None:
    """NeMo Gym's simple_agent awaits each call of a turn before the next: a read after a write
    in the same turn reads what was written. Concurrent calls are an option (and read 0 here:
    the write is still sleeping)."""
    prompt = "write then read"
    steps = [
        PolicyAnswer(tool_calls=[{"name": "write", "arguments": {"x": 5}}, {"name": "read", "arguments": {}}]),
        PolicyAnswer(text="Done."),
    ]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"agent_ref": {"name": "agent"}, "responses_create_params": {"input": prompt}}) + "\n")
    with ScriptedPolicyServer({prompt: steps}) as policy:
        async with serve_environment(Register()) as server, ResourcesClient(server.address) as client:
            opts = CollectOptions(target=target(policy), parallel_tool_calls=parallel)
            await collect_async(client, rows, tmp_path / "out.jsonl", opts)
    [written] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    outputs = [item["output"] for item in written["response"]["output"] if item["type"] == "function_call_output"]
    assert outputs == ['{"ok":true}', '{"x":0}' if parallel else '{"x":5}']  # in the policy's order either way
    assert written["reward"] == 1.0


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_replica_killed_mid_episode_loses_nothing(tmp_path: Path) -> None:
    rows = write_rows(tmp_path / "rows.jsonl", tasks=30, repeats=4)
    clean, faulty = tmp_path / "clean.jsonl", tmp_path / "faulty.jsonl"
    procs = Procs()
    try:
        with ScriptedPolicyServer(script, delay_s=0.02) as policy:
            opts = CollectOptions(target=target(policy, max_concurrency=16), capture_model_calls=True)
            first, port_a = _serve(procs, tmp_path / "a.log")
            _, port_b = _serve(procs, tmp_path / "b.log")
            async with ResourcesClient(f"127.0.0.1:{port_b}") as only:
                await collect_async(only, rows, clean, opts)
            async with ResourcesClient(f"127.0.0.1:{port_a}") as a, ResourcesClient(f"127.0.0.1:{port_b}") as b:
                run = asyncio.ensure_future(collect_async([a, b], rows, faulty, opts))
                while not run.done() and _lines(faulty) < 20:
                    await asyncio.sleep(0.01)
                first.send_signal(signal.SIGKILL)  # episodes are in flight on it
                result = await run
    finally:
        procs.kill_all()
    assert result.episodes_retried >= 1 and result.generation_failed == 0
    (same, calls), (same_faulty, calls_faulty) = _rows_and_calls(clean), _rows_and_calls(faulty)
    assert same == same_faulty  # the rows but their model-call records (times, ids)
    assert calls == calls_faulty  # a retried episode keeps the calls of the attempt that finished
    metrics = [json.loads(p.with_name(f"{p.stem}_aggregate_metrics.json").read_bytes()) for p in (clean, faulty)]
    samples = [g["sample"] for agent in metrics[0] + metrics[1] for g in agent["group_level_metrics"]]
    assert samples and not any("ng_model_call_capture" in s for s in samples)  # the records stay in the rows
    assert metrics[0] == metrics[1]


def _rows_and_calls(path: Path) -> tuple[list[str], list[tuple[int, list[int | None]]]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    calls = sorted((len(r["ng_model_call_capture"]["calls"]), [c["status_code"] for c in r["ng_model_call_capture"]["calls"]]) for r in rows)
    return sorted(json.dumps({k: v for k, v in r.items() if k != "ng_model_call_capture"}, sort_keys=True) for r in rows), calls


def _serve(procs: Procs, log: Path) -> tuple[Any, int]:
    return start_server(procs, "Counter", 0, log, envs=Path(__file__).parents[1] / "_tool_envs.py")


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


async def test_an_episode_waiting_on_a_slow_policy_outlives_the_session_ttl(tmp_path: Path) -> None:
    """Its session is held by the stream: a policy slower than `session_ttl_s` between two
    calls no longer expires it (the episode was taken for a lost server, then the run failed)."""
    rows = write_rows(tmp_path / "rows.jsonl", tasks=2, repeats=1)
    out = tmp_path / "out.jsonl"
    with ScriptedPolicyServer(script, delay_s=0.6) as policy:
        async with serve_environment(Counter(), session_ttl_s=0.3) as server, ResourcesClient(server.address) as client:
            result = await collect_async(client, rows, out, CollectOptions(target=target(policy)))
    assert result.verified == 2 and _lines(out) == 2 and result.episodes_retried == 0


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_server_restarted_on_its_address_is_found_again_by_the_episodes(tmp_path: Path) -> None:
    """Episodes lost with their server start again after the retry policy's backoff, so a server
    back within seconds finishes the run (they restarted back to back and gave up in 0.2 s)."""
    rows = write_rows(tmp_path / "rows.jsonl", tasks=20, repeats=2)
    out = tmp_path / "out.jsonl"
    procs = Procs()
    port = free_port()
    try:
        with ScriptedPolicyServer(script, delay_s=0.02) as policy:
            server, _ = start_server(procs, "Counter", port, tmp_path / "a.log", envs=Path(__file__).parents[1] / "_tool_envs.py")
            async with ResourcesClient(f"127.0.0.1:{port}") as client:
                options = CollectOptions(target=target(policy, max_concurrency=8), retry=RetryPolicy(max_retries=40, base_s=0.2, max_s=1.0))  # ~20 s of waits
                run = asyncio.ensure_future(collect_async(client, rows, out, options))
                while not run.done() and _lines(out) < 5:
                    await asyncio.sleep(0.01)
                server.send_signal(signal.SIGKILL)
                server.wait()
                await asyncio.sleep(1.0)
                start_server(procs, "Counter", port, tmp_path / "a.log", envs=Path(__file__).parents[1] / "_tool_envs.py")
                result = await asyncio.wait_for(run, 90)
    finally:
        procs.kill_all()
    assert _lines(out) == 40 and result.verified == 40


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_with_no_replica_left_the_run_fails_and_says_so(tmp_path: Path) -> None:
    rows = write_rows(tmp_path / "rows.jsonl", tasks=30, repeats=4)
    out = tmp_path / "out.jsonl"
    procs = Procs()
    try:
        with ScriptedPolicyServer(script, delay_s=0.02) as policy:
            server, port = _serve(procs, tmp_path / "a.log")
            async with ResourcesClient(f"127.0.0.1:{port}") as client:
                options = CollectOptions(target=target(policy, max_concurrency=16), retry=RetryPolicy(max_retries=2, base_s=0.05))
                run = asyncio.ensure_future(collect_async(client, rows, out, options))
                while not run.done() and _lines(out) < 10:
                    await asyncio.sleep(0.01)
                server.send_signal(signal.SIGKILL)
                with pytest.raises(ServerUnavailableError, match="lost its server 3 times"):
                    await run
    finally:
        procs.kill_all()
    written = _lines(out)
    assert 10 <= written < 120  # what finished is kept (for --resume); nothing half-done is written
