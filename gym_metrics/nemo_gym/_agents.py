"""NeMo Gym's own agents (`responses_api_agents/<impl>/app.py`, ported by the import rule), run
by collect as NeMo Gym's rollout collection runs them: each row POSTed to the agent's `/run`,
through the agent's own FastAPI app in this process (_asgi.post: FastAPI validates the row as the
agent's run request and encodes its answer through the route's model).

What the agent's code posts through its `server_client` goes, per episode, where NeMo Gym's
would: its `model_server` to the policy (collect's `--policy-*` target, as NeMo Gym's vLLM
model server answers `/v1/responses` and `/v1/chat/completions`), its own name to its own app,
a resources server it names to the row's session on that server (`Routes`, which the collector
gives: `/seed_session` opens it, `/verify` verifies in it, any other path is a tool call of it).

A `/run` that fails (the agent's code raised, or a call it checked answered an error status)
is NeMo Gym's failed-run sidecar row (`_ng_failure_class: agent_run_error`, its type, message and
status), as NeMo Gym writes it with `route_failures_to_sidecar`; an infrastructure failure of
the resources server (a lost session, a server gone) is raised again once `/run` answered, so
the collector starts the episode again as it does for its own loop.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
import pydantic
from pydantic import BaseModel

from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym._native import NATIVE_AGENTS
from gym_metrics.nemo_gym._asgi import post
from gym_metrics.nemo_gym._compose import read_blocks, tree_root
from gym_metrics.nemo_gym._config import load_entry, refuse_missing
from gym_metrics.nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from gym_metrics.nemo_gym.config_types import ModelServerRef, ResourcesServerRef
from gym_metrics.nemo_gym.openai_utils import NeMoGymResponse
from gym_metrics.nemo_gym.global_config import OBSERVABILITY_ENABLED_KEY_NAME, set_global_config_dict
from gym_metrics.nemo_gym.server_utils import ServerClient, ServerResponse, _target_call, response_error
from gym_metrics.targets import ModelTarget, labelled

FAILURE_BODY_CHARS = 2000
_JSON = {"Content-Type": "application/json"}


class Routes(Protocol):
    """The row's session on its resources server, as the collector reaches it: `(status, body)`
    of a POST; raises only when the server itself failed (the episode is then started again)."""

    async def post(self, path: str, body: Any) -> tuple[int, str]: ...


@dataclass
class _Episode:
    routes: Routes
    target: ModelTarget
    observed: bool = False
    """Whether collect records the episode's evidence (its model calls): the agent's config then
    says `observability_enabled`, as NeMo Gym's does when it captures."""
    session: dict[str, Any] = field(default_factory=dict)
    failed: BaseException | None = None
    """The first infrastructure failure the agent's calls met (raised again after /run)."""


_EPISODE: contextvars.ContextVar[_Episode | None] = contextvars.ContextVar("gym_metrics_nemo_agent_episode", default=None)
_FORWARDED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("gym_metrics_nemo_agent_forwarded", default=None)
"""While an agent's aggregation is probed: the resources servers its `/aggregate_metrics` posted to."""


class _AgentClient(ServerClient):
    """The agent's server_client: inside an episode, each server its config names reached as
    the module docstring says; any other name (or outside an episode) as ServerClient reaches it."""

    def __init__(self, name: str, models: set[str], resources: set[str]) -> None:
        super().__init__()
        self.name, self.models, self.resources = name, models, resources
        self.app: Any = None

    @property
    def global_config_dict(self) -> Any:
        """The config, with `observability_enabled` in an episode whose evidence is recorded."""
        document = super().global_config_dict
        episode = _EPISODE.get()
        return {**document, OBSERVABILITY_ENABLED_KEY_NAME: True} if episode is not None and episode.observed else document

    async def request(self, method: str, server_name: str, url_path: str, json: Any = None, **kwargs: Any) -> ServerResponse:
        forwarded = _FORWARDED.get()
        if forwarded is not None:  # the probe of its aggregation: only a forward to its resources server answers
            if server_name in self.resources and url_path.partition("?")[0] == "/aggregate_metrics":
                forwarded.append(server_name)
                return ServerResponse(200, b"{}", _JSON, f"http://{server_name}{url_path}")
            return ServerResponse(500, b'{"detail": "probe"}', _JSON, f"http://{server_name}{url_path}")
        episode = _EPISODE.get()
        if episode is None or server_name not in (self.name, *self.models, *self.resources):
            return await super().request(method, server_name, url_path, json, **kwargs)
        if isinstance(json, BaseModel):  # as NeMo Gym's client sends a model: its set fields
            json = json.model_dump(exclude_unset=True)
        url = f"http://{server_name}{url_path}"
        if server_name in self.models:
            return await _model_call(episode.target, server_name, url_path, json, _session_header(kwargs.get("headers")))
        if server_name == self.name:
            headers = kwargs.get("headers")
            status, text = await post(self.app, url_path.partition("?")[0], orjson.dumps(json), episode.session, headers if isinstance(headers, Mapping) else None)
            return ServerResponse(status, text.encode(), _JSON, url)
        try:
            status, text = await episode.routes.post(url_path.partition("?")[0], json)
        except Exception as exc:  # the server failed, not the call: the episode starts again
            episode.failed = episode.failed or exc
            raise
        return ServerResponse(status, text.encode(), _JSON, url)


