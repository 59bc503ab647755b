"""NeMo Gym's resources-server surface on gym-metrics: the request, response and config models
a ported environment subclasses, and `SimpleResourcesServer`, a pydantic model (as NeMo Gym's
is: `config`, `server_client`, `model_post_init`, fields with defaults) that gym-metrics serves.

What differs from gym_metrics' own environment models, on purpose, to behave as NeMo Gym does:
request and response models drop fields they do not declare (so `Response(**body.model_dump(),
...)` works on rows scored before); `body.response` is a typed Responses object; `verify` may
take `(self, request, body)`, the request offering `session` (a fresh session id per rollout)
and `headers`; a JudgeError in verify scores the rollout 0 and masks it (`failure_kind`
"judge_failed"), as NeMo Gym's judge failsafe does.
"""

from __future__ import annotations

import functools
import inspect
from enum import Enum
from typing import Any, ClassVar, Generic, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from gym_metrics.environments import Session, ToolSpec
from gym_metrics.environments import SimpleResourcesServer as _Environment
from gym_metrics.nemo_gym._routes import _Request, _request_of, route_tools, seed_nemo_session
from gym_metrics.nemo_gym.config_types import BaseRunServerInstanceConfig
from gym_metrics.nemo_gym.episode_types import EpisodeId, TaskId
from gym_metrics.nemo_gym.judge import JudgeError
from gym_metrics.nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from gym_metrics.nemo_gym.server_utils import SESSION_ID_KEY, ServerClient


class ReverifyMode(str, Enum):
    STATELESS = "stateless"
    UNSUPPORTED = "unsupported"
    UNKNOWN = "unknown"


class BaseResourcesServerConfig(BaseRunServerInstanceConfig):
    expose_tools_over_mcp: bool = False
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.UNKNOWN


class BaseRunRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    responses_create_params: NeMoGymResponseCreateParamsNonStreaming
    capture_rollout_id: Optional[str] = Field(default=None, alias="_ng_rollout_id", exclude=True)


class BaseVerifyRequest(BaseRunRequest):
    response: NeMoGymResponse


class BaseVerifyResponse(BaseVerifyRequest):
    reward: float
    mask_sample: bool = False
    """True when the reward is not a valid measurement (left out of quality statistics)."""
    failure_kind: Optional[str] = None
    failure_reason: Optional[str] = None


class BaseMultiRewardVerifyResponse(BaseVerifyResponse):
    reward_components: dict[str, float]


class BaseSeedSessionRequest(BaseModel):
    pass


class BaseSeedSessionResponse(BaseModel):
    pass


class ResourcesSeedSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resources_session_id: str = Field(min_length=1)
    episode_id: EpisodeId
    task_id: TaskId
    task_data: dict[str, Any]


class ResourcesSeedSessionResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resources_session_id: str
    resources_tools: Optional[dict[str, Any]] = None
    sandbox_access: Optional[dict[str, Any]] = None


VerificationInputT = TypeVar("VerificationInputT")


class ResourcesVerifyRequest(BaseModel, Generic[VerificationInputT]):
    model_config = ConfigDict(extra="forbid")

    episode_id: EpisodeId
    task_id: TaskId
    verification_input: VerificationInputT


class ResourcesCloseSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resources_session_id: str
    episode_id: EpisodeId


class ResourcesCloseSessionResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resources_session_id: str


class SimpleResourcesServer(BaseModel, _Environment):
    """Subclass it as under NeMo Gym; gym-metrics builds it from the environment's YAML
    (`gym-metrics serve resources_servers/<env>/configs/<name>.yaml`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: BaseResourcesServerConfig
    server_client: ServerClient = Field(default_factory=ServerClient)
    ray_enabled: ClassVar[Optional[bool]] = None

    def setup_webserver(self) -> Any:
        """The FastAPI app NeMo Gym would serve; subclasses add their tool routes to it."""
        from fastapi import FastAPI

        return FastAPI()

    async def seed_session(self, body: Any) -> Any:
        if isinstance(body, ResourcesSeedSessionRequest):
            return ResourcesSeedSessionResponse(resources_session_id=body.resources_session_id)
        return BaseSeedSessionResponse()

    async def close_resources_session(self, body: ResourcesCloseSessionRequest) -> ResourcesCloseSessionResponse:
        return ResourcesCloseSessionResponse(resources_session_id=body.resources_session_id)

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:  # type: ignore[override]
        raise NotImplementedError(f"{type(self).__name__} must implement verify()")

    def compute_repeat_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return {}

    async def get_reverify_mode(self) -> ReverifyMode:
        return self.config.REVERIFY_MODE

    # ----- gym-metrics side -----

    def server_info(self) -> dict[str, Any]:
        return {**super().server_info(), "name": self.config.name}

    async def run_verify(self, request: Any, session: Optional[Session] = None) -> Any:
        """verify with NeMo Gym's calling conventions and its judge failsafe; `request.session`
        is the rollout's session (a fresh one when the rollout has none)."""
        try:
            if _takes_request(type(self)):
                http = _Request.fresh() if session is None else _request_of(session)
                return await self.verify(http, request)  # type: ignore[call-arg, arg-type]
            return await self.verify(request)
        except JudgeError as exc:
            return _judge_failed(request, str(exc)[:2000])

    async def open_session(self, session: Session) -> None:
        """NeMo Gym's seed_session(request, body) or seed_session(body), with the row
        validated by its annotation as the /seed_session route validates it."""
        await seed_nemo_session(self, session, _request_of(session))

    async def end_session(self, session: Session) -> None:
        """Nothing: a NeMo Gym environment keeps its own per-session state (its dicts keyed by
        session id) and frees it itself, as under NeMo Gym."""

    def tools(self) -> dict[str, ToolSpec]:
        """The POST routes `setup_webserver` adds, as tools named by their path."""
        return route_tools(self)

    def checked_response(self, response: Any) -> Any:
        if isinstance(response, BaseModel) and hasattr(response, "reward"):
            return response
        return super().checked_response(response)


@functools.lru_cache(maxsize=None)
def _takes_request(cls: Any) -> bool:
    """verify(self, request, body): NeMo Gym passes the HTTP request first."""
    return len(inspect.signature(cls.verify).parameters) >= 3




class _JudgeFailed(BaseModel):
    """A rollout whose judge failed: its request's fields, reward 0, masked."""

    model_config = ConfigDict(extra="allow")
    reward: float


def _judge_failed(request: BaseModel, error: str) -> _JudgeFailed:
    data = request.model_dump()
    instance_config = data.get("instance_config")
    data |= {
        "reward": 0.0,
        "mask_sample": True,
        "failure_kind": "judge_failed",
        "failure_reason": error,
        "instance_config": {**(instance_config if isinstance(instance_config, dict) else {}), "mask_sample": True},
        "_ng_failure_class": "judge_failed",
        "_ng_failure_judge_error": error,
    }
    return _JudgeFailed.model_validate(data)


__all__ = [
    "BaseMultiRewardVerifyResponse",
    "BaseResourcesServerConfig",
    "BaseRunRequest",
    "BaseSeedSessionRequest",
    "BaseSeedSessionResponse",
    "BaseVerifyRequest",
    "BaseVerifyResponse",
    "ResourcesCloseSessionRequest",
    "ResourcesCloseSessionResponse",
    "ResourcesSeedSessionRequest",
    "ResourcesSeedSessionResponse",
    "ResourcesVerifyRequest",
    "ReverifyMode",
    "SimpleResourcesServer",
]
