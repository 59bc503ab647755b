"""A NeMo Gym-style environment written for the tests (the porting layer's features, one each)."""

from fastapi import FastAPI, Request
from pydantic import ConfigDict

from gym_metrics.nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from gym_metrics.nemo_gym.judge import JudgeError
from gym_metrics.nemo_gym.server_utils import SESSION_ID_KEY


class EchoConfig(BaseResourcesServerConfig):
    expected_suffix: str = ""
    bonus: float = 0.0


class EchoRequest(BaseVerifyRequest):
    expected_answer: str


class EchoResponse(BaseVerifyResponse):
    expected_answer: str
    answer: str
    session_seen: bool


class EchoServer(SimpleResourcesServer):
    config: EchoConfig
    posts: int = 0

    def model_post_init(self, context: object) -> None:
        self.posts = 1  # proves pydantic's hook ran

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/noop")(self.verify)
        return app

    async def verify(self, request: Request, body: EchoRequest) -> EchoResponse:
        answer = body.response.output_text
        if answer == "judge down":
            raise JudgeError("HTTP 503 from the judge")
        reward = float(answer == body.expected_answer + self.config.expected_suffix) + self.config.bonus
        return EchoResponse(
            **body.model_dump(), reward=reward, answer=answer, session_seen=bool(request.session.get(SESSION_ID_KEY))
        )
