"""The report of a real agent-loop collection (a tool environment served on 127.0.0.1:0, a
scripted policy): what `collect --report` writes shows each episode's calls beside the outputs
the environment answered, a failed tool's output marked, read from the rollouts file collect
wrote beside the metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pydantic

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, ResourcesClient, Session, SimpleResourcesServer, tool
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.report import build_report
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment


class Add(pydantic.BaseModel):
    count: int


class Request(BaseVerifyRequest):
    expected: int


class Tally(SimpleResourcesServer):
    """A counter per session, a tool that always fails, verify checks the count."""

    async def seed_session(self, session: Session) -> None:
        session.state["count"] = 0

    @tool
    async def add(self, args: Add, session: Session) -> dict[str, int]:
        """Add `count` to the counter."""
        session.state["count"] += args.count
        return {"count": session.state["count"]}

    @tool
    async def explode(self) -> str:
        """A tool that always fails."""
        raise RuntimeError("the tool <broke>")

    async def verify(self, body: Request, session: Session | None = None) -> BaseVerifyResponse:  # type: ignore[override]
        count = session.state["count"] if session is not None else -1
        return BaseVerifyResponse(**body.model_dump(), reward=float(count == body.expected))


def steps(prompt: str) -> list[Any]:
    n = int(prompt.split()[-1])
    return [PolicyAnswer(tool_calls=[{"name": "add", "arguments": {"count": n}}, {"name": "explode", "arguments": {}}]),
            PolicyAnswer(text=f"The count is {n}.")]  # fmt: skip


async def test_the_report_of_collected_episodes_shows_them(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(
        json.dumps({"agent_ref": {"name": "agent"}, "_ng_task_index": t, "_ng_rollout_index": r, "expected": t,
                    "responses_create_params": {"input": f"add {t}"}}) + "\n" for t in range(3) for r in range(2)))  # fmt: skip
    with ScriptedPolicyServer(steps) as policy:
        async with serve_environment(Tally()) as server, ResourcesClient(server.address) as client:
            target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
            result = await collect_async(client, rows, tmp_path / "run.jsonl", CollectOptions(target=target))
    assert Path(result.metrics_path) == tmp_path / "run_aggregate_metrics.json"
    html = build_report(result.metrics_path).read_text()  # what --report does
    section = re.search(r'<section id="rollouts".*?</section>', html, re.S).group(0)  # type: ignore[union-attr]
    assert "From run.jsonl:" in section and section.count('<details class="task"') == 3
    assert section.count('<details class="ro"') == 6 and section.count("1 failed") == 6
    assert '<span class="fn">add</span>' in section and '<pre>{\n  "count": 2\n}</pre>' in section
    assert '<div class="out"><div class="role">output</div><pre>{"count":2}</pre>' in section
    assert "the tool &lt;broke&gt;" in section and section.count('<span class="badge b-err">error</span>') == 6
    assert section.count('<div class="role">final answer</div><pre>The count is 2.</pre>') == 2
    assert section.count('<span class="badge b-hi">reward 1</span>') == 6
