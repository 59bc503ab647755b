"""NeMo RL's door: NeMo Gym's agent `POST /run` (its simple_agent's contract), answered by
gym-metrics' agent loop in the serving process (`serve ENV --agent-http-port P --policy-url URL
--policy-model M`), so NeMo RL's NeMo Gym integration can point at gym-metrics.

A task row in (`responses_create_params` and the row's other fields, as NeMo Gym's
`BaseRunRequest`); the episode run as simple_agent runs it: seed the row's session, call the
policy with the tools (the environment's, when the request names none), run each function call
in the session in the model's order, until the policy answers without calls (or `max_steps`:
the door's own, else what the environment's NeMo Gym config gives the row's agent), then verify
in the session (a one-call agent's row, ONE_CALL_AGENTS: one policy call verified, in a session
only where that agent seeds one); the verify response out, with the whole trajectory as its
`response` and, with `capture_tokens`, each turn's token IDs and log-probs on its last output
item (NeMo RL reads them there), `ng_model_call_capture` and `ng_trajectory`. What the model
gets wrong (an unknown tool, arguments that do not fit) is an error output it reads, as under
NeMo Gym; a policy that fails is an error of the call (NeMo Gym raises too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from gym_metrics.collector import ONE_CALL_AGENTS, SEEDING_AGENTS, run_episode
from gym_metrics.environments import EnvironmentHandler, Sessions, hook
from gym_metrics._transport.client import ToolOutput, for_agent, tool_caller
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym import NATIVE_AGENTS
from gym_metrics.recording import CAPTURE_KEY, TRAJECTORY_KEY, EpisodeTrace, capture_block, model_call_records, rollout_id_of, token_gaps, trajectory
from gym_metrics.targets import ModelTarget, capturing


@dataclass
class AgentRun:
    """`await AgentRun(handler, target).run(body)`: one `/run` (see the module docstring). Its
    verify is the server's (the handler's `--verify-timeout`, its counts, its error for code
    that raised), as at the verify RPCs."""

    handler: EnvironmentHandler
    target: ModelTarget
    max_steps: int | None = None
    capture_tokens: bool = False

    @property
    def sessions(self) -> Sessions:
        return self.handler.sessions

    async def run(self, body: Mapping[str, Any]) -> dict[str, Any]:
        request = body.get("responses_create_params")
        if not isinstance(request, Mapping):
            raise InvalidInputError("no request to run", [FieldViolation("responses_create_params", "missing: a Responses API request")])
        request = dict(request)
        env = self.sessions.env
        kind = self._of_agent("agent_types", body)
        if kind in ONE_CALL_AGENTS:
            return await self._one_call(body, request, seeds=kind in SEEDING_AGENTS)
        if kind is not None and kind not in NATIVE_AGENTS:  # simple_agent's loop would score another program
            why = f"NeMo Gym's {kind} runs its rows with its own code, which this door does not run (collect --benchmark does: docs/nemo-gym.md#agents)"
            raise InvalidInputError(f"agent {kind} is not run here", [FieldViolation("agent_ref.name", why)])
        tools = [spec.as_function_tool() for spec in hook(env, "tools")().values()]
        if not request.get("tools") and tools and not env.routes_tool_calls:  # a NeMo Gym app's rows keep theirs
            request["tools"] = tools
        session = await self.sessions.seed(orjson.dumps(dict(body)))
        verified = False
        trace = EpisodeTrace() if self.capture_tokens else None
        try:
            with capturing() as calls:
                caller = tool_caller(_InProcess(self.sessions), session.id, [t["name"] for t in tools], env.routes_tool_calls)
                limit = self.max_steps if self.max_steps is not None else self._of_agent("agent_max_steps", body)
                episode = await run_episode(self.target, request, caller, max_steps=limit, trace=trace)
            ran = {**body, "response": episode.response}
            _, response_json = await self.handler.verify(ran, session.id)  # closes the session...
            verified = True
        finally:
            if not verified:  # ...but not for a body it refused: no one will send it again
                await self.sessions.close(session.id)
        return self._recorded(orjson.loads(response_json), ran, trace, calls.exchanges)


    def _of_agent(self, key: str, body: Mapping[str, Any]) -> Any:
        """What the environment's NeMo Gym config gives the row's agent (`agent_ref.name`, else
        what all its agents share): its type (`agent_types`) or its `max_steps` (`agent_max_steps`)."""
        ref = body.get("agent_ref")
        return for_agent(self._info.get(key) or {}, str(ref.get("name", "")) if isinstance(ref, Mapping) else "")

    @cached_property
    def _info(self) -> dict[str, Any]:
        """The environment's server info (its schemas made once, not per /run)."""
        return dict(hook(self.sessions.env, "server_info")())

    async def _one_call(self, body: Mapping[str, Any], request: dict[str, Any], seeds: bool) -> dict[str, Any]:
        """A one-call agent's `/run`: the policy's answer verified, no tool run; in a session
        when the agent seeds one (non_executing_simple_agent), else without (tool_simulation_agent)."""
        trace = EpisodeTrace() if self.capture_tokens else None
        session = await self.sessions.seed(orjson.dumps(dict(body))) if seeds else None
        try:
            with capturing() as calls:
                episode = await run_episode(self.target, request, None, trace=trace)
            ran = {**body, "response": episode.response}
            if session is None:
                _, response_json = await self.handler.verify(ran)
            else:
                _, response_json = await self.handler.verify(ran, session.id)
                session = None
        finally:
            if session is not None:
                await self.sessions.close(session.id)
        return self._recorded(orjson.loads(response_json), ran, trace, calls.exchanges)

    def _recorded(self, result: dict[str, Any], ran: Mapping[str, Any], trace: EpisodeTrace | None, exchanges: Any) -> dict[str, Any]:
        """The verify response, with the request and the trajectory where it echoes neither (as
        NeMo Gym's verify responses always do: a trainer reads the token IDs from `response`),
        and, with `capture_tokens`, the capture and `ng_trajectory`."""
        missing = {key: ran[key] for key in ("responses_create_params", "response") if key not in result}
        if missing:
            result = {**missing, **result}
        if trace is not None:
            records = model_call_records(exchanges)
            result[CAPTURE_KEY] = capture_block(rollout_id_of(ran), records, gaps=token_gaps(exchanges))
            result[TRAJECTORY_KEY] = trajectory(trace, records, {**ran, **result}, rollout_id_of(ran))
        return result


class _InProcess:
    """The environment's sessions as the agent loop's tool caller calls a server's
    (transport.client.tool_caller: unknown names and bad arguments become outputs the model reads)."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    async def call_tool(self, session_id: str, name: str, arguments: Mapping[str, Any] | str | bytes) -> ToolOutput:
        given = arguments if isinstance(arguments, (str, bytes)) else orjson.dumps(dict(arguments))
        output, failed, status = await self.sessions.call_tool(session_id, name, given)
        return ToolOutput(output, failed, status)


__all__ = ["AgentRun"]
