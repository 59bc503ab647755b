"""What ported environments take from NeMo Gym's server utilities: the session key, and a
ServerClient that calls the model servers a config names (a judge: `judge_model_server`), given
when serving: `gym-metrics serve CONFIG.yaml --server judge=URL` or `--server judge=TARGET.json`.

- A URL is a server NeMo Gym would run (a model server, another resources server): calls go to
  URL + path as the environment makes them, through gym-metrics' pooled HTTP client (bounded
  attempts, answers and concurrency). Every HTTP status is answered, as aiohttp answers it under
  NeMo Gym (the environment checks it); a timeout or a connection that fails after the retries
  raises HttpError, as NeMo Gym's client raises.
- A target file (the `type: model` JSON `evaluate --target-config` takes) stands in for NeMo
  Gym's model server: `/v1/responses` and `/v1/chat/completions` calls go through gym-metrics'
  target client, which sends the target's model name, its API key (`api_key_env`) and
  inference settings, and converts a Responses call for a chat-only endpoint (`api: chat`) and
  its answer back, as NeMo Gym's vLLM model server does.

`request(method, url, ...)` is NeMo Gym's outbound call to any URL (a search API), answered with
aiohttp's ClientResponse (gym_metrics/nemo_gym/_request.py); `get_server_url(name)` is the URL a
model server was given by.

A call answers with a ServerResponse offering what environments read of aiohttp's response
(`ok`, `status`, `read()`, `json()`, `raise_for_status()`), so `raise_for_status(response)` and
`get_response_json(response)` work as they do under NeMo Gym. A request body is sent as NeMo
Gym sends it: a pydantic model (request params) as `model_dump(exclude_unset=True)`, by orjson."""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Optional, Union

import orjson
from aiohttp import ClientResponseError as ServerResponseError
from aiohttp import RequestInfo
from multidict import CIMultiDict, CIMultiDictProxy
from pydantic import BaseModel
from yarl import URL

from gym_metrics._util.http import MAX_ANSWER_BYTES, Answer, HttpClientConfig, PooledHttp
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym._request import MAX_NUM_TRIES, request
from gym_metrics.nemo_gym.config_types import BaseServerConfig
from gym_metrics.nemo_gym.global_config import get_first_server_config_dict
from gym_metrics.nemo_gym.rollout_correlation import ROLLOUT_PATH_PREFIX
from gym_metrics.targets import GenerationError, ModelTarget, ModelTargetConfig

SESSION_ID_KEY = "session_id"
TIMEOUT_SECONDS = 600.0
"""One attempt's deadline for a server given by URL (a judge may think for minutes)."""
MAX_CONCURRENCY = 256
"""Calls in flight to one server given by URL (NeMo Gym's client has no bound; this one has)."""
TOKEN_CAPTURE_PATH_SEGMENT = "training-token-capture"
_GIVEN: dict[str, Union[str, HttpClientConfig, ModelTargetConfig]] = {}
"""The model servers given to this process's ServerClients, by name (get_server_url reads it)."""


def response_error(status: int, content: bytes, url: str, headers: Mapping[str, str] | None = None) -> ServerResponseError:
    """The error an HTTP error status raises, as NeMo Gym's `raise_for_status` raises it:
    aiohttp's ClientResponseError (its text `500, message='Internal Server Error', url='...'`,
    which a judge-failed row's `failure_reason` carries), the body as `response_content`."""
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
    where = URL(url)
    info = RequestInfo(where, "POST", CIMultiDictProxy(CIMultiDict()), where)
    error = ServerResponseError(info, (), status=status, message=reason, headers=CIMultiDictProxy(CIMultiDict(headers or {})))
    error.response_content = content  # type: ignore[attr-defined]  # (NeMo Gym sets it too)
    return error


class _Content:
    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self) -> bytes:
        return self._body


class ServerResponse:
    """A finished HTTP answer, read whole (bounded: 64 MiB, an error status's first 64 KiB)."""

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str], url: str = "") -> None:
        self.status, self.headers, self.url = status, dict(headers), url
        self.cookies: dict[str, str] = {}
        """None set: a rollout's session is kept by its episode here, not in a cookie."""
        self.content = _Content(body)
        self._body = body

    @property
    def ok(self) -> bool:
        return self.status < 400

    async def read(self) -> bytes:
        return self._body

    async def text(self) -> str:
        return self._body.decode("utf-8", "replace")

    async def json(self) -> Any:
        return orjson.loads(self._body)

    def raise_for_status(self) -> None:
        if not self.ok:
            raise response_error(self.status, self._body, self.url, self.headers)


class _Passthrough(PooledHttp):
    """A server given by URL: every status is the environment's to read, so none is an error
    or retried here; timeouts and connection failures are retried, then raised."""

    retry_statuses = frozenset()

    def checked(self, answer: Answer, truncated: bool = False) -> Answer:
        return answer


