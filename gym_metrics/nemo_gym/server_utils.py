"""What ported environments take from NeMo Gym's server utilities: the session key, and a
ServerClient that calls the model servers a config names (a judge: `judge_model_server`) at the
URLs given when serving (`gym-metrics serve CONFIG.yaml --server judge=http://...`).

A call answers with a ServerResponse offering what environments read of aiohttp's response
(`ok`, `status`, `read()`, `json()`, `raise_for_status()`), so `raise_for_status(response)` and
`get_response_json(response)` work as they do under NeMo Gym. A request body is sent as NeMo
Gym sends it: a pydantic model (request params) as `model_dump(exclude_unset=True)`, by orjson."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import orjson
from pydantic import BaseModel

from gym_metrics.errors import FieldViolation, InvalidInputError

SESSION_ID_KEY = "session_id"
MAX_ANSWER_BYTES = 64 << 20
"""A model server's answer is refused past this size (the call is bounded)."""


class ServerResponseError(Exception):
    """A model server answered with an HTTP error status."""

    def __init__(self, status: int, content: bytes) -> None:
        super().__init__(f"HTTP {status}: {content[:300].decode('utf-8', 'replace')}")
        self.status, self.response_content = status, content


class _Content:
    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self) -> bytes:
        return self._body


class ServerResponse:
    """A finished HTTP answer, read whole (bounded by MAX_ANSWER_BYTES)."""

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        self.status, self.headers = status, dict(headers)
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
            raise ServerResponseError(self.status, self._body)


class ServerClient:
    """Posts to the servers a config names. `urls` maps a server's name to its base URL."""

    def __init__(self, urls: Optional[Mapping[str, str]] = None, *, timeout_s: float = 600.0) -> None:
        self.urls = dict(urls or {})
        self.timeout_s = timeout_s
        self._client: Any = None

    def base_url(self, server_name: str) -> str:
        try:
            return self.urls[server_name].rstrip("/")
        except KeyError:
            known = ", ".join(sorted(self.urls)) or "none"
            raise InvalidInputError(
                "unknown model server",
                [FieldViolation("server_name", f"{server_name!r} has no URL (serve --server {server_name}=URL); known: {known}")],
            ) from None

    async def request(self, method: str, server_name: str, url_path: str, json: Any = None, **kwargs: Any) -> ServerResponse:
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout_s)
        url = f"{self.base_url(server_name)}/{url_path.lstrip('/')}"
        headers = dict(kwargs.get("headers") or {})
        content = None
        if json is not None:  # as NeMo Gym sends it: a pydantic model as its set fields, by orjson
            if isinstance(json, BaseModel):
                json = json.model_dump(exclude_unset=True)
            content = orjson.dumps(json)
            headers["Content-Type"] = "application/json"
        async with self._client.stream(method, url, content=content, headers=headers) as answer:
            body = bytearray()
            async for chunk in answer.aiter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise ServerResponseError(413, b"answer larger than %d bytes" % MAX_ANSWER_BYTES)
            return ServerResponse(answer.status_code, bytes(body), answer.headers)

    async def post(self, server_name: str, url_path: str, json: Any = None, **kwargs: Any) -> ServerResponse:
        return await self.request("POST", server_name, url_path, json, **kwargs)

    async def get(self, server_name: str, url_path: str, **kwargs: Any) -> ServerResponse:
        return await self.request("GET", server_name, url_path, None, **kwargs)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


async def raise_for_status(response: ServerResponse, content: Optional[bytes] = None) -> None:
    """Raise ServerResponseError (its `response_content` set) for an HTTP error status."""
    if not response.ok:
        raise ServerResponseError(response.status, content if content is not None else await response.read())


async def get_response_json(response: ServerResponse) -> Any:
    return orjson.loads(await response.read())


def is_nemo_gym_fastapi_entrypoint(file: str) -> bool:
    """False: under gym-metrics an app.py is never NeMo Gym's FastAPI worker entrypoint (its
    `if is_nemo_gym_fastapi_entrypoint(__file__): ...` block does not run)."""
    return False


__all__ = [
    "MAX_ANSWER_BYTES",
    "SESSION_ID_KEY",
    "ServerClient",
    "ServerResponse",
    "ServerResponseError",
    "get_response_json",
    "is_nemo_gym_fastapi_entrypoint",
    "raise_for_status",
]
