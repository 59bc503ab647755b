"""A custom agent written as NeMo Gym's own agents are (critpt_agent's shape; ported by its
imports in the tests): turn 1 answers the row's prompt, turn 2 asks for the answer again in the
words of `turn2_template` with turn 1's text, both through the agent's own `/v1/responses`; the
second answer is verified, with the two turns' usage summed. A row with `fail: true` makes the
agent raise after its first turn (a failed /run); a row with `probe: NAME` also calls that tool
of its resources server (an unknown one answers 404) and keeps what it answered.

While the run is observed (`observability_enabled`), it reports what it did as NeMo Gym's
observing agents do. A row's first rollout returns an observation bundle (`ng_agent_observations`):
turn 1 sent under session `root`, turn 2 under `critic` (a subagent of root), so the model
server's capture ties each call to its invocation; a compaction between them naming both by
response id; a `judge` invocation naming a call that was never made; the probe as a tool call
with its output in root's conversation. Its second rollout returns a trajectory of its own
(`ng_trajectory`), its task id its own ("demo", not NeMo Gym's)."""

import time

from typing import Any, Optional

from fastapi import Request, Response
from pydantic import ConfigDict

from nemo_gym.base_resources_server import BaseRunRequest, BaseVerifyResponse
from nemo_gym.base_responses_api_agent import BaseResponsesAPIAgentConfig, Body, SimpleResponsesAPIAgent
from nemo_gym.config_types import ModelServerRef, ResourcesServerRef
from nemo_gym.openai_utils import (
    NeMoGymEasyInputMessage,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
    NeMoGymResponseUsage,
    accumulate_response_usage,
)
from nemo_gym.rollout_correlation import maybe_rollout_id_from_run_body
from nemo_gym.rollout_observability import (
    AgentInvocation,
    AgentObservationBundle,
    ContextCompactionObservation,
    ModelCallRef,
    ObservationGap,
    ToolCallObservation,
    TrajectoryRecord,
    TrajectoryTurn,
)
from nemo_gym.server_utils import get_response_json, raise_for_status


class TwoTurnAgentConfig(BaseResponsesAPIAgentConfig):
    resources_server: ResourcesServerRef
    model_server: ModelServerRef
    turn2_template: str = "You said: {answer}. Your final answer, in one word?"


class TwoTurnRunRequest(BaseRunRequest):
    model_config = ConfigDict(extra="allow")
    fail: bool = False
    probe: Optional[str] = None


class TwoTurnVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")


def _text(response: dict) -> str:
    return "".join(
        part.get("text", "")
        for item in response.get("output", [])
        if item.get("type") == "message"
        for part in item.get("content", [])
        if part.get("type") == "output_text"
    )


