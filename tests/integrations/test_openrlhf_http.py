"""`serve --http-port`: OpenRLHF's own remote reward-model client (openrlhf 0.11.2's
`SingleTurnAgentExecutor._fetch_rewards_via_http` in openrlhf/utils/agent.py, loaded from its wheel,
fetched with `pip download --no-deps` into .cache/) against the HTTP endpoint gets the same rewards
as the gRPC ScoreGroups door; the plain JSON group form, bounded bodies, the bearer token."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

import _ci
import httpx
import pytest

from gym_metrics import ResourcesClient
from gym_metrics.testing import serve_environment

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
WHEEL = "openrlhf-0.11.2-cp311-cp311-manylinux1_x86_64.whl"


def openrlhf_agent_module() -> Any:
    """openrlhf.utils.agent from the wheel, without the package's heavy __init__ (torch, ray):
    only its reward client is exercised, which needs aiohttp."""
    _ci.need_module("aiohttp", "pip install aiohttp: OpenRLHF's reward client uses it (in the dev extra)")
    wheel = ROOT / ".cache" / WHEEL
    if not wheel.is_file():
        wheel.parent.mkdir(exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.11",
             "openrlhf==0.11.2", "-d", str(wheel.parent)], check=True, timeout=600,
        )  # fmt: skip
    out = ROOT / ".cache" / "openrlhf-0.11.2"
    with zipfile.ZipFile(wheel) as z:
        for name in ("openrlhf/utils/agent.py", "openrlhf/utils/logging_utils.py"):
            member = next(m for m in z.namelist() if m.endswith(name))
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_bytes(z.read(member))
    for package in ("openrlhf", "openrlhf.utils"):  # empty packages: their __init__ imports torch
        module = types.ModuleType(package)
        module.__path__ = [str(out / package.replace(".", "/"))]
        sys.modules.setdefault(package, module)
    for name in ("openrlhf.utils.logging_utils", "openrlhf.utils.agent"):
        spec = importlib.util.spec_from_file_location(name, out / (name.replace(".", "/") + ".py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules["openrlhf.utils.agent"]


PROMPTS = ["<|user|>What is 2+2?<|assistant|>"] * 3 + ["<|user|>What is 3+3?<|assistant|>"] * 2
ANSWERS = ["The answer is 4.", "5", "Answer: 4", "6", "seven"]
LABELS = ["4"] * 3 + ["6"] * 2


async def test_openrlhfs_client_gets_the_grpc_rewards() -> None:
    agent = openrlhf_agent_module()
    queries = [p + a for p, a in zip(PROMPTS, ANSWERS)]
    async with serve_environment("math_exact", http_port=0) as server:
        executor = agent.SingleTurnAgentExecutor(remote_rm_url=[f"http://127.0.0.1:{server.http_port}/get_reward"] * 2)
        answers = await executor._fetch_rewards_via_http(queries, PROMPTS, LABELS)  # sharded over the two "servers"
        async with ResourcesClient(server.address) as client:
            groups = [({"expected_answer": "4", "responses_create_params": {"input": [{"role": "user", "content": PROMPTS[0]}]}}, ANSWERS[:3]),
                      ({"expected_answer": "6", "responses_create_params": {"input": [{"role": "user", "content": PROMPTS[3]}]}}, ANSWERS[3:])]  # fmt: skip
            grpc_rewards = [r for g in await client.score_groups(groups) for r in g.rewards]
    http_rewards = [r for a in answers for r in a["rewards"]]
    assert http_rewards == grpc_rewards == [1.0, 0.0, 1.0, 1.0, 0.0]
    assert all(a["scores"] == a["rewards"] and a["extra_logs"]["gm_failed"] == [0.0] * len(a["rewards"]) for a in answers)


async def test_queries_as_openrlhf_decodes_them_score_their_answer_and_unreadable_ones_fail_named() -> None:
    """OpenRLHF decodes prompt and generation with the special tokens kept: the query may start
    with a BOS token and ends with the model's end-of-sequence token (`<|im_end|>`, `</s>`, ...),
    which made right answers score 0 unflagged. A query that is not text, or lacks its prompt,
    was scored whole (prompt included): now it fails, named."""
    agent = openrlhf_agent_module()
    ends = ["<|im_end|>", "</s>", "<|eot_id|><|pad|><|pad|>", "<|endoftext|>\n"]
    queries = ["<s>" + PROMPTS[0] + ANSWERS[0] + ends[0], PROMPTS[1] + ANSWERS[2] + ends[1], PROMPTS[2] + "5" + ends[2], "What is 2+2? 4", PROMPTS[4] + "6" + ends[3]]
    async with serve_environment("math_exact", http_port=0) as server:
        executor = agent.SingleTurnAgentExecutor(remote_rm_url=f"http://127.0.0.1:{server.http_port}/get_reward")
        [answer] = await executor._fetch_rewards_via_http(queries, PROMPTS, LABELS)
        async with httpx.AsyncClient(timeout=10) as http:
            raw = (await http.post(f"http://127.0.0.1:{server.http_port}/get_reward", json={"query": [7], "prompts": ["p"], "labels": ["4"]})).json()
    assert answer["rewards"] == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert answer["extra_logs"]["gm_failed"] == [0.0, 0.0, 0.0, 1.0, 0.0]
    assert "does not hold its prompt" in answer["gm_errors"][3]
    assert raw["extra_logs"]["gm_failed"] == [1.0] and "the query is int, not text" in raw["gm_errors"][0]


async def test_a_failure_reason_is_logged_by_the_server_once_a_period(caplog: pytest.LogCaptureFixture) -> None:
    async with serve_environment("math_exact", http_port=0) as server, httpx.AsyncClient(timeout=10) as http:
        body = {"query": ["q4", "q5"], "prompts": ["q", "q"], "labels": [None, "5"]}
        with caplog.at_level(logging.WARNING, logger="gym_metrics.integrations"):
            for _ in range(3):
                answer = (await http.post(f"http://127.0.0.1:{server.http_port}/get_reward", json=body)).json()
                assert answer["extra_logs"]["gm_failed"] == [1.0, 0.0] and answer["gm_errors"][1] is None
    lines = [r.getMessage() for r in caplog.records if r.name == "gym_metrics.integrations"]
    assert len(lines) == 1 and lines[0].startswith("POST /get_reward: 1 of 2 completions could not be scored") and "expected_answer" in lines[0]


async def test_the_group_form_failures_limits_and_token() -> None:
    async with serve_environment("math_exact", http_port=0, auth_token="s3cret-token", max_message_bytes=4096) as server:
        url = f"http://127.0.0.1:{server.http_port}"
        auth = {"Authorization": "Bearer s3cret-token"}
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(f"{url}/health")).status_code == 200
            refused = await http.post(f"{url}/score_groups", json={"groups": []})
            assert refused.status_code == 401
            body = {"groups": [{"row": {"expected_answer": "4"}, "completions": ["4", "3"]}, {"row": {}, "completions": ["4"]}]}
            answer = (await http.post(f"{url}/score_groups", json=body, headers=auth)).json()
            [good, bad] = answer["groups"]
            assert good["rewards"] == [1.0, 0.0] and good["failed"] == [False, False] and good["responses"][0]["reward"] == 1.0
            assert bad["failed"] == [True] and bad["error_kind"] == ["invalid_request"] and "expected_answer" in bad["error_message"][0]
            unscored = (await http.post(f"{url}/get_reward", json={"query": ["q4"], "prompts": ["q"], "labels": [None]}, headers=auth)).json()
            assert unscored["rewards"] == [0.0] and unscored["extra_logs"]["gm_failed"] == [1.0]  # marked, never silent
            assert "expected_answer" in unscored["gm_errors"][0]  # and why, beside the numbers OpenRLHF averages
            too_big = await http.post(f"{url}/get_reward", content=b"x" * 5000, headers={**auth, "content-type": "application/json"})
            assert too_big.status_code == 413 and "max-message-mb" in too_big.json()["error"]
            misspelt = await http.post(f"{url}/score_groups", json={"groups": [{"rows": {"expected_answer": "4"}, "completions": ["4"]}]}, headers=auth)
            assert misspelt.status_code == 400 and "groups[0] has 'rows': a group is {row, completions}" in misspelt.json()["error"]
            mismatched = await http.post(f"{url}/get_reward", json={"query": ["a", "b"], "prompts": ["a"]}, headers=auth)
            assert mismatched.status_code == 400 and "prompts" in mismatched.json()["error"]
            assert (await http.post(f"{url}/nope", json={}, headers=auth)).status_code == 404


async def test_a_query_without_its_prompt_fails_named_and_a_query_that_is_no_list_is_refused() -> None:
    """Without `prompts` (older OpenRLHF clients, a null or empty entry) the completion cannot
    be told from the prompt: it was scored whole, so an answer in the prompt scored 1. Each
    such query now fails, named; a `query` that is no list is a 400 (it was a 500 and a
    traceback)."""
    query = "Put the answer in \\boxed{}: 3 + 4 = \\boxed{7}? I do not know."
    async with serve_environment("math_exact", http_port=0) as server, httpx.AsyncClient(timeout=10) as http:
        url = f"http://127.0.0.1:{server.http_port}/get_reward"
        answers = [(await http.post(url, json={"query": [query], **prompts, "labels": ["7"]})).json()
                   for prompts in ({}, {"prompts": [None]}, {"prompts": [""]})]  # fmt: skip
        bad = [await http.post(url, json={"query": value, "labels": []}) for value in (5, True, "q")]
        health = await http.get(f"http://127.0.0.1:{server.http_port}/health")
    for answer in answers:
        assert answer["rewards"] == [0.0] and answer["extra_logs"]["gm_failed"] == [1.0], answer
        assert "no prompt beside the query" in answer["gm_errors"][0]
    for response, kind in zip(bad, ("int", "bool", "str")):
        assert response.status_code == 400 and response.json() == {"error": f"`query` must be a list (got {kind})"}
    assert health.status_code == 200
