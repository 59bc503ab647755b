"""`serve --verify-timeout S` (ServerConfig.verify_timeout_s): a verify that never returns
fails its rollout as `timeout` after S seconds; without it the collect that sent it waited
forever (a real server on 127.0.0.1:0, the CLI's flag parsed as a user gives it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, ResourcesClient, SimpleResourcesServer
from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics.collector import collect_async

pytestmark = pytest.mark.timeout(60)


class Request(BaseVerifyRequest):
    stuck: bool = False


class Stuck(SimpleResourcesServer):
    async def verify(self, body: Request) -> BaseVerifyResponse:
        if body.stuck:
            await asyncio.Event().wait()  # never returns
        return BaseVerifyResponse(reward=1.0)


async def test_a_verify_that_never_returns_fails_as_timeout(tmp_path: Path) -> None:
    rows = tmp_path / "in.jsonl"
    rows.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": i, "_ng_rollout_index": 0,
                                        "responses_create_params": {"input": []}, "response": {"output": []}, "stuck": i == 1}) + "\n"
                            for i in range(3)))  # fmt: skip
    async with await start_server(Stuck(), ServerConfig(port=0, verify_timeout_s=0.3, log_requests=False)) as server:
        async with ResourcesClient(server.address) as client:
            result = await asyncio.wait_for(collect_async(client, rows, tmp_path / "out.jsonl"), 30)
    written = {r["_ng_task_index"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert written[1]["_gm_error"]["kind"] == "timeout" and "0.3 s" in written[1]["_gm_error"]["message"]
    assert written[0]["reward"] == written[2]["reward"] == 1.0 and result.verified == 3


def test_the_flag_reaches_the_servers_config(monkeypatch: pytest.MonkeyPatch) -> None:
    import gym_metrics._transport.server as server_module
    from gym_metrics.cli import main

    served: list[ServerConfig] = []
    monkeypatch.setattr(server_module, "serve", lambda env, config, **kw: served.append(config))
    assert main(["serve", "math_exact", "--port", "0", "--verify-timeout", "2.5"]) == 0
    assert main(["serve", "math_exact", "--port", "0"]) == 0
    assert [c.verify_timeout_s for c in served] == [2.5, None]
    assert main(["serve", "math_exact", "--verify-timeout", "0"]) == 2  # must be positive
