"""Rows of a NeMo Gym agent whose own code runs them (a ported `responses_api_agents/<impl>`,
gym_metrics.nemo_gym.load_agents): the agent's calls to its resources server reach the row's
session there (`SessionRoutes`), and a row of an agent collect cannot run as NeMo Gym runs it
stops the run (`refuse_unrunnable`) instead of running simple_agent's loop in its place."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from gym_metrics._transport.client import RemoteCallError, SessionStream
from gym_metrics.collector._input import Rollout
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym import NATIVE_AGENTS
from gym_metrics.targets import ModelTarget


class AgentCode(Protocol):
    """A ported agent (nemo_gym.AgentProgram): its `/run` of a row, as (reward, answer JSON)."""

    async def run(self, row: Mapping[str, Any], routes: Any, target: ModelTarget) -> tuple[float, str]: ...


class SessionRoutes:
    """A resources server's routes as the agent's code POSTs them, over one row's session:
    `/seed_session` opens it, `/verify` verifies in it (which ends it), any other path calls
    that tool in it. Each answers (status, body) as NeMo Gym's server would: a row the server
    refuses 422, an environment's code that raised 500 (its message), a tool route its own
    status; a server that failed raises (the episode starts again)."""

    def __init__(self, calls: SessionStream) -> None:
        self.calls, self.session = calls, ""

    async def post(self, path: str, body: Any) -> tuple[int, str]:
        try:
            if path == "/seed_session":
                self.session = await self.calls.seed_session(body)
                return 200, "{}"
            if path == "/verify":
                _, text = await self.calls.verify_text(body, session_id=self.session)
                self.session = ""
                return 200, text
            if not self.session:
                return 409, _detail(f"{path}: no session (the agent calls /seed_session first)")
            answer = await self.calls.call_tool(self.session, path.lstrip("/"), body if body is not None else {})
        except InvalidInputError as exc:
            return 422, _detail(str(exc))
        except RemoteCallError as exc:
            return 500, _detail(exc.details)
        return answer.status or (500 if answer.failed else 200), answer.output


def _detail(message: str) -> str:
    return json.dumps({"detail": message}, ensure_ascii=False)


def refuse_unrunnable(rollout: Rollout, kind: str | None) -> None:
    """InvalidInputError (the run stops) for a rollout whose agent is a NeMo Gym agent collect
    neither runs itself nor has the code of: running simple_agent's loop instead would score
    another program."""
    if kind is None or kind in NATIVE_AGENTS:
        return
    where = f"input line {rollout.line}: " if rollout.line else ""
    why = (f"{where}agent {rollout.agent!r} is NeMo Gym's {kind}, whose own code runs its rows; collect runs it with "
           f"--agent-code CONFIG.yaml (or --benchmark CONFIG.yaml), its code ported into that config's tree "
           f"(responses_api_agents/{kind}): docs/nemo-gym.md#agents")  # fmt: skip
    raise InvalidInputError(f"agent {rollout.agent} ({kind}) is not run here", [FieldViolation("agent_ref.name", why)])