class TwoTurnAgent(SimpleResponsesAPIAgent):
    config: TwoTurnAgentConfig

    async def responses(self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming = Body()) -> NeMoGymResponse:
        model_response = await self.server_client.post(
            server_name=self.config.model_server.name,
            url_path=self.url_path_for_request("/v1/responses", request),
            json=body,
            cookies=request.cookies,
            headers={k: v for k, v in request.headers.items() if k.lower() == "x-session-id"},
        )
        await raise_for_status(model_response)
        return NeMoGymResponse.model_validate(await get_response_json(model_response))

    async def run(self, request: Request, body: TwoTurnRunRequest) -> TwoTurnVerifyResponse:
        seeded = await self.server_client.post(
            server_name=self.config.resources_server.name, url_path="/seed_session", json=body.model_dump(), cookies=request.cookies
        )
        await raise_for_status(seeded)
        cookies = seeded.cookies
        path = self.url_path_for_run("/v1/responses", body)
        observed = self._model_call_capture_enabled()
        started = time.time()
        first = await self.server_client.post(
            server_name=self.config.name, url_path=path, json=body.responses_create_params, cookies=cookies, headers=_session(observed, "root")
        )
        await raise_for_status(first)
        first_json = await get_response_json(first)
        if body.fail:
            raise ValueError(f"the row asked this agent to fail after turn 1 ({_text(first_json)!r})")
        probed: Any = None
        probe_times = (0.0, 0.0)
        if body.probe:
            probe_started = time.time()
            answer = await self.server_client.post(server_name=self.config.resources_server.name, url_path=f"/{body.probe}", json={"x": 1}, cookies=cookies)
            probed = {"status": answer.status, "body": await get_response_json(answer)}
            probe_times = (probe_started, time.time())
        turn2 = list(body.responses_create_params.input) + [
            NeMoGymEasyInputMessage(role="assistant", content=_text(first_json)),
            NeMoGymEasyInputMessage(role="user", content=self.config.turn2_template.format(answer=_text(first_json))),
        ]
        second = await self.server_client.post(
            server_name=self.config.name, url_path=path, json=body.responses_create_params.model_copy(update={"input": turn2}), cookies=cookies,
            headers=_session(observed, "critic"),
        )
        await raise_for_status(second)
        second_json = await get_response_json(second)
        usage = accumulate_response_usage(
            NeMoGymResponseUsage.model_validate(first_json["usage"]), NeMoGymResponseUsage.model_validate(second_json["usage"])
        )
        second_json["usage"] = usage.model_dump()
        verified = await self.server_client.post(
            server_name=self.config.resources_server.name,
            url_path="/verify",
            json=body.model_dump() | {"response": second_json},
            cookies=cookies,
        )
        await raise_for_status(verified)
        out = await get_response_json(verified)
        if probed is not None:
            out["probed"] = probed
        if observed and body.model_dump().get("_ng_rollout_index") == 1:
            out["ng_trajectory"] = self._own_trajectory(body, turn2, first_json, started).model_dump(mode="json")
        elif observed:
            out["ng_agent_observations"] = self._observations(body, turn2, first_json, second_json, probed, probe_times, started).model_dump(mode="json")
        return TwoTurnVerifyResponse.model_validate(out)

    def _observations(self, body, turn2, first_json, second_json, probed, probe_times, started) -> AgentObservationBundle:
        by_response = ModelCallRef(model_ref=self.config.model_server, response_id=first_json["id"])
        conversation = list(body.responses_create_params.input) + [turn2[-2]]
        records: list[Any] = [
            AgentInvocation(invocation_id="root", status="completed", duration_ms=(time.time() - started) * 1000, conversation=conversation),
            AgentInvocation(invocation_id="critic", parent_invocation_id="root", status="completed", conversation=[turn2[-1]]),
            AgentInvocation(
                invocation_id="judge", parent_invocation_id="root", status="failed", error_type="not_run",
                model_calls=[ModelCallRef(model_ref=self.config.model_server, response_id="resp-never-made")],
            ),
            ContextCompactionObservation(
                invocation_id="root", observed_at=time.time(), trigger="demo", tokens_before=first_json["usage"]["total_tokens"],
                tokens_after=1, outcome="completed", summary=_text(first_json), before_model_call=by_response,
                after_model_call=ModelCallRef(model_ref=self.config.model_server, response_id=second_json["id"]),
            ),
        ]
        if probed is not None:
            conversation.append({"type": "function_call_output", "call_id": "probe-1", "output": str(probed["body"])})
            records[0] = records[0].model_copy(update={"conversation": conversation})
            records.append(ToolCallObservation(
                invocation_id="root", tool_call_id="probe-1", tool_name=body.probe, started_at=probe_times[0], completed_at=probe_times[1],
                duration_ms=(probe_times[1] - probe_times[0]) * 1000, timing_source="harness",
                status="completed" if probed["status"] == 200 else "failed", error_type=None if probed["status"] == 200 else f"http_{probed['status']}",
            ))
        return AgentObservationBundle(source="demo_two_turn_agent", records=records, gaps=[ObservationGap(code="demo_partial", invocation_id="critic")])

    def _own_trajectory(self, body, turn2, first_json, started) -> TrajectoryRecord:
        rollout_id = maybe_rollout_id_from_run_body(body) or "unknown"
        turn = TrajectoryTurn(
            invocation_id="root", task_id="demo", rollout_id=rollout_id, turn_no=1, timestamp=started, question=list(body.responses_create_params.input),
            answer=first_json["output"], step_count=0, model_calls=[ModelCallRef(model_ref=self.config.model_server, response_id=first_json["id"])],
        )
        invocation = AgentInvocation(invocation_id="root", status="completed", conversation=list(turn2))
        return TrajectoryRecord(task_id="demo", rollout_id=rollout_id, invocations=[invocation], turns=[turn], gaps=[ObservationGap(code="demo_own")])


def _session(observed: bool, invocation: str) -> dict:
    """The header that ties a model call to an invocation, when the run is observed."""
    return {"x-session-id": invocation} if observed else {}


if __name__ == "__main__":
    TwoTurnAgent.run_webserver()
