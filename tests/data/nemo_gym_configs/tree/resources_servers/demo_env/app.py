"""A small environment for the composition tests, written as a NeMo Gym environment is (ported
by its imports in the tests): the reward is `reward_if_match` when the answer holds `expected`,
and verify's answer carries the config's `label` so a test sees which composed config served."""

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)


class DemoConfig(BaseResourcesServerConfig):
    reward_if_match: float = 1.0
    label: str = "unset"
    extra: dict = {}


class DemoVerifyRequest(BaseVerifyRequest):
    expected: str


class DemoVerifyResponse(BaseVerifyResponse):
    label: str


class DemoServer(SimpleResourcesServer):
    config: DemoConfig

    async def verify(self, body: DemoVerifyRequest) -> DemoVerifyResponse:
        text = "".join(
            part.text for item in body.response.output if item.type == "message" for part in item.content if part.type == "output_text"
        )
        reward = self.config.reward_if_match if body.expected in text else 0.0
        return DemoVerifyResponse(**body.model_dump(), reward=reward, label=self.config.label)


if __name__ == "__main__":
    DemoServer.run_webserver()
