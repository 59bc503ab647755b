"""SimpleResourcesServer: what an environment author subclasses. No transport code here.

Override `verify` (one rollout in, a reward and custom fields out) and, optionally,
`compute_metrics` (all of an agent's rows, grouped by task) and `get_key_metrics`. Reward
reducers listed by name in `reducers` and headline metrics chosen by pattern in `key_metrics`
need no code at all. An agentic environment adds tools (`@tool` methods) and per-rollout
sessions (`seed_session`, `close_session`, and a `session` parameter on verify).
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pydantic

from gym_metrics.aggregate import (
    AgentAggregate,
    AggregateOptions,
    Aggregator,
    ColumnarComputeMetrics,
    ColumnMetrics,
    ComputeMetrics,
    MetricColumns,
    default_key_metrics,
)
from gym_metrics.rollouts import RolloutColumns
from gym_metrics._util.deprecated import warn_class_attribute
from gym_metrics._util.jsonbounds import checked_items, may_exceed
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.reducers import TaskRewards, TaskRewardsLike, summarize_reducers
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.environments._hooks import hook
from gym_metrics.environments._sessions import Session, seed_with_row
from gym_metrics.environments._steps import ResetResult, StepResult, checked_reset, checked_step
from gym_metrics.environments._tools import ToolSpec, tools_of
from gym_metrics.environments._verify_model import (
    annotation, check_verify, json_schema, response_json, takes_session, validate_text, violations, without_outputs,
)  # fmt: skip

if TYPE_CHECKING:
    from gym_metrics.sandbox import Provider


_SANDBOX = "_gm_sandbox"
"""Where `sandbox()` keeps its provider (an instance attribute: an `__init__` of the author's
need not call the base's)."""


async def close_sandbox(env: SimpleResourcesServer) -> None:
    """Close the provider `env.sandbox()` made, if it made one (the server's stop)."""
    provider = env.__dict__.pop(_SANDBOX, None)
    if provider is not None:
        await provider.aclose()


log = logging.getLogger("gym_metrics.environments")
_UNMATCHED_SAID: set[str] = set()
"""key_metrics patterns already said to match nothing (once a process each)."""


class SimpleResourcesServer:
    """Base class of every environment.

    Class attributes configure it; the request model is read from `verify`'s annotation, so a
    subclass only writes `async def verify(self, body: MyRequest) -> MyResponse`.
    """

    name: ClassVar[str] = ""
    """Environment name reported by GetServerInfo (default: the class name)."""
    reducers: ClassVar[list[str]] = []
    """Reward reducers by registry name (e.g. "pass@1", "pass@8", "pass^8", "mean_reward"):
    each one's value and uncertainty keys (`<name>/stderr`, `/ci_low_95`, `/ci_high_95`,
    `/tasks_used`, `/tasks_dropped`) go into agent_metrics, computed from each task's `reward`
    values in rollout order. `serve(..., reducers=[...])` replaces the list."""
    metrics: ClassVar[list[str]] = []
    """Old name of `reducers` (removal in 0.3.0), still read with a DeprecationWarning when a
    subclass sets it: an environment that lists `metrics` and no `reducers` gets those."""
    eager_verify: ClassVar[bool] = False
    """Set True when verify never depends on its asyncio task's identity (no httpx / anyio
    cancel scopes, no asyncio.timeout): before Python 3.12 it then runs without a Task of its
    own per rollout, several times faster for pure-CPU verifies. (3.12+ is fast and safe
    either way.)"""
    sample: ClassVar[Path | None] = None
    """A small rollouts file shipped with the environment (what `gym-metrics demo` collects)."""
    key_metrics: ClassVar[list[str]] = []
    """fnmatch patterns (e.g. "mean/reward", "pass@*") choosing key_metrics in the default
    get_key_metrics; empty: every `mean/` metric (docs/metrics.md#key-metrics)."""
    routes_tool_calls: ClassVar[bool] = False
    """True when `route_tool_call` answers every tool call, whatever its name (a ported NeMo
    Gym environment's app); False: the `@tool` methods do, and other names are NOT_FOUND."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        warn_class_attribute("gym_metrics.environments:SimpleResourcesServer", cls)  # `metrics`
        check_verify(cls)
        if isinstance(cls.__dict__.get("key_metrics"), str):  # list("mean/reward") is its characters: no headline at all
            raise TypeError(f"{cls.__qualname__}.key_metrics must be a list of patterns: key_metrics = [{cls.__dict__['key_metrics']!r}]")

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        """Score one rollout. Must be overridden."""
        raise NotImplementedError(f"{type(self).__name__} must implement verify()")

    async def seed_session(self, session: Session) -> None:
        """Set up a rollout's state in `session.state` from its task row (`session.row`)
        before the model's first tool call. Default: nothing."""

    async def reset(self, session: Session) -> ResetResult | tuple[str | None, dict[str, Any]] | None:
        """An environment that answers each turn (`step`): start the episode from the task row
        (`session.row`); the first observation, if the prompt is not the start. Default: none."""
        return None

    async def step(self, session: Session, response: dict[str, Any]) -> StepResult | tuple[Any, ...]:
        """Act on the model's turn (`response`, a Responses API object): gymnasium's five
        (StepResult). Overriding it makes the environment answer each turn (_steps.py)."""
        raise NotImplementedError(f"{type(self).__name__} does not answer turns (no step())")

    def answers_turns(self) -> bool:
        """True when the environment is driven by reset / step instead of tools and verify."""
        return type(self).step is not SimpleResourcesServer.step

    async def run_reset(self, session: Session) -> ResetResult:
        """How the framework resets (a porting layer may reset another way)."""
        return checked_reset(await self.reset(session), f"{type(self).__name__}.reset")

    async def run_step(self, session: Session, response: dict[str, Any]) -> StepResult:
        """How the framework steps (a porting layer may step another way)."""
        return checked_step(await self.step(session, response), f"{type(self).__name__}.step")

    async def close_session(self, session: Session) -> None:
        """Free what the session holds beyond `session.state` (a process, a sandbox) when its
        episode ends or its client goes away. Default: nothing."""

    async def astart(self) -> None:
        """Set up what the environment holds for its whole life and must make on its server's
        event loop (a background task, a client bound to the loop), before the server takes
        its first call; raising stops the server from starting. Default: nothing."""

    async def aclose(self) -> None:
        """Free what the environment holds for its whole life (a client, a provider it made
        itself) when its server stops, after its sessions closed. Default: nothing (the
        provider `sandbox()` gave is closed by the server after this)."""

    def sandbox(self) -> Provider:
        """The environment's sandbox provider for model-written code: the one the server was
        started with (`serve --sandbox-provider NAME`, default the local Pool), made on the
        first call and closed when the server stops. Call it in `__init__` so a host that
        cannot isolate runs refuses to start the server, not the first verify."""
        provider = self.__dict__.get(_SANDBOX)
        if provider is None:
            from gym_metrics.sandbox import make_provider  # (only environments that run code load it)

            provider = make_provider()
            object.__setattr__(self, _SANDBOX, provider)  # (also on NeMo Gym ports: pydantic models)
        return provider

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Custom agent metrics from all measured rows, grouped by task. Default: none.

        docs/metrics.md#compute-metrics says what `tasks` holds.

        A `per_task_metrics` list (entries keyed by `_ng_task_index`) is merged into the groups.
        An environment that overrides `compute_metrics_columns` gets that one called instead
        (no row dicts are built or sent); this one stays for NeMo Gym compatibility.
        """
        return {}

    def compute_metrics_columns(self, columns: MetricColumns) -> dict[str, Any]:
        """The columnar compute_metrics: the same answer (per_task_metrics included) from the
        measured rollouts as numpy columns (MetricColumns: task indices, a tasks x rollouts
        reward matrix, named numeric columns per rollout). Overriding it means aggregation
        needs no rows (`wants_rows` is False) and `compute_metrics` is not called.
        docs/environments.md#columnar-compute_metrics. Default: none."""
        return {}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """Headline metrics: those matching a `key_metrics` pattern, in agent_metrics order;
        without patterns every `mean/` metric (docs/metrics.md#key-metrics)."""
        if not self.key_metrics:
            return default_key_metrics(agent_metrics)
        patterns = list(self.key_metrics)
        found = {k: v for k, v in agent_metrics.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
        for pattern in patterns:  # a misspelt pattern left the headline empty without a word
            if pattern not in _UNMATCHED_SAID and not any(fnmatch.fnmatchcase(k, pattern) for k in found):
                _UNMATCHED_SAID.add(pattern)
                log.warning("%s.key_metrics: %r matches no metric (%s, ...)", type(self).__name__, pattern, ", ".join(list(agent_metrics)[:8]))
        return found

    def listed_reducers(self) -> list[str]:
        """The reducers this environment reports: `reducers`, else (the old name) `metrics`."""
        return list(self.reducers or self.metrics)

    def reward_metrics(self, task_rewards: TaskRewardsLike) -> dict[str, float | int]:
        """The listed reducers over per-task rewards, with their uncertainty keys."""
        return summarize_reducers(self.listed_reducers(), task_rewards)

    # ----- framework side: called by the transport, the CLI and tests -----

    @classmethod
    def server_name(cls) -> str:
        return cls.name or cls.__name__

    @classmethod
    def verify_request_model(cls) -> type[BaseVerifyRequest]:
        return annotation(cls.verify, "body", BaseVerifyRequest)

    @classmethod
    def verify_response_model(cls) -> type[BaseVerifyResponse]:
        return annotation(cls.verify, "return", BaseVerifyResponse)

    # (resolved once per class: get_type_hints costs ~100 us, more than a whole verify)

    def tools(self) -> dict[str, ToolSpec]:
        """The tools the model may call, by name (the `@tool` methods)."""
        cls = type(self)
        found = _TOOLS.get(cls)
        if found is None:
            found = _TOOLS[cls] = tools_of(cls)
        return found

    async def route_tool_call(self, name: str, arguments_json: str | bytes, session: Session) -> tuple[str, bool] | tuple[str, bool, int]:
        """(the text the model reads, whether the call failed[, the HTTP status a route
        answered]) of a call `tools()` does not dispatch: used when `routes_tool_calls` is set."""
        raise NotImplementedError(f"{type(self).__name__} sets routes_tool_calls without route_tool_call")

    @property
    def wants_rows(self) -> bool:
        """True when compute_metrics is overridden (and compute_metrics_columns is not), so
        aggregation needs full rows. (Listed reducers and the columnar hook need only numeric
        columns, which are always there.)"""
        if self.repeat_metrics_hook() is not None:
            return True
        if self.columnar_metrics_hook() is not None:
            return False
        return self._compute_metrics_overridden()

    def columnar_metrics_hook(self) -> ColumnarComputeMetrics | None:
        """compute_metrics_columns when overridden, else None."""
        if type(self).compute_metrics_columns is SimpleResourcesServer.compute_metrics_columns:
            return None
        return self.compute_metrics_columns

    def column_metrics_hook(self) -> ColumnMetrics | None:
        """The engine hook adding the listed reducers from the reward column (no row dicts);
        None when no reducer is listed."""
        if not self.listed_reducers():
            return None

        def reducers(columns: RolloutColumns) -> dict[str, Any]:
            reward = columns.fields.get("reward")
            if reward is None:  # no rewards at all: every task is empty
                values, valid = np.zeros(len(columns)), np.zeros(len(columns), bool)
            else:
                values, valid = reward.values, reward.present
            return self.reward_metrics(TaskRewards.from_columns(columns.task_index, values, valid))

        return reducers

    def parse_verify_request(self, body: Mapping[str, Any] | str | bytes, row: int | None = None) -> BaseVerifyRequest:
        """Validate a request body; errors name every bad field (and the row, when given).
        JSON text is parsed by pydantic-core, then validated as Python objects (FastAPI's way,
        so NeMo Gym's): faster than JSON-mode validation on large typed rows. A body
        that fails either way is validated again in JSON mode, whose errors (and leniency:
        strict fields take strings for dates) are what they always were."""
        model = self.verify_request_model()
        try:
            if isinstance(body, (str, bytes)):
                return without_outputs(validate_text(model, body), self.verify_response_model())
            if not isinstance(body, Mapping):
                raise InvalidInputError(
                    "verify body must be a JSON object", [FieldViolation("body_json", f"got {type(body).__name__}", row)]
                )
            return without_outputs(model.model_validate(body), self.verify_response_model())
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            if first["type"] == "json_invalid":
                why = first["msg"] + (" (pydantic-core parses 200 levels of nesting at most)" if "recursion limit" in first["msg"] else "")
                raise InvalidInputError("verify body is not valid JSON", [FieldViolation("body_json", why, row)]) from None
            if first["type"] == "model_type" and not first["loc"]:
                got = type(first["input"]).__name__
                raise InvalidInputError(
                    "verify body must be a JSON object", [FieldViolation("body_json", f"got {got}", row)]
                ) from None
            raise InvalidInputError(f"verify body fails {model.__name__}", violations(exc, "body_json", row)) from None

    async def verify_model(self, body: Mapping[str, Any] | str | bytes, row: int | None = None) -> BaseVerifyResponse:
        """Validate, verify, and check what verify returned."""
        response: BaseVerifyResponse = hook(self, "checked_response")(await hook(self, "run_verify")(self.parse_verify_request(body, row)))
        return response

    async def open_session(self, session: Session) -> None:
        """How the framework seeds a session (a porting layer may seed another way):
        seed_session(session), or seed_session(session, body) with the row validated by the
        model `body` is annotated with."""
        await seed_with_row(self, session)

    async def end_session(self, session: Session) -> None:
        """How the framework closes a session: close_session."""
        await self.close_session(session)

    async def run_verify(self, request: Any, session: Session | None = None) -> Any:
        """How the framework calls verify (a porting layer may call it another way): with the
        rollout's session when verify takes a `session` parameter."""
        if session is not None and takes_session(type(self).verify):
            return await self.verify(request, session=session)  # type: ignore[call-arg]
        return await self.verify(request)

    def checked_response(self, response: Any) -> BaseVerifyResponse:
        """What verify returned, as a response model (a mapping is validated into one). A NaN
        or infinity in it goes on the wire as null: no value (docs/environments.md)."""
        if isinstance(response, BaseVerifyResponse):  # the usual case first: Mapping is a slow ABC check
            return response
        if isinstance(response, Mapping):
            return self.verify_response_model().model_validate(response)
        raise TypeError(f"verify() must return a BaseVerifyResponse, got {type(response).__name__}")

    async def verify_dict(self, body: Mapping[str, Any] | str | bytes, row: int | None = None) -> dict[str, Any]:
        """Validate, verify and return the response as a JSON-ready dict."""
        return (await self.verify_model(body, row)).model_dump(mode="json")

    async def verify_json(
        self, body: Mapping[str, Any] | str | bytes, row: int | None = None, session: Session | None = None
    ) -> tuple[float, str]:
        """(reward, response as JSON text): the wire form, serialised by pydantic-core. It runs
        per rollout, so verify_model's steps are inline (one coroutine fewer)."""
        if isinstance(body, (str, bytes)) and may_exceed(body):
            await checked_items(body, "body_json", row)
        request = self.parse_verify_request(body, row)
        response = hook(self, "checked_response")(await hook(self, "run_verify")(request, session))
        return float(response.reward), response_json(response)

    def new_aggregator(self, agent_name: str, options: AggregateOptions | None = None) -> Aggregator:
        return Aggregator(agent_name, options)

    def finalize(self, aggregator: Aggregator) -> AgentAggregate:
        """Compute the agent's metrics with this environment's hooks (CPU-bound: run off-loop)."""
        compute = self.compute_metrics if self.columnar_metrics_hook() is None and self._compute_metrics_overridden() else None
        return aggregator.finalize(
            compute, self.get_key_metrics, self.column_metrics_hook(), self.columnar_metrics_hook(),
            compute_repeat_metrics=self.repeat_metrics_hook(),
        )  # fmt: skip

    def repeat_metrics_hook(self) -> ComputeMetrics | None:
        """NeMo Gym's compute_repeat_metrics when a ported environment overrides it (its rows
        are then sent); None here."""
        return None

    def _compute_metrics_overridden(self) -> bool:
        return type(self).compute_metrics is not SimpleResourcesServer.compute_metrics

    async def aggregate_metrics(
        self,
        rows: Iterable[Mapping[str, Any]] | RolloutColumns,
        agent_name: str = "agent",
        options: AggregateOptions | None = None,
    ) -> AgentAggregate:
        """Aggregate verify responses in-process, off the event loop."""
        batch = rows if isinstance(rows, RolloutColumns) else RolloutColumns.from_rows(rows)
        aggregator = self.new_aggregator(agent_name, options)
        aggregator.add(batch)
        return await asyncio.to_thread(self.finalize, aggregator)

    def server_info(self) -> dict[str, Any]:
        from gym_metrics._util.version import __version__

        return {
            "name": self.server_name(),
            "version": __version__,
            "metrics": self.listed_reducers(),  # the proto's name for them
            "verify_request_schema": json_schema(self.verify_request_model()),
            "verify_response_schema": json_schema(self.verify_response_model()),
            "wants_rows": self.wants_rows,
            "tools": [spec.as_function_tool() for spec in hook(self, "tools")().values()],
            "any_tool_name": self.routes_tool_calls,
            "steps": hook(self, "answers_turns")(),
        }


_TOOLS: dict[type, dict[str, ToolSpec]] = {}
"""Each environment class's tools (found once)."""
