"""NeMo RL's door (issue 39 item 5): NeMo Gym's agent `POST /run` served beside the gRPC server
(`serve --agent-http-port`), each task row run as an episode of gym-metrics' agent loop against
a scripted vLLM-like policy and verified in its session, answered in simple_agent's shape, with
each turn's token IDs where NeMo RL reads them; driven as NeMo RL drives it (one POST per row)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import _ci
import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "collector"))
from test_collect_episodes import TOOLS, script  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import Counter  # noqa: E402

from gym_metrics.integrations import RolloutFailed
from gym_metrics.integrations.verl import agent_loop_output
from gym_metrics.recording import linearize
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import ScriptedPolicyServer, serve_environment
from gym_metrics.testing._tokens import prompt_text

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("http_extra")]


@pytest.fixture
def http_extra() -> None:
    _ci.need_module("uvicorn", "pip install 'gym-metrics[http]': the door is served by uvicorn")


def row(task: int, rollout: int) -> dict[str, Any]:
    prompt = f"Task {task}, rollout {rollout}: add {task} then {rollout + 1}"
    return {"responses_create_params": {"input": [{"role": "user", "content": prompt}], "tools": TOOLS},
            "_ng_task_index": task, "_ng_rollout_index": rollout, "initial_count": 10, "expected_count": 10 + task + rollout + 1}  # fmt: skip


def nemo_rl_sequence(result: dict[str, Any]) -> tuple[list[int], list[int]]:
    """What NeMo RL builds from a /run result: each token-bearing output item adds the unseen
    part of its prompt and its generation (written from the description of NeMo RL's
    `_postprocess_nemo_gym_to_nemo_rl_result`, independently of gym_metrics.recording)."""
    seen: list[int] = []
    mask: list[int] = []
    for item in result["response"]["output"]:
        if "generation_token_ids" not in item:
            continue
        assert seen == item["prompt_token_ids"][: len(seen)]
        user = item["prompt_token_ids"][len(seen) :]
        seen += [*user, *item["generation_token_ids"]]
        mask += [0] * len(user) + [1] * len(item["generation_token_ids"])
    return seen, mask


async def test_run_answers_each_row_as_simple_agent_does_with_its_tokens() -> None:
    with ScriptedPolicyServer(script) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="chat")
        async with serve_environment(Counter(), agent_http_port=0, agent_target=target, agent_capture_tokens=True) as server:
            base = f"http://127.0.0.1:{server.agent_http_port}"
            async with httpx.AsyncClient(timeout=30) as http:
                rows = [row(t, r) for t in range(4) for r in range(2)]
                answers = await asyncio.gather(*(http.post(f"{base}/run", json=r) for r in rows))
                health = await http.get(f"{base}/health")
                refused = await http.post(f"{base}/run", json={"no": "request"})
            assert len(server.handler.sessions.store) == 0  # every episode's session ended
    assert health.status_code == 200
    assert refused.status_code == 400 and "responses_create_params" in refused.json()["error"]
    for given, answer in zip(rows, answers):
        assert answer.status_code == 200, answer.text
        result = answer.json()
        steps = script(given["responses_create_params"]["input"][0]["content"])
        assert result["reward"] == (0.0 if given["_ng_task_index"] % 5 == 4 else 1.0)
        assert result["_ng_task_index"] == given["_ng_task_index"] and result["expected_count"] == given["expected_count"]
        carriers = [i for i in result["response"]["output"] if "generation_token_ids" in i]
        assert len(carriers) == len(steps)  # one token-bearing item per policy turn
        ids, mask = nemo_rl_sequence(result)
        sequence = linearize(result)
        assert (sequence.token_ids, sequence.loss_mask) == (ids, mask)  # gym-metrics' reading is NeMo RL's
        trajectory = result["ng_trajectory"]
        assert len(trajectory["turns"]) == len(steps) and trajectory["rollout_id"] == f"{given['_ng_task_index']}-{given['_ng_rollout_index']}"
        assert "gaps" not in result["ng_model_call_capture"]
        fields = agent_loop_output(result)  # verl's AgentLoopOutput, from the same answer
        cut = len(carriers[0]["prompt_token_ids"])
        assert fields["prompt_ids"] == ids[:cut] == list(prompt_text(given["responses_create_params"]["input"]).encode())
        assert (fields["response_ids"], fields["response_mask"]) == (ids[cut:], mask[cut:])
        assert [p for p, m in zip(fields["response_logprobs"], fields["response_mask"]) if m] == [p for c in carriers for p in c["generation_log_probs"]]
        tool_turns = sum(1 for step in steps if step.tool_calls)
        assert fields["reward_score"] == result["reward"] and fields["num_turns"] == 1 + len(steps) + tool_turns


async def test_the_door_needs_a_policy_and_the_bearer_token() -> None:
    from gym_metrics._transport.server import ServerConfig

    with pytest.raises(Exception, match="agent_target"):
        ServerConfig(agent_http_port=0)
    with ScriptedPolicyServer(script) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="chat")
        async with serve_environment(Counter(), agent_http_port=0, agent_target=target, auth_token="s3cret") as server:
            url = f"http://127.0.0.1:{server.agent_http_port}/run"
            async with httpx.AsyncClient(timeout=30) as http:
                assert (await http.post(url, json=row(0, 0))).status_code == 401
                ok = await http.post(url, json=row(0, 0), headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200 and ok.json()["reward"] == 1.0 and "ng_trajectory" not in ok.json()
    assert json.dumps(ok.json()).count("s3cret") == 0


async def test_an_environment_that_echoes_nothing_still_answers_its_trajectory() -> None:
    """gym-metrics' own environments answer only their fields (math_exact: reward, the extracted
    answer); `/run` answered just that, no `response`, so a trainer found no token IDs to train on."""
    from gym_metrics_servers.math_exact import MathExactServer

    given = {"responses_create_params": {"input": [{"role": "user", "content": "What is 2+2?"}]}, "expected_answer": "4"}
    with ScriptedPolicyServer({"What is 2+2?": "4"}) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="chat")
        async with serve_environment(MathExactServer(), agent_http_port=0, agent_target=target, agent_capture_tokens=True) as server:
            async with httpx.AsyncClient(timeout=30) as http:
                answer = (await http.post(f"http://127.0.0.1:{server.agent_http_port}/run", json=given)).json()
    assert answer["reward"] == 1.0 and answer["responses_create_params"] == given["responses_create_params"]
    (message,) = answer["response"]["output"]
    assert message["content"][0]["text"] == "4" and message["generation_token_ids"]
    assert agent_loop_output(answer)["response_ids"]  # what verl trains on


def test_serve_refuses_a_door_it_cannot_serve(capsys: pytest.CaptureFixture[str]) -> None:
    from gym_metrics.cli import main as cli_main

    policy = ["--policy-url", "http://127.0.0.1:1/v1", "--policy-model", "m"]
    assert cli_main(["serve", "math_exact", "--agent-http-port", "0", "--workers", "2", *policy]) == 2
    assert "--agent-http-port is served by one process" in capsys.readouterr().err
    assert cli_main(["serve", "math_exact", "--agent-http-port", "0"]) == 2
    assert "--agent-http-port needs a policy" in capsys.readouterr().err
    assert cli_main(["serve", "math_exact", "--capture-tokens"]) == 2
    assert "go with --agent-http-port" in capsys.readouterr().err


async def test_a_client_that_goes_away_stops_its_episode() -> None:
    with ScriptedPolicyServer(script, delay_s=0.5) as policy:  # each policy turn takes 0.5 s
        target = ModelTargetConfig(url=policy.url, model="scripted", api="chat")
        async with serve_environment(Counter(), agent_http_port=0, agent_target=target) as server:
            url = f"http://127.0.0.1:{server.agent_http_port}/run"
            async with httpx.AsyncClient(timeout=0.8) as http:
                with pytest.raises(httpx.ReadTimeout):
                    await http.post(url, json=row(1, 0))  # gone during its second turn
            for _ in range(50):
                if len(server.handler.sessions.store) == 0:
                    break
                await asyncio.sleep(0.05)
            assert len(server.handler.sessions.store) == 0  # its session closed at once
            await asyncio.sleep(1.2)  # a turn and more: an episode still running would ask again
            assert len(policy.requests) <= 2  # of its 3 turns, none asked after it went away


def test_an_answer_without_tokens_or_that_failed_is_no_agent_loop_output() -> None:
    plain = {"reward": 1.0, "response": {"output": [{"type": "message", "role": "assistant", "content": []}]}}
    with pytest.raises(RolloutFailed, match="no token IDs"):
        agent_loop_output(plain)
    with pytest.raises(RolloutFailed, match="failed: the policy broke"):
        agent_loop_output({**plain, "_gm_error": {"kind": "generation", "message": "the policy broke"}})


def test_serve_says_where_the_door_listens_when_it_picked_the_port(tmp_path: Path) -> None:
    """`--agent-http-port 0` picks a free port: the start line names it (it was found only with ss)."""
    import re
    import subprocess
    import time

    err = tmp_path / "serve.err"
    with ScriptedPolicyServer(script) as policy, open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", "serve", "tests/_tool_envs.py:Counter", "--port", "0", "--agent-http-port", "0",
                                 "--policy-url", policy.url, "--policy-model", "scripted", "--policy-api", "chat"],
                                cwd=Path(__file__).parents[2], stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
        try:
            deadline = time.monotonic() + 50
            while not (found := re.search(r"listening on .*agent /run on port (\d+)", err.read_text())):
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.05)
            answer = httpx.post(f"http://127.0.0.1:{found[1]}/run", json=row(0, 0), timeout=30)
            assert answer.status_code == 200 and answer.json()["reward"] == 1.0
        finally:
            proc.terminate()
            proc.wait(30)


class Strict(Counter):
    """Counter whose verify raises or stalls when the row asks."""

    async def verify(self, body: Any, session: Any = None) -> Any:  # type: ignore[override]
        mode = getattr(body, "model_extra", {}).get("mode")
        if mode == "raise":
            raise KeyError("answer")
        if mode == "slow":
            await asyncio.sleep(30)
        return await super().verify(body, session)


async def test_the_doors_verify_is_the_servers_its_timeout_and_its_error() -> None:
    """/run verified past `--verify-timeout` (a 30 s verify answered 200 after 30 s where the
    verify RPCs fail it at 2 s), and a verify that raised was a bare text 500 with a traceback
    in the log. Now the handler's verify: a 504 at the bound and a JSON 500 naming what raised;
    the sessions are closed either way."""
    with ScriptedPolicyServer(script) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="chat")
        async with serve_environment(Strict(), agent_http_port=0, agent_target=target, verify_timeout_s=1.0) as server:
            base = f"http://127.0.0.1:{server.agent_http_port}"
            async with httpx.AsyncClient(timeout=30) as http:
                started = asyncio.get_running_loop().time()
                slow = await http.post(f"{base}/run", json={**row(0, 0), "mode": "slow"})
                took = asyncio.get_running_loop().time() - started
                raised = await http.post(f"{base}/run", json={**row(0, 1), "mode": "raise"})
                fine = await http.post(f"{base}/run", json=row(1, 0))
            assert len(server.handler.sessions.store) == 0
    assert slow.status_code == 504 and slow.json() == {"error": "verify exceeded 1.0 s"} and took < 10
    assert raised.status_code == 500 and raised.json() == {"error": "verify raised KeyError: 'answer'"}
    assert fine.status_code == 200 and fine.json()["reward"] == 1.0
