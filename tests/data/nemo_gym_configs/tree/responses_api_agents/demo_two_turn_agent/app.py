"""A custom agent written as NeMo Gym's own agents are (critpt_agent's shape; ported by its
imports in the tests): turn 1 answers the row's prompt, turn 2 asks for the answer again in the
words of `turn2_template` with turn 1's text, both through the agent's own `/v1/responses`; the
second answer is verified, with the two turns' usage summed. A row with `fail: true` makes the
agent raise after its first turn (a failed /run); a row with `probe: NAME` also calls that tool
of its resources server (an unknown one answers 404) and keeps what it answered."""

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
        first = await self.server_client.post(server_name=self.config.name, url_path=path, json=body.responses_create_params, cookies=cookies)
        await raise_for_status(first)
        first_json = await get_response_json(first)
        if body.fail:
            raise ValueError(f"the row asked this agent to fail after turn 1 ({_text(first_json)!r})")
        probed: Any = None
        if body.probe:
            answer = await self.server_client.post(server_name=self.config.resources_server.name, url_path=f"/{body.probe}", json={"x": 1}, cookies=cookies)
            probed = {"status": answer.status, "body": await get_response_json(answer)}
        turn2 = list(body.responses_create_params.input) + [
            NeMoGymEasyInputMessage(role="assistant", content=_text(first_json)),
            NeMoGymEasyInputMessage(role="user", content=self.config.turn2_template.format(answer=_text(first_json))),
        ]
        second = await self.server_client.post(
            server_name=self.config.name, url_path=path, json=body.responses_create_params.model_copy(update={"input": turn2}), cookies=cookies
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
        return TwoTurnVerifyResponse.model_validate(out)


if __name__ == "__main__":
    TwoTurnAgent.run_webserver()
