"""Async client of an OpenAI-compatible chat-completions judge.

Pooling, the concurrency bound, retries (408, 429, 5xx, timeouts, connection errors, with
backoff or `Retry-After`) and the bearer key's scrubbing are the shared `_http.PooledHttp`'s;
this module builds the chat-completions request and reads the reply (the key masked in it, so a
judge that echoes the key cannot put it in a row error or a result).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gym_metrics._util.http import SNIPPET, HttpError, PooledHttp
from gym_metrics._util.masking import without_url_credentials
from gym_metrics.scorers.judge._config import JudgeConfig

log = logging.getLogger("gym_metrics.scorers.judge")


class JudgeError(HttpError):
    """The judge could not give an answer: HTTP error, timeout, or a malformed response."""


class JudgeClient(PooledHttp):
    """`await client.complete(messages)` -> the judge's reply text."""

    error = JudgeError
    config: JudgeConfig

    def __init__(self, config: JudgeConfig) -> None:
        super().__init__(config, name="judge", log=log)

    def __repr__(self) -> str:  # the key and the URL's password stay out
        return f"JudgeClient(endpoint={without_url_credentials(self.config.endpoint())!r}, model={self.config.model!r})"

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """The content of the first choice of one chat completion, after retries."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.config.temperature if temperature is None else temperature,
        }
        tokens = max_tokens if max_tokens is not None else self.config.max_tokens
        if tokens is not None:
            body["max_tokens"] = tokens
        response = await self.post_json(self.config.endpoint(), body)
        return self._content(response.content)

    def _content(self, raw: bytes | bytearray) -> str:
        try:
            data = self.scrub_answer(raw, orjson.loads(raw))
            content = data["choices"][0]["message"].get("content")
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
            snippet = self.scrub(bytes(raw).decode("utf-8", "replace"), SNIPPET)
            raise JudgeError(f"judge response is not a chat completion: {snippet}") from None
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise JudgeError("judge reply has no text content")
        return content
