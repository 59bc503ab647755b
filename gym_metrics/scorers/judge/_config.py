"""JudgeConfig: which OpenAI-compatible chat-completions endpoint judges, and how hard to push it.

The connection knobs (`api_key_env`, `timeout_seconds`, `max_retries`, `max_concurrency`,
`backoff_seconds`, `max_backoff_seconds`) are the shared HttpClientConfig's. The API key itself
is never part of the config: only the NAME of the environment variable holding it.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from pydantic import Field

from gym_metrics._util.http import HttpClientConfig


class JudgeConfig(HttpClientConfig):
    """An OpenAI-compatible chat-completions judge (vLLM, NIM, OpenAI, ...)."""

    url: str = Field(min_length=1)
    """Base URL such as `http://127.0.0.1:8000/v1`: requests go to `{url}/chat/completions`.
    A URL whose path already ends in `/chat/completions` is used as it is; a query string is
    kept after the path."""
    model: str = Field(min_length=1)
    """The judge's model name, sent as `model` in every request."""
    temperature: float = Field(default=0.0, ge=0.0)
    """Sampling temperature of every judge call (a metric may override it where its reference
    implementation hard-codes one; see the metric's docs)."""
    max_tokens: int | None = Field(default=None, gt=0)
    """`max_tokens` of every judge call; None leaves it to the server."""

    def endpoint(self) -> str:
        """The full chat-completions URL: the path joined before any query string
        (`...?api-version=1` stays a query, not part of the path)."""
        parts = urlsplit(self.url)
        path = parts.path.rstrip("/")
        if not path.endswith("/chat/completions"):
            path = f"{path}/chat/completions"
        return urlunsplit(parts._replace(path=path))