async def _model_call(target: ModelTarget, server_name: str, url_path: str, body: Any, session: str | None) -> ServerResponse:
    """A call to the agent's model server, answered as NeMo Gym's model servers answer: a Responses
    answer as its typed model dumps it (every field, nulls too), and recorded as that server
    records it (its name, the caller's `x-session-id`, the body as the agent sent it)."""
    with labelled({"type": "responses_api_models", "name": server_name}, session) as begun:
        answer = await _target_call(target, url_path, body)
    typed = None
    if answer.status == 200 and url_path.partition("?")[0].rstrip("/").endswith("/responses"):
        try:
            typed = NeMoGymResponse.model_validate_json(await answer.read()).model_dump(mode="json")
        except pydantic.ValidationError as exc:  # its server could not answer it either: a 500, as NeMo Gym's does
            return ServerResponse(500, orjson.dumps(repr(exc)), _JSON, answer.url)
        answer = ServerResponse(200, orjson.dumps(typed), _JSON, answer.url)
    for exchange in begun:
        exchange.request = body
    if begun and typed is not None:
        begun[-1].response = typed
    return answer


def _session_header(headers: Any) -> str | None:
    """The `x-session-id` a call was sent with (NeMo Gym's model server's client session)."""
    if isinstance(headers, Mapping):
        found = {v for k, v in headers.items() if isinstance(k, str) and k.lower() == "x-session-id" and isinstance(v, str) and v}
        return found.pop() if len(found) == 1 else None
    return None


@dataclass
class AgentProgram:
    """One agent block of a config, its code loaded: `await program.run(row, routes, target)`
    is its `/run` of `row`, as (reward, the row's answer as JSON text)."""

    name: str
    implementation: str
    agent: SimpleResponsesAPIAgent
    app: Any
    hooks: tuple[Any, ...] | None = None
    """How NeMo Gym aggregates the agent's rollouts: None, as its resources server does (its
    `aggregate_metrics` forwards them there, as simple_agent's does); else NeMo Gym's default
    aggregation with the agent's own (compute_metrics, get_key_metrics, compute_repeat_metrics),
    None where not its own."""

    async def run(self, row: Mapping[str, Any], routes: Routes, target: ModelTarget, observed: bool = False) -> tuple[float, str]:
        episode = _Episode(routes, target, observed)
        token = _EPISODE.set(episode)
        try:
            status, text = await post(self.app, "/run", orjson.dumps(row), episode.session)
        finally:
            _EPISODE.reset(token)
        if episode.failed is not None:
            raise episode.failed
        if status != 200:
            return math.nan, orjson.dumps(self._failure_row(status, text)).decode()
        answer = orjson.loads(text)
        reward = answer.get("reward") if isinstance(answer, Mapping) else None
        return (float(reward) if isinstance(reward, (int, float)) else math.nan), text

    def _failure_row(self, status: int, text: str) -> dict[str, Any]:
        """NeMo Gym's sidecar row of a `/run` answered with an error status (the rollout ran)."""
        error = response_error(status, text.encode(), f"http://{self.name}/run")
        body = text[:FAILURE_BODY_CHARS] + ("…" if len(text) > FAILURE_BODY_CHARS else "")
        return {
            "_ng_failure_class": "agent_run_error",
            "_ng_failure_type": type(error).__name__,
            "_ng_failure_message": str(error),
            "_ng_failure_http_status": status,
            "_ng_failure_response_body": body or None,
        }


