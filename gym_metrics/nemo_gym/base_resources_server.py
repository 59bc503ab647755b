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

import math
import functools
import logging
import inspect
from enum import Enum
from typing import Any, ClassVar, Generic, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter

from gym_metrics.environments import ResetResult, Session, StepResult, ToolSpec, hook
from gym_metrics.environments import SimpleResourcesServer as _Environment
from gym_metrics.nemo_gym._aggregate_metrics import NEMO_OPTIONS, answer_of
from gym_metrics.nemo_gym._cookie_session import install as install_cookie_session
from gym_metrics.nemo_gym._gymnasium import close_route as close_gymnasium
from gym_metrics.nemo_gym._gymnasium import is_gymnasium, reset_route, step_route
from gym_metrics.nemo_gym._request import close_request_session
from gym_metrics.nemo_gym._routes import (
    _Request,
    _request_of,
    app_of,
    verify_route_replaced,
    verify_through_route,
    call_route,
    close_route,
    route_tools,
    seed_nemo_session,
    verify_response_model,
)
from gym_metrics.nemo_gym.config_types import AggregateMetrics, AggregateMetricsRequest, BaseRunServerInstanceConfig
from gym_metrics.nemo_gym.episode_types import EpisodeId, TaskId
from gym_metrics.nemo_gym.judge import JudgeError, judge_failed_row
from gym_metrics.nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from gym_metrics.nemo_gym.rollout_correlation import RolloutContextMiddleware
from gym_metrics.nemo_gym.sandbox.access import SandboxAccess
from gym_metrics.nemo_gym.server_utils import SESSION_ID_KEY, ServerClient


log = logging.getLogger("gym_metrics.sessions")
LIFESPAN_STOP_S = 30.0
"""How long a server's stop waits for a ported environment's lifespan shutdown (uvicorn waits
without bound; a stop here is bounded)."""

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


class MCPServerMetadata(BaseModel):
    """How a rollout reaches the server's tools over MCP (a `/seed_session` answer's)."""

    server_name: str
    url_path: str = "/mcp"
    transport: str = "http"
    headers: dict[str, str]


class ResourcesSeedSessionResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resources_session_id: str
    resources_tools: Optional[MCPServerMetadata] = None
    sandbox_access: Optional[SandboxAccess] = None


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

    routes_tool_calls: ClassVar[bool] = True
    _gm_pins_hooks: ClassVar[bool] = True
    """gym-metrics calls the hooks below (open_session, route_tool_call, ...) even where an
    environment's own method has the name, as its routes may (environments/_hooks.py)."""
    """Tool calls go through the app `setup_webserver` builds, whatever their name (NeMo Gym's
    agent POSTs `/<name>` for any name the model calls)."""
    _agent_max_steps: dict[str, int] = PrivateAttr(default_factory=dict)
    """The config's agents' `max_steps` (load_config_server sets it): ServerInfo says them."""
    _agent_types: dict[str, str] = PrivateAttr(default_factory=dict)
    """The config's agents' implementations (simple_agent, tool_simulation_agent, ...)."""
    _environment_servers: dict[str, tuple[str, str]] = PrivateAttr(default_factory=dict)
    """The environment server (name, type) in front of each of the config's agents."""
    _agent_model_servers: dict[str, str] = PrivateAttr(default_factory=dict)
    """The model server each of the config's agents calls (`model_server.name`)."""

    def setup_webserver(self) -> Any:
        """The FastAPI app NeMo Gym would serve, with its routes in its order (its own first, so
        a catch-all tool route never shadows `/verify`); subclasses add their tool routes."""
        from fastapi import FastAPI

        app = FastAPI()
        self.setup_session_middleware(app)
        app.add_middleware(RolloutContextMiddleware)
        app.post("/seed_session")(self.seed_session)
        app.post("/close_session")(self.close_resources_session)
        app.post("/verify")(self.verify)
        app.post("/aggregate_metrics")(self._aggregate_route)
        app.get("/reverify_mode")(self.get_reverify_mode)
        return app

    async def astart(self) -> None:
        """NeMo Gym's server runs the app's lifespan before it serves (uvicorn): the contexts
        environments wrap around it (newton_bench's reaper task) and `on_event("startup")`
        handlers run here, the app built first as `run_webserver` builds it."""
        from gym_metrics.nemo_gym._asgi import Lifespan

        lifespan = Lifespan(app_of(self), type(self).__name__)
        await lifespan.start()
        self.__dict__["_gm_lifespan"] = lifespan

    async def aclose(self) -> None:
        """The lifespan's shutdown (ns_tools' sidecar, litmus_agent's sandboxes, genrm_compare's
        own `aclose`), at most LIFESPAN_STOP_S seconds, when the server stops."""
        lifespan = self.__dict__.pop("_gm_lifespan", None)
        if lifespan is not None:
            await lifespan.stop(LIFESPAN_STOP_S)
        await close_request_session()  # server_utils.request's session, if the environment made one

    def get_session_middleware_key(self) -> str:
        return f"{type(self).__name__}___{self.config.name}"

    def setup_session_middleware(self, app: Any) -> None:
        """NeMo Gym keeps a rollout's `request.session` in a signed cookie: so does the app over
        real HTTP (an environment's own TestClient tests); gym-metrics' own calls hand each call
        of a session the session's dict in its ASGI scope (_asgi.post), past the cookie."""
        install_cookie_session(app, self.get_session_middleware_key())

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

    def repeat_metrics_hook(self) -> Any:
        """compute_repeat_metrics when overridden: called per repeat, as NeMo Gym calls it."""
        if type(self).compute_repeat_metrics is SimpleResourcesServer.compute_repeat_metrics:
            return None
        return self.compute_repeat_metrics

    async def get_reverify_mode(self) -> ReverifyMode:
        return self.config.REVERIFY_MODE

    # ----- gym-metrics side -----

    async def aggregate_metrics(self, rows: Any = None, agent_name: str = "agent", options: Any = None) -> Any:
        """gym-metrics' in-process aggregation of `rows`, under a signature FastAPI takes as a
        route (NeMo Gym's gymnasium server registers it as one); given NeMo Gym's
        AggregateMetricsRequest, as an environment's own tests call it, NeMo Gym's AggregateMetrics
        of its `verify_responses`: the numbers collect writes for them."""
        if not isinstance(rows, AggregateMetricsRequest):
            return await super().aggregate_metrics(rows, agent_name, options)
        if not rows.verify_responses:
            return AggregateMetrics()
        done = await super().aggregate_metrics(rows.verify_responses, agent_name, options or NEMO_OPTIONS)
        return answer_of(done, rows.verify_responses)

    async def _aggregate_route(self, body: AggregateMetricsRequest) -> AggregateMetrics:
        """`POST /aggregate_metrics` as NeMo Gym serves it (the collector never calls it)."""
        return await self.aggregate_metrics(body)

    def server_info(self) -> dict[str, Any]:
        return {**super().server_info(), "name": self.config.name, "agent_max_steps": dict(self._agent_max_steps), "agent_types": dict(self._agent_types),
                "environment_servers": dict(self._environment_servers), "agent_model_servers": dict(self._agent_model_servers)}

    async def run_verify(self, request: Any, session: Optional[Session] = None) -> Any:
        """verify with NeMo Gym's calling conventions and its judge failsafe; `request.session`
        is the rollout's session (a fresh one when the rollout has none)."""
        if verify_route_replaced(self):
            return await self._verify_by_route(request, session)
        try:
            if _takes_request(type(self)):
                http = _Request.fresh() if session is None else _request_of(session)
                answer = await self.verify(http, request)  # type: ignore[call-arg, arg-type]
            else:
                answer = await self.verify(request)
        except JudgeError as exc:
            return _judge_failed(request, str(exc)[:2000])
        # a Response (a verify decorated with judge_failsafe); never a model (hasattr of a name a
        # model lacks costs pydantic an error message, every rollout)
        if not isinstance(answer, BaseModel) and hasattr(answer, "body") and hasattr(answer, "media_type"):
            return _Routed.model_validate_json(answer.body)
        return self._as_routed(answer)

    async def _verify_by_route(self, request: Any, session: Optional[Session]) -> Any:
        """verify through the app's own `/verify` route (verify_route_replaced): its answer as
        the route encoded it; an error status fails the rollout, as it fails NeMo Gym's agent."""
        status, text = await verify_through_route(self, request.model_dump_json(exclude_unset=True).encode(), session)
        if status >= 400:
            raise RuntimeError(f"the environment's /verify route answered {status}: {text[:2000]}")
        return _Routed.model_validate_json(text)

    @functools.cached_property
    def _verify_model(self) -> Any:
        return verify_response_model(self)

    def _as_routed(self, answer: Any) -> Any:
        """verify's answer as NeMo Gym's `/verify` route sends it: FastAPI validates it against the
        route's response model and encodes it as that model, so a subclass instance returned
        under a base class annotation loses the subclass's fields."""
        model = self._verify_model
        if model is None or type(answer) is model:
            return answer
        adapter = _adapter(model)
        return _Routed.model_validate(adapter.dump_python(adapter.validate_python(answer), mode="json", by_alias=True))

    async def open_session(self, session: Session) -> None:
        """NeMo Gym's seed_session(request, body) or seed_session(body), with the row
        validated by its annotation as the /seed_session route validates it."""
        await seed_nemo_session(self, session, _request_of(session))

    async def end_session(self, session: Session) -> None:
        """An environment that overrides `close_resources_session` gets NeMo Gym's
        `POST /close_session` when the session ends (verified, closed, idle past its TTL, or its
        seed failed), with the body NeMo Gym's session contract names (`resources_session_id`:
        the session's id, also its `request.session["session_id"]`; `episode_id`). NeMo Gym
        0.7.0's simple_agent never calls it (what an environment frees there leaks for every
        episode); its contract says an override must accept any close, so it is called here. An
        error answer is logged, never the caller's."""
        if hook(self, "answers_turns")():
            try:
                await close_gymnasium(self, session)
            except Exception as exc:  # the episode is over; a failed cleanup is logged, as NeMo Gym's agent logs it
                log.warning("close after the episode failed for session %s: %s", session.id, exc)
            return
        if type(self).close_resources_session is SimpleResourcesServer.close_resources_session:
            return  # the default keeps nothing
        await close_route(self, session)

    def tools(self) -> dict[str, ToolSpec]:
        """The POST routes `setup_webserver` adds (without path parameters), as tools named by
        their path; none for a gymnasium server (its routes are reset and step)."""
        return {} if hook(self, "answers_turns")() else route_tools(self)

    def answers_turns(self) -> bool:
        """A NeMo Gym gymnasium server (`resources_servers.gymnasium.GymnasiumServer`, ported
        by its imports): its app answers `POST /reset` and `POST /step`."""
        return is_gymnasium(self)

    async def run_reset(self, session: Session) -> ResetResult:
        """`POST /reset` with the task row, in the session, as NeMo Gym's gymnasium_agent resets."""
        return await reset_route(self, session)

    async def run_step(self, session: Session, response: dict[str, Any]) -> StepResult:
        """`POST /step` with the task row and the model's turn as `response`."""
        return await step_route(self, session, response)

    async def route_tool_call(self, name: str, arguments_json: str | bytes, session: Session) -> tuple[str, bool, int]:
        """`POST /<name>` through the app, as NeMo Gym's agent makes the call: the body is what
        the model reads, an error status counts the call as failed."""
        return await call_route(self, session, name, arguments_json)

    def checked_response(self, response: Any) -> Any:
        if not (isinstance(response, BaseModel) and hasattr(response, "reward")):
            response = super().checked_response(response)
        values = response.__dict__.items() if not response.model_extra else [*response.__dict__.items(), *response.model_extra.items()]
        bad = [f"{k}={v}" for k, v in values if type(v) is float and not math.isfinite(v)]
        if bad:  # NeMo Gym's JSON answer refuses them (allow_nan=False): its rollout fails
            raise TypeError(f"verify() returned {', '.join(bad)}; NeMo Gym's answer cannot carry NaN or infinity, so its rollout fails")
        return response


class _Routed(BaseModel):
    """verify's answer as the route encoded it: its fields, in its order."""

    model_config = ConfigDict(extra="allow")


@functools.lru_cache(maxsize=None)
def _adapter(model: Any) -> TypeAdapter[Any]:
    return TypeAdapter(model)


@functools.lru_cache(maxsize=None)
def _takes_request(cls: Any) -> bool:
    """verify(self, request, body): NeMo Gym passes the HTTP request first."""
    return len(inspect.signature(cls.verify).parameters) >= 3




class _JudgeFailed(BaseModel):
    """A rollout whose judge failed: its request's fields, reward 0, masked."""

    model_config = ConfigDict(extra="allow")
    reward: float


def _judge_failed(request: BaseModel, error: str) -> _JudgeFailed:
    return _JudgeFailed.model_validate(judge_failed_row(request.model_dump(), error))


__all__ = [
    "AggregateMetrics",
    "AggregateMetricsRequest",
    "MCPServerMetadata",
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