_JSON = {"Content-Type": "application/json"}


class ServerClient:
    """Posts to the servers a config names. `servers` maps a server's name to its base URL or
    to a model target config (see the module docstring); an HttpClientConfig sets the
    pass-through's own bounds (timeout, retries, concurrency)."""

    def __init__(self, servers: Optional[Mapping[str, Union[str, HttpClientConfig]]] = None) -> None:
        self.servers = dict(servers or {})
        _GIVEN.update(self.servers)
        self._clients: dict[str, Union[_Passthrough, ModelTarget]] = {}

    def _client(self, server_name: str) -> Union[_Passthrough, ModelTarget]:
        client = self._clients.get(server_name)
        if client is None:
            try:
                given = self.servers[server_name]
            except KeyError:
                known = ", ".join(sorted(self.servers)) or "none"
                why = f"{server_name!r} is not given (serve --server {server_name}=URL or =TARGET.json); known: {known}"
                raise InvalidInputError("unknown model server", [FieldViolation("server_name", why)]) from None
            if isinstance(given, ModelTargetConfig):
                client = ModelTarget(given)
            else:
                if not isinstance(given, HttpClientConfig):
                    given = HttpClientConfig(url=given, timeout_seconds=TIMEOUT_SECONDS, max_concurrency=MAX_CONCURRENCY)
                client = _Passthrough(given.model_copy(update={"url": given.url.rstrip("/")}), name=f"model server {server_name!r}")
            self._clients[server_name] = client
        return client

    async def request(self, method: str, server_name: str, url_path: str, json: Any = None, **kwargs: Any) -> ServerResponse:
        if method.upper() != "POST":
            raise InvalidInputError("unsupported model server call", [FieldViolation("method", f"{method!r}: only POST is sent")])
        if isinstance(json, BaseModel):  # as NeMo Gym sends it: a pydantic model as its set fields
            json = json.model_dump(exclude_unset=True)
        client = self._client(server_name)
        if isinstance(client, ModelTarget):
            return await _target_call(client, url_path, json)
        url = f"{client.config.url}/{url_path.lstrip('/')}"
        answer = await client.post_json(
            url, b"" if json is None else orjson.dumps(json), headers={**(kwargs.get("headers") or {}), **(_JSON if json is not None else {})}
        )
        return ServerResponse(answer.status_code, bytes(answer.content), answer.headers, url)

    async def post(self, server_name: str, url_path: str, json: Any = None, **kwargs: Any) -> ServerResponse:
        return await self.request("POST", server_name, url_path, json, **kwargs)

    async def get(self, server_name: str, url_path: str, **kwargs: Any) -> ServerResponse:
        return await self.request("GET", server_name, url_path, None, **kwargs)

    @classmethod
    def load_head_server_config(cls) -> BaseServerConfig:
        """NeMo Gym's head server (`host`, `port`) from the config's `head_server` block. gym-metrics
        runs no head server: only a config that names one has it; else a KeyError that says so."""
        from gym_metrics.nemo_gym.global_config import HEAD_SERVER_KEY_NAME, get_global_config_dict  # (looked up per call, as global_config_dict)

        block = get_global_config_dict().get(HEAD_SERVER_KEY_NAME)
        if block is None:
            raise KeyError(f"{HEAD_SERVER_KEY_NAME}: the config names no head server (gym-metrics serves without NeMo Gym's head server)")
        return BaseServerConfig.model_validate(block)

    @property
    def global_config_dict(self) -> Any:
        """The config document served (get_global_config_dict): each server given here has its
        `host` and `port` in its block, as NeMo Gym's launcher fills them in."""
        from gym_metrics.nemo_gym.global_config import get_global_config_dict

        return get_global_config_dict()

    def _build_server_base_url(self, server_config_dict: Any) -> str:
        """`http://host:port` of a server block's fields (a mapping or an object with attributes)."""
        get = server_config_dict.get if isinstance(server_config_dict, Mapping) else lambda k: getattr(server_config_dict, k, None)
        return f"http://{get('host')}:{get('port')}"

    def poll_for_status(self, server_name: str, *, timeout_seconds: float = 5) -> str:
        """`success` when the server given for `server_name` answers an HTTP GET of its base URL
        with any status, else `connection_error`, `timeout` or `unknown_error` (NeMo Gym's
        answers; an environment waits for its judge with it). A blocking call, as NeMo Gym's."""
        import socket
        import urllib.error
        import urllib.request

        given = self.servers.get(server_name)
        if given is None:
            return "connection_error"
        url = given if isinstance(given, str) else given.url
        try:
            with urllib.request.urlopen(url, timeout=timeout_seconds):
                return "success"
        except urllib.error.HTTPError:
            return "success"  # an answer: there may be no route at /
        except (socket.timeout, TimeoutError):
            return "timeout"
        except (urllib.error.URLError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            return "timeout" if isinstance(reason, (socket.timeout, TimeoutError)) else "connection_error"
        except Exception:  # noqa: BLE001 - NeMo Gym's catch-all answer
            return "unknown_error"

    async def aclose(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.aclose()


async def _target_call(target: ModelTarget, url_path: str, body: Any) -> ServerResponse:
    """A model call through the target client: a Responses call in any api, a chat one in chat."""
    path = url_path.partition("?")[0].rstrip("/")
    url = f"{target.config.url.rstrip('/').removesuffix('/v1')}/{url_path.lstrip('/')}"
    if not isinstance(body, Mapping):
        return _error(400, "a model call's body must be a JSON object", url)
    try:
        if path.endswith("/responses"):
            answer = (await target.generate(body)).response
        elif path.endswith("/chat/completions") and target.config.api == "chat":
            answer = await target.raw(body)
        elif path.endswith("/chat/completions"):
            return _error(400, "this target speaks the Responses API (api: responses); a chat completions call needs api: chat", url)
        else:
            return _error(404, f"a model target answers /v1/responses and /v1/chat/completions, not {url_path}", url)
    except GenerationError as exc:
        if exc.status is None:  # no answer at all: raised, as a failed connection is
            raise
        return _error(exc.status, str(exc), url)
    return ServerResponse(200, orjson.dumps(answer), _JSON, url)


def _error(status: int, message: str, url: str) -> ServerResponse:
    return ServerResponse(status, orjson.dumps({"error": {"message": message}}), _JSON, url)


async def raise_for_status(response: ServerResponse, content: Optional[bytes] = None) -> None:
    """Raise aiohttp's ClientResponseError (`ServerResponseError`, its `response_content` set)
    for an HTTP error status, as NeMo Gym does: the body read from `response.content` unless
    given, the error the response's own `raise_for_status` raises (an aiohttp response, or a
    test's stand-in for one, raises its own)."""
    if response.ok:
        return
    if content is None:
        content = await response.content.read()
    try:
        response.raise_for_status()
    except ServerResponseError as error:
        error.response_content = content  # type: ignore[attr-defined]  # (NeMo Gym sets it too)
        raise


async def get_response_json(response: ServerResponse) -> Any:
    return orjson.loads(await response.read())


def get_server_url(server_name: str) -> str:
    """The base URL of a model server given by name (`serve --server NAME=URL`), where NeMo Gym
    gives `http://host:port` of the server it runs: environments append `/v1` or a route."""
    given = _GIVEN.get(server_name)
    if given is None:
        known = ", ".join(sorted(_GIVEN)) or "none"
        why = f"{server_name!r} is not given (serve --server {server_name}=URL); known: {known}"
        raise InvalidInputError("unknown model server", [FieldViolation("server_name", why)])
    url = given if isinstance(given, str) else given.url
    url = url.rstrip("/")
    return url.removesuffix("/v1") if isinstance(given, ModelTargetConfig) else url


def rollout_path_prefix(rollout_id: Optional[str], *, token_capture: bool = False) -> str:
    """`/ng-rollout/<id>` (then `/training-token-capture`): the path prefix NeMo Gym's model
    server reads a rollout's identity from; empty without an id."""
    if not rollout_id:
        return ""
    return f"/{ROLLOUT_PATH_PREFIX}/{rollout_id}" + (f"/{TOKEN_CAPTURE_PATH_SEGMENT}" if token_capture else "")


def apply_rollout_prefix(base_url: str, rollout_id: Optional[str], *, token_capture: bool = False) -> str:
    return base_url.rstrip("/") + rollout_path_prefix(rollout_id, token_capture=token_capture) if rollout_id else base_url


def is_nemo_gym_fastapi_entrypoint(file: str) -> bool:
    """False: under gym-metrics an app.py is never NeMo Gym's FastAPI worker entrypoint (its
    `if is_nemo_gym_fastapi_entrypoint(__file__): ...` block does not run)."""
    return False


__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_CONCURRENCY",
    "MAX_NUM_TRIES",
    "SESSION_ID_KEY",
    "ServerClient",
    "ServerResponse",
    "ServerResponseError",
    "TIMEOUT_SECONDS",
    "TOKEN_CAPTURE_PATH_SEGMENT",
    "apply_rollout_prefix",
    "get_first_server_config_dict",
    "get_response_json",
    "get_server_url",
    "is_nemo_gym_fastapi_entrypoint",
    "raise_for_status",
    "request",
    "response_error",
    "rollout_path_prefix",
]