class AgentCodes(Mapping[str, AgentProgram]):
    """The agent blocks of a NeMo Gym config that collect does not run itself (NATIVE_AGENTS),
    by name; each built on first use (`codes[name]`), as NeMo Gym builds it: its code from
    `responses_api_agents/<impl>/` of the config's tree (ported: its imports rewritten), its
    config from the block's fields with `name` the block's key. InvalidInputError naming the
    block when its code is not there or its fields do not fit its config class."""

    def __init__(self, config: Path | str) -> None:
        self.path = Path(config)
        self.document = read_blocks(self.path)
        self.root = tree_root(self.path) or self.path.resolve().parent
        self._blocks: dict[str, tuple[str, dict[str, Any]]] = {}
        for name, block in self.document.items() if isinstance(self.document, Mapping) else ():
            inner = block.get("responses_api_agents") if isinstance(block, Mapping) else None
            if isinstance(inner, Mapping) and len(inner) == 1:
                impl, fields = next(iter(inner.items()))
                if impl not in NATIVE_AGENTS:
                    if fields is not None and not isinstance(fields, Mapping):
                        why = f"{self.path}: {type(fields).__name__}, expected the agent's fields (a mapping)"
                        raise InvalidInputError("bad agent block", [FieldViolation(f"{name}.responses_api_agents.{impl}", why)])
                    self._blocks[str(name)] = (str(impl), dict(fields or {}))
        self._built: dict[str, AgentProgram] = {}

    def __getitem__(self, name: str) -> AgentProgram:
        program = self._built.get(name)
        if program is None:
            impl, fields = self._blocks[name]
            why = self.document.unresolved.get(name)
            if why is not None:  # it ran with the `${...}` text in its fields
                raise InvalidInputError("config interpolation failed", [FieldViolation(name, f"{self.path}: {why}")])
            refuse_missing(fields, name, self.path)
            set_global_config_dict(self.document)
            agent = _build(self.path, self.root, name, impl, fields)
            app = agent.server_client.app  # type: ignore[attr-defined]
            program = self._built[name] = AgentProgram(name, impl, agent, app, _aggregation(self.path, name, impl, agent, app))
        return program

    def __contains__(self, name: object) -> bool:
        return name in self._blocks

    def __iter__(self) -> Iterator[str]:
        return iter(self._blocks)

    def __len__(self) -> int:
        return len(self._blocks)


def _build(path: Path, root: Path, name: str, impl: str, fields: dict[str, Any]) -> SimpleResponsesAPIAgent:
    entry = root / "responses_api_agents" / impl / str(fields.get("entrypoint", "app.py"))
    if not entry.is_file():
        how = f"{entry} is not there: port NeMo Gym's agent into the tree (python -m gym_metrics.nemo_gym.port nemo-gym/responses_api_agents/{impl} {entry.parent})"
        raise InvalidInputError(f"agent {name} ({impl}) has no code here", [FieldViolation(name, f"{path}: {how}")])
    module = load_entry(entry)
    found = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, SimpleResponsesAPIAgent) and c.__module__ == module.__name__]
    if len(found) != 1:
        why = f"{entry} defines {len(found)} SimpleResponsesAPIAgent subclasses (ported? its imports must name gym_metrics.nemo_gym)"
        raise InvalidInputError(f"agent {name} ({impl}) has no agent class", [FieldViolation(name, why)])
    cls = found[0]
    config_cls = cls.model_fields["config"].annotation
    try:
        config = config_cls.model_validate({"host": "127.0.0.1", "port": 0, **fields, "name": name})  # type: ignore[union-attr]
    except pydantic.ValidationError as exc:
        violations = [FieldViolation(f"{name}.{'.'.join(map(str, e['loc']))}", e["msg"]) for e in exc.errors()[:20]]
        raise InvalidInputError(f"{path}: the {impl} config does not fit {cls.__name__}", violations) from None
    refs = [getattr(config, key) for key in type(config).model_fields]
    model = getattr(config, "model_server", None)  # the policy's place (another model server, a judge, is given by URL)
    client = _AgentClient(name, {model.name} if isinstance(model, ModelServerRef) else set(), {r.name for r in refs if isinstance(r, ResourcesServerRef)})
    agent = cls(config=config, server_client=client)
    client.app = agent.setup_webserver()
    return agent


def _aggregation(path: Path, name: str, impl: str, agent: SimpleResponsesAPIAgent, app: Any) -> tuple[Any, ...] | None:
    """AgentProgram.hooks of `agent`: an `aggregate_metrics` of its own is probed (called with no
    rows: does it forward them to its resources server?); one that aggregates otherwise is
    refused (collect does not run it)."""
    cls = type(agent)
    if cls.aggregate_metrics is not SimpleResponsesAPIAgent.aggregate_metrics:
        if _forwards(app):
            return None
        why = f"{path}: its aggregate_metrics computes NeMo Gym's metrics itself, which collect does not run (it forwards none to its resources server)"
        raise InvalidInputError(f"agent {name} ({impl}) aggregates its own way", [FieldViolation(name, why)])
    hooks = ("compute_metrics", "get_key_metrics", "compute_repeat_metrics")
    return tuple(getattr(agent, h) if getattr(cls, h) is not getattr(SimpleResponsesAPIAgent, h) else None for h in hooks)


def _forwards(app: Any) -> bool:
    """Whether the app's `/aggregate_metrics` posts what it is given to its resources server (in
    a loop of its own, in a thread: this runs where the caller's loop may be running)."""
    import asyncio
    import threading

    found: list[bool] = []

    def probe() -> None:
        async def call() -> bool:
            forwarded: list[str] = []
            token = _FORWARDED.set(forwarded)
            try:
                status, _ = await post(app, "/aggregate_metrics", b'{"verify_responses": []}', {})
            finally:
                _FORWARDED.reset(token)
            return status == 200 and bool(forwarded)

        found.append(asyncio.run(call()))

    thread = threading.Thread(target=probe, name="gym-metrics-agent-probe")
    thread.start()
    thread.join(60)
    return bool(found and found[0])
