"""A ported environment's app reached over real HTTP, as NeMo Gym serves it and as environments'
own tests drive it (a FastAPI TestClient on `setup_webserver()`): `request.session` is a signed
cookie session with a `session_id` (a call without the cookie starts a new session, one with it
continues its own), a `/ng-rollout/<id>/` path prefix is taken off, `/aggregate_metrics` answers
NeMo Gym's request; and gym-metrics' own in-process calls keep their session in the scope,
never a cookie."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.testclient import TestClient
from pydantic import BaseModel

from gym_metrics.nemo_gym._asgi import post
from gym_metrics.nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ResourcesSeedSessionResponse,
    SimpleResourcesServer,
)
from gym_metrics.nemo_gym.rollout_correlation import current_rollout_id
from gym_metrics.nemo_gym.sandbox.access import SandboxAccess
from gym_metrics.nemo_gym.server_utils import SESSION_ID_KEY


class _Add(BaseModel):
    count: int


class _Counter(SimpleResourcesServer):
    """A per-session counter, as NeMo Gym's example_session_state_mgmt keeps one."""

    def model_post_init(self, context: Any) -> None:
        self.__dict__["counts"] = {}

    def setup_webserver(self) -> Any:
        app = super().setup_webserver()
        app.post("/add")(self.add)
        app.post("/value")(self.value)
        return app

    async def add(self, request: Request, body: _Add) -> dict[str, Any]:
        session = request.session[SESSION_ID_KEY]
        self.counts[session] = self.counts.get(session, 0) + body.count  # type: ignore[attr-defined]
        return {"rollout": current_rollout_id()}

    async def value(self, request: Request) -> dict[str, Any]:
        return {"count": self.counts.get(request.session[SESSION_ID_KEY], 0)}  # type: ignore[attr-defined]

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward=1.0)


def _server() -> _Counter:
    return _Counter(config=BaseResourcesServerConfig(host="127.0.0.1", port=0, entrypoint="", name="counter"))


def test_a_session_lives_in_a_signed_cookie_named_after_the_server() -> None:
    app = _server().setup_webserver()
    client = TestClient(app)  # keeps the cookies it is sent
    first = client.post("/value")
    cookie = first.cookies.get("_Counter___counter")
    assert first.json() == {"count": 0} and cookie
    client.post("/add", json={"count": 2})
    assert client.post("/value").json() == {"count": 2}
    assert TestClient(app).post("/value").json() == {"count": 0}  # no cookie: a session of its own
    again = TestClient(app, cookies={"_Counter___counter": cookie})
    assert again.post("/value").json() == {"count": 2}
    forged = TestClient(app, cookies={"_Counter___counter": cookie[:-4] + "AAAA"})
    assert forged.post("/value").json() == {"count": 0}  # a bad signature is no session


def test_a_rollout_prefix_is_taken_off_and_named_for_the_call() -> None:
    client = TestClient(_server().setup_webserver())
    assert client.post("/ng-rollout/4-2/add", json={"count": 1}).json() == {"rollout": "4-2"}
    assert client.post("/add", json={"count": 1}).json() == {"rollout": None}


def test_aggregate_metrics_answers_nemo_gym_s_request_over_http() -> None:
    rows = [{"_ng_task_index": t, "_ng_rollout_index": 0, "reward": float(t)} for t in range(2)]
    answer = TestClient(_server().setup_webserver()).post("/aggregate_metrics", json={"verify_responses": rows})
    assert answer.status_code == 200
    body = answer.json()
    assert body["agent_metrics"]["mean/reward"] == 0.5 and body["key_metrics"] == {"mean/reward": 0.5}
    assert [g["_ng_task_index"] for g in body["group_level_metrics"]] == [0, 1]


async def test_in_process_calls_keep_their_session_in_the_scope_not_a_cookie() -> None:
    app = _server().setup_webserver()
    session = {SESSION_ID_KEY: "s1"}
    assert (await post(app, "/add", b'{"count": 3}', session))[0] == 200
    status, text = await post(app, "/value", b"{}", session)
    assert (status, text) == (200, '{"count":3}')
    assert session == {SESSION_ID_KEY: "s1"}  # nothing added


def test_a_seed_answer_carries_typed_sandbox_access() -> None:
    access = {"connection": {"kind": "direct", "provider_config_ref": "docker", "descriptor": {"id": "x"}}, "workdir": "/app"}
    answer = ResourcesSeedSessionResponse(resources_session_id="s", sandbox_access=SandboxAccess.model_validate(access))
    assert answer.model_dump(mode="json")["sandbox_access"] == access
    tools = ResourcesSeedSessionResponse(resources_session_id="s", resources_tools={"server_name": "w", "headers": {"x": "y"}})
    assert tools.model_dump()["resources_tools"] == {"server_name": "w", "url_path": "/mcp", "transport": "http", "headers": {"x": "y"}}


def test_an_agent_s_app_keeps_its_session_in_its_own_cookie() -> None:
    from gym_metrics.nemo_gym.base_responses_api_agent import BaseResponsesAPIAgentConfig, SimpleResponsesAPIAgent

    class _Agent(SimpleResponsesAPIAgent):
        def setup_webserver(self) -> Any:
            app = super().setup_webserver()

            async def whoami(request: Request) -> dict[str, Any]:
                return {"session": request.session[SESSION_ID_KEY]}

            app.post("/whoami")(whoami)
            return app

    agent = _Agent(config=BaseResponsesAPIAgentConfig(host="127.0.0.1", port=0, entrypoint="", name="talker"))
    client = TestClient(agent.setup_webserver())
    first = client.post("/whoami")
    assert "_Agent___talker" in first.cookies
    assert client.post("/whoami").json() == first.json()  # the same session, from the cookie
