"""Rows of a NeMo Gym agent whose own code runs them (a ported `responses_api_agents/<impl>`,
gym_metrics.nemo_gym.load_agents): the agent's calls to its resources server reach the row's
session there (`SessionRoutes`), and a row of an agent collect cannot run as NeMo Gym runs it
stops the run (`refuse_unrunnable`) instead of running simple_agent's loop in its place. Its
answer gets the evidence NeMo Gym's collection adds (`with_evidence`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from gym_metrics._transport.client import RemoteCallError, SessionStream
from gym_metrics.collector._capture import Capture
from gym_metrics.collector._input import Rollout
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym import NATIVE_AGENTS
from gym_metrics.recording import CAPTURE_KEY, PERF_KEY, TRAJECTORY_KEY, rollout_perf
from gym_metrics.targets import ModelTarget


class AgentCode(Protocol):
    """A ported agent (nemo_gym.AgentProgram): its `/run` of a row, as (reward, answer JSON)."""

    async def run(self, row: Mapping[str, Any], routes: Any, target: ModelTarget, observed: bool = False) -> tuple[float, str]: ...


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


def with_evidence(answer: dict[str, Any], rollout: Rollout, records: list[dict[str, Any]], capture: Capture | None, latency_ms: float) -> bool:
    """Add to a ported agent's `/run` answer what NeMo Gym's collection adds (True when it
    changed): the captured model calls (`ng_model_call_capture`, the agent's observations joined
    to them), unless the rollout did not run; `ng_trajectory` projected from the agent's own
    trajectory and observations and the calls, whenever the agent gave either (as NeMo Gym always
    projects them) or with `--trajectory`; then `ng_perf` with `--trajectory` (`latency_ms`: its
    `/run`, as NeMo Gym times it)."""
    from gym_metrics.nemo_gym.rollout_collection import (  # (NeMo Gym's models need openai: imported for its agents only)
        NG_FAILURE_CLASS_KEY,
        NO_RESULT_FAILURE_CLASSES,
        OBSERVATIONS_KEY,
        attach_trajectory_record,
        merge_model_call_capture,
    )

    block = (rollout.recorded or {}).pop(CAPTURE_KEY, None)
    if answer.get(NG_FAILURE_CLASS_KEY) in NO_RESULT_FAILURE_CLASSES:
        block = None
    traced = capture is not None and capture.trajectory
    project = OBSERVATIONS_KEY in answer or TRAJECTORY_KEY in answer or (block is not None and traced)
    if block is not None:  # (`records`: payloads in, as NeMo Gym's model server records them)
        merge_model_call_capture(answer, {**block, "calls": records} if project or (capture is not None and capture.payloads) else block)
    if project:
        attach_trajectory_record(rollout.row, answer, keep_payloads=capture is not None and capture.payloads)
    if traced and isinstance(answer.get(TRAJECTORY_KEY), dict):
        perf = rollout_perf(answer[TRAJECTORY_KEY], latency_ms)
        if perf is not None:
            answer[PERF_KEY] = perf
    return block is not None or project
