"""A NeMo Gym environment's own methods may be named like gym-metrics' hooks into it
(`route_tool_call`, `end_session`, `tools`, `open_session`, `server_info`, `run_step`): NeMo Gym
0.7.0's indirect_prompt_injection and conversational_tool_use_simulation name their catch-all
tool route `route_tool_call(tool_name, body, request)`, math_with_code and newton_bench a route
`end_session(request)`. gym-metrics must still call its own hooks (environments/_hooks.py), and
the environment's methods must still answer as its routes: here every hook name is taken by a
route, and a whole episode, ServerInfo and the end of the session work as with any other."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict

from gym_metrics import ResourcesClient
from gym_metrics.environments import hook
from gym_metrics.nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from gym_metrics.nemo_gym.base_resources_server import SimpleResourcesServer as NeMoGymServer
from gym_metrics.nemo_gym.server_utils import SESSION_ID_KEY
from gym_metrics.testing import serve_environment


class Anything(BaseModel):
    model_config = ConfigDict(extra="allow")


class Tally(BaseVerifyResponse):
    calls: list[str]


class HookNamed(NeMoGymServer):
    """Its routes are methods named as gym-metrics' hooks into a ported environment."""

    state: dict[str, list[str]] = {}
    ended: list[str] = []

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/end_session")(self.end_session)
        app.post("/tools")(self.tools)
        app.post("/open_session")(self.open_session)
        app.post("/server_info")(self.server_info)
        app.post("/run_step")(self.run_step)
        app.post("/{tool_name}")(self.route_tool_call)
        return app

    async def seed_session(self, request: Request, body: BaseSeedSessionRequest) -> BaseSeedSessionResponse:
        self.state[request.session[SESSION_ID_KEY]] = []
        return BaseSeedSessionResponse()

    async def route_tool_call(self, tool_name: str, body: Anything, request: Request) -> dict[str, Any]:
        calls = self.state[request.session[SESSION_ID_KEY]]
        calls.append(tool_name)
        return {"tool": tool_name, "args": body.model_dump(), "calls": len(calls)}

    async def end_session(self, request: Request) -> dict[str, str]:
        self.ended.append(request.session[SESSION_ID_KEY])
        return {"ended": "yes"}

    async def tools(self, request: Request) -> dict[str, str]:  # type: ignore[override]
        return {"tools": "a route"}

    async def open_session(self, request: Request) -> dict[str, str]:  # type: ignore[override]
        return {"open_session": "a route"}

    async def server_info(self, request: Request) -> dict[str, str]:  # type: ignore[override]
        return {"server_info": "a route"}

    async def run_step(self, request: Request) -> dict[str, str]:  # type: ignore[override]
        return {"run_step": "a route"}

    async def verify(self, request: Request, body: BaseVerifyRequest) -> Tally:
        calls = self.state.pop(request.session[SESSION_ID_KEY])
        return Tally(**body.model_dump(), reward=float(len(calls)), calls=calls)


RESPONSE = {"id": "r", "created_at": 0, "model": "m", "object": "response", "output": [], "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}


async def test_an_environment_whose_routes_share_the_hooks_names_runs_whole_episodes() -> None:
    env = HookNamed(config=BaseResourcesServerConfig(name="hook_named", host="127.0.0.1", port=0, entrypoint="app.py"))
    assert hook(env, "route_tool_call").__func__ is NeMoGymServer.route_tool_call  # the port's, not the route
    async with serve_environment(env) as running, ResourcesClient(running.address) as client:
        info = await client.server_info()
        assert info.name == "hook_named" and info.any_tool_name
        assert sorted(t["name"] for t in info.tools) == ["end_session", "open_session", "run_step", "server_info", "tools"]
        row = {"responses_create_params": {"input": "go"}}
        session = await client.seed_session(row)
        first = await client.call_tool(session, "lookup", '{"key": "a"}')
        second = await client.call_tool(session, "tools", "{}")
        assert (first.output, first.failed) == ('{"tool":"lookup","args":{"key":"a"},"calls":1}', False)
        assert second.output == '{"tools":"a route"}'  # a listed route answers its own name
        verified = await client.verify(row | {"response": RESPONSE}, session_id=session)
        assert verified["reward"] == 1.0 and verified["calls"] == ["lookup"]
        assert len(running.handler.sessions.store) == 0 and env.state == {}  # the session ended
        assert env.ended == []  # the environment's end_session route is not gym-metrics' end of a session
