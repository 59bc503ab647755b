"""NeMo Gym's `NeMoGymAsyncOpenAI`: the small OpenAI-compatible client its agents and model
servers use to reach an endpoint directly (tau2's user model, browsecomp_agent's `/tokenize`,
terminus' policy), over `server_utils.request` (aiohttp). Re-exported by `openai_utils`.

As NeMo Gym's: the key as a bearer token over `default_headers`; an answer of a retryable status
(408, 409, 429, 5xx) tried again after 0.5 s, up to `max_http_attempts` times (a 429 of an
`internal` server does not use one up), the last one raised with its body; a 401 or 403 whose
body says the key is invalid, or a 429 that says the quota is spent, raises
`PermanentEndpointError` and every later call on that client raises it again without a request.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Optional

from aiohttp import RequestInfo
from multidict import CIMultiDict, CIMultiDictProxy
from pydantic import BaseModel, Field, PrivateAttr
from yarl import URL

from gym_metrics.nemo_gym._request import MAX_NUM_TRIES, RATE_LIMIT_ERROR_CODES, RETRY_ERROR_CODES, request
from gym_metrics.nemo_gym.server_utils import ServerResponseError, get_response_json, raise_for_status

PERMANENT_QUOTA_CODES = ("budget_exceeded", "insufficient_quota")
PERMANENT_AUTH_CODES = ("invalid_api_key", "invalid_api_token", "authentication_error")


class PermanentEndpointError(ServerResponseError):
    """The endpoint's key is spent or refused: the client's later calls skip the wire."""


def _error_codes(content: bytes) -> set[str]:
    """`error.code` / `error.type` (or a string `error`) of an OpenAI-style error body, lowered."""
    try:
        error = json.loads(content.decode("utf-8", errors="replace")).get("error")
    except (ValueError, AttributeError):
        return set()
    if isinstance(error, str):
        return {error.lower()}
    return {str(error[k]).lower() for k in ("code", "type") if error.get(k) is not None} if isinstance(error, dict) else set()


def _key_refused(content: bytes) -> bool:
    text = content.decode("utf-8", errors="replace").lower()
    return bool(_error_codes(content) & set(PERMANENT_AUTH_CODES)) or "invalid api key" in text or "incorrect api key" in text


class NeMoGymAsyncOpenAI(BaseModel):
    base_url: str
    api_key: str = Field(repr=False)
    internal: bool = False
    """A NeMo Gym server of the run's own: its 429s are waited out."""
    max_connection_retries: Optional[int] = None
    max_http_attempts: int = Field(default=MAX_NUM_TRIES, ge=1)
    default_headers: dict[str, str] = Field(default_factory=dict)
    _refused: Optional[tuple[int, bytes, str]] = PrivateAttr(default=None)

    def _raise_refused(self) -> None:
        assert self._refused is not None
        status, body, url = self._refused
        message = f"Skipping further requests to {self.base_url}: HTTP {status} is permanent (url={url} error_msg={body.decode('utf-8', errors='replace')[:200]})"
        where = URL(url)
        error = PermanentEndpointError(RequestInfo(where, "POST", CIMultiDictProxy(CIMultiDict()), where), (), status=status, message=message)
        error.response_content = body  # type: ignore[attr-defined]
        raise error

    def _refuse(self, status: int, body: bytes, url: str) -> None:
        self._refused = (status, body, url)
        print(f"[model_retry_stop url={url} status={status} error_msg={body.decode('utf-8', errors='replace')[:200]}]", flush=True)
        self._raise_refused()

    async def _post(self, url: str, body: Any = None, method: str = "POST") -> Any:
        headers = {**self.default_headers, "Authorization": f"Bearer {self.api_key}"}
        attempts, tries = self.max_http_attempts, 0
        while True:
            if self._refused is not None:
                self._raise_refused()
            tries += 1
            kwargs: dict[str, Any] = {"json": body} if body is not None else {}
            response = await request(method, url, _internal=self.internal, _max_connection_retries=self.max_connection_retries, headers=headers, **kwargs)
            if response.status in (401, 403):
                content = await response.read()
                if _key_refused(content):
                    self._refuse(response.status, content, url)
                break
            if response.status not in RETRY_ERROR_CODES:
                break
            content = await response.read()
            if response.status == 429 and _error_codes(content) & set(PERMANENT_QUOTA_CODES):
                self._refuse(response.status, content, url)
            if response.status in RATE_LIMIT_ERROR_CODES and self.internal:
                attempts += 1
            if tries >= attempts:
                await raise_for_status(response, content)
            kind = "rate_limit" if response.status in RATE_LIMIT_ERROR_CODES else "http_error"
            print(f"[model_retry url={url} status={response.status} kind={kind} try={tries} max_tries={attempts} error_msg={content.decode('utf-8', errors='replace')[:200]}]", flush=True)
            await asyncio.sleep(0.5)
        await raise_for_status(response)
        return await get_response_json(response)

    async def create_models(self) -> Any:
        return await self._post(f"{self.base_url}/models", method="GET")

    async def create_chat_completion(self, **body: Any) -> Any:
        return await self._post(f"{self.base_url}/chat/completions", body)

    async def create_completion(self, **body: Any) -> Any:
        return await self._post(f"{self.base_url}/completions", body)

    async def create_response(self, **body: Any) -> Any:
        return await self._post(f"{self.base_url}/responses", body)

    async def create_tokenize(self, **body: Any) -> Any:
        return await self._post(f"{self.base_url.removesuffix('/v1')}/tokenize", body)


__all__ = ["NeMoGymAsyncOpenAI", "PermanentEndpointError"]
