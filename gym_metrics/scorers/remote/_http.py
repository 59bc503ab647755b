"""Async POST of a rendered body to the user's endpoint, its JSON answer parsed.

Pooling, the concurrency bound, retries (408, 429, 500, 502, 503, 504, timeouts, connection
errors, with backoff or `Retry-After`) and the bearer key's scrubbing are the shared
`_http.PooledHttp`'s; this module narrows the retried statuses to the ones NeMo Evaluator
retries and turns failures into row errors. The key is masked in the parsed answer, so a score
that fails to parse (`read_score`'s message quotes it) or an evaluator error never shows it.
"""

from __future__ import annotations

import logging
from typing import Any

from gym_metrics._util.http import SNIPPET, HttpError, PooledHttp
from gym_metrics._util.jsonio import loads
from gym_metrics.scorers import RowError
from gym_metrics.scorers.remote._config import RemoteScorerConfig
from gym_metrics.scorers.remote._template import encode_body

log = logging.getLogger("gym_metrics.scorers.remote")


class RemoteClient(PooledHttp):
    """`await client.post_row(body)` -> the endpoint's parsed JSON answer, after retries.
    Failures raise RowError("endpoint", reason), or RowError("body", ...) for a body that is
    not JSON."""

    retry_statuses = frozenset({408, 429, 500, 502, 503, 504})  # any other non-2xx fails at once
    timeout_text = "timed out after {seconds} s"  # the row error's field already says "endpoint"
    status_text = "HTTP {status}: {body}"
    config: RemoteScorerConfig

    def __init__(self, config: RemoteScorerConfig) -> None:
        super().__init__(config, name="endpoint", log=log)

    async def post_row(self, body: Any) -> Any:
        payload = encode_body(body)
        try:
            raw = (await self.post_json(self.config.url, payload)).content
        except HttpError as exc:
            raise RowError("endpoint", str(exc)) from None
        try:  # as Python's json (so the SDK, through httpx) reads it: NaN / Infinity, big integers
            data = loads(raw)
        except ValueError as exc:
            raise RowError("endpoint", self._unreadable(raw, exc)) from None
        return self.scrub_answer(raw, data)

    def _unreadable(self, raw: bytes | bytearray, exc: ValueError) -> str:
        """Why a 2xx answer could not be read: valid JSON Python's json still refuses (an
        integer past its 4,300 digits, nesting past its stack) is said to be that, not "not
        valid JSON"."""
        text = str(exc)
        if "integer string conversion" in text:  # "Exceeds the limit (4300 digits) ...: value has N digits; ..."
            digits = text.split(": ", 1)[-1].split(";", 1)[0]
            return f"answer holds an integer of more than 4,300 digits ({digits}), which Python's json (so NeMo Evaluator too) does not read"
        if "nested too deeply" in text:
            return f"answer is {text} for Python's json to read"
        snippet = self.scrub(bytes(raw).decode("utf-8", "replace"), SNIPPET)
        return f"answer is not valid JSON: {snippet!r}"
