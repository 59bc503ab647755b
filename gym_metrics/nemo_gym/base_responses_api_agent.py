"""NeMo Gym's agent-server surface, for its own agents (`responses_api_agents/<agent>/app.py`)
ported by the same rule as environments (`nemo_gym` -> `gym_metrics.nemo_gym` in the imports):
`BaseResponsesAPIAgentConfig`, `SimpleResponsesAPIAgent` (a pydantic model with `config` and
`server_client`, whose `setup_webserver` builds the FastAPI app NeMo Gym serves: `/v1/responses`
and its rollout-prefixed twins, `/run`, `/aggregate_metrics`), and `Body`.

`collect` runs such an agent's `/run` through that app, in its own process, for each row of the
agent (gym_metrics/nemo_gym/_agents.py): the agent's `server_client` reaches the policy for its
model server, the agent itself for its own name, and the row's session on the resources server
for the resources server's name. While collect records a run's evidence, the config says
`observability_enabled`, and what the agent reports of itself (`ng_agent_observations`,
`ng_trajectory`: gym_metrics.nemo_gym.rollout_observability) is projected as NeMo Gym projects
it. Agent sessions (`/v1/agent_sessions`, the sandboxed harnesses') are not ported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Optional

from fastapi import Body
from pydantic import BaseModel, ConfigDict, Field

from gym_metrics.nemo_gym.config_types import AggregateMetrics, AggregateMetricsRequest, BaseRunServerInstanceConfig
from gym_metrics.nemo_gym._cookie_session import install as install_cookie_session
from gym_metrics.nemo_gym.global_config import OBSERVABILITY_ENABLED_KEY_NAME, get_first_server_config_dict
from gym_metrics.nemo_gym.reward_profile import AggregateMetricsMixin
from gym_metrics.nemo_gym.rollout_correlation import ROLLOUT_PATH_PREFIX, maybe_rollout_id_from_run_body
from gym_metrics.nemo_gym.server_utils import TOKEN_CAPTURE_PATH_SEGMENT, ServerClient, apply_rollout_prefix, rollout_path_prefix

TOKEN_ID_CAPTURE_BLOCK = "token_id_capture"


class BaseResponsesAPIAgentConfig(BaseRunServerInstanceConfig):
    session_close_retry_window_seconds: float = Field(default=300, gt=0, allow_inf_nan=False)
    skip_verification: bool = False
    skip_verification_reward: float = 0.0
    token_id_capture: bool = False


class BaseResponsesAPIAgent(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: BaseResponsesAPIAgentConfig
    server_client: ServerClient = Field(default_factory=ServerClient)


class SimpleResponsesAPIAgent(BaseResponsesAPIAgent, AggregateMetricsMixin):
    """Subclass it as under NeMo Gym (`responses` and `run`; `compute_metrics`,
    `get_key_metrics` and `aggregate_metrics` optional)."""

    ray_enabled: ClassVar[Optional[bool]] = None

    def setup_webserver(self) -> Any:
        from fastapi import FastAPI

        app = FastAPI()
        self.setup_session_middleware(app)
        app.post("/v1/responses")(self.responses)
        app.post(f"/{ROLLOUT_PATH_PREFIX}/{{rollout_id}}/v1/responses")(self.responses)
        app.post(f"/{ROLLOUT_PATH_PREFIX}/{{rollout_id}}/{TOKEN_CAPTURE_PATH_SEGMENT}/v1/responses")(self.responses)
        app.post("/run")(self.run)
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        return app

    def get_session_middleware_key(self) -> str:
        return f"{type(self).__name__}___{self.config.name}"

    def setup_session_middleware(self, app: Any) -> None:
        """NeMo Gym keeps `request.session` in a signed cookie, as the app does over real HTTP;
        in process each `/run` gets a dict of its own in the ASGI scope, shared by the calls it
        makes to the agent itself, past the cookie."""
        install_cookie_session(app, self.get_session_middleware_key())

    async def responses(self, body: Any = Body()) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement responses()")

    async def run(self, body: Any = Body()) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement run()")

    async def aggregate_metrics(self, body: AggregateMetricsRequest = Body()) -> AggregateMetrics:
        """NeMo Gym's default aggregates with the agent's own hooks; collect aggregates each
        agent's rows itself (see docs/nemo-gym.md#agents), so this route is never called."""
        raise NotImplementedError("collect aggregates a ported agent's rollouts itself")

    # ----- rollout correlation, as NeMo Gym's agents compute their downstream paths -----

    def _global_block(self, key: str) -> Any:
        config = getattr(self.server_client, "global_config_dict", None)
        return config.get(key) if isinstance(config, Mapping) else None

    def _token_id_capture_enabled(self) -> bool:
        block = self._global_block(TOKEN_ID_CAPTURE_BLOCK) or {}
        if not isinstance(block, Mapping) or not block.get("enabled", False):
            return False
        return bool(block.get("all_agents", False)) or bool(self.config.token_id_capture)

    def _model_call_capture_enabled(self) -> bool:
        """Whether the run records model calls (collect's --capture-model-calls, --trajectory)."""
        return bool(self._global_block(OBSERVABILITY_ENABLED_KEY_NAME))

    def _capture_correlation_enabled(self) -> bool:
        return self._model_call_capture_enabled() or self._token_id_capture_enabled()

    def rollout_id_from_run(self, body: Any) -> Optional[str]:
        return maybe_rollout_id_from_run_body(body) if self._capture_correlation_enabled() else None

    def url_path_for_run(self, url_path: str, body: Any) -> str:
        """The run's capture prefix on a downstream path (none unless capture is on)."""
        return f"{rollout_path_prefix(self.rollout_id_from_run(body), token_capture=self._token_id_capture_enabled())}{url_path}"

    def base_url_for_run(self, base_url: str, body: Any) -> str:
        return apply_rollout_prefix(base_url, self.rollout_id_from_run(body), token_capture=self._token_id_capture_enabled())

    def url_path_for_request(self, url_path: str, request: Any) -> str:
        """An inbound call's capture prefix carried onto a downstream path."""
        path_params = getattr(request, "path_params", None)
        rollout_id = path_params.get("rollout_id") if isinstance(path_params, Mapping) else None
        token_capture = f"/{TOKEN_CAPTURE_PATH_SEGMENT}/" in getattr(getattr(request, "url", None), "path", "")
        return f"{rollout_path_prefix(rollout_id, token_capture=token_capture)}{url_path}"

    def resolve_model_base_url(self, model_server_name: str, rollout_id: Optional[str] = None) -> str:
        server_config = get_first_server_config_dict(self.server_client.global_config_dict, model_server_name)
        base_url = self.server_client._build_server_base_url(server_config)
        return f"{apply_rollout_prefix(base_url, rollout_id, token_capture=self._token_id_capture_enabled())}/v1"


__all__ = ["BaseResponsesAPIAgent", "BaseResponsesAPIAgentConfig", "Body", "SimpleResponsesAPIAgent"]
