"""JudgeConfig: which OpenAI-compatible chat-completions endpoint judges, and how hard to push it.

The API key itself is never part of the config: only the NAME of the environment variable
holding it, so configs can be logged, printed and checked in without leaking a secret.
"""

from __future__ import annotations

import pydantic
from pydantic import Field


class JudgeConfig(pydantic.BaseModel):
    """An OpenAI-compatible chat-completions judge (vLLM, NIM, OpenAI, ...)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    url: str = Field(min_length=1)
    """Base URL such as `http://127.0.0.1:8000/v1`: requests go to `{url}/chat/completions`.
    A URL that already ends in `/chat/completions` is used as it is."""
    model: str = Field(min_length=1)
    """The judge's model name, sent as `model` in every request."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (sent as `Authorization: Bearer`).
    None: no key is sent. The key never appears in logs, errors, reprs or outputs."""
    temperature: float = Field(default=0.0, ge=0.0)
    """Sampling temperature of every judge call (a metric may override it where its reference
    implementation hard-codes one; see the metric's docs)."""
    max_tokens: int | None = Field(default=None, gt=0)
    """`max_tokens` of every judge call; None leaves it to the server."""
    timeout_seconds: float = Field(default=30.0, gt=0)
    """Seconds one HTTP attempt may wait to connect, and for each read or write (httpx's
    timeout); a judge that stays silent longer is a timeout, retried like a 503."""
    max_retries: int = Field(default=3, ge=0)
    """Retries after a retryable failure (408, 429, 5xx, timeout, connection error)."""
    max_concurrency: int = Field(default=8, ge=1)
    """Judge requests in flight at once, over all rows this metric scores."""
    backoff_seconds: float = Field(default=0.5, ge=0)
    """First retry delay; it doubles on each retry, with jitter (half fixed, half random)."""
    max_backoff_seconds: float = Field(default=30.0, ge=0)
    """Cap on one retry delay, including a server's `Retry-After`."""

    @pydantic.field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    def endpoint(self) -> str:
        """The full chat-completions URL."""
        url = self.url.rstrip("/")
        return url if url.endswith("/chat/completions") else f"{url}/chat/completions"
