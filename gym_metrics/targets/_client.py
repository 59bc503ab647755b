"""Async clients of the generation targets: one call in, one Responses-shaped answer out, with
its usage, latency and attempt count.

Pooling, the concurrency bound, per-attempt timeouts, retries (408, 429, 5xx, timeouts,
connection errors, with backoff and jitter or the server's `Retry-After`) and the bearer key's
scrubbing are the shared `_http.PooledHttp`'s; this module builds the request, reads the answer
(the key masked in it, should the server echo it) and converts it. A generation that fails after its retries raises GenerationError, which
callers record as a failed rollout (`_gm_error` kind `generation`) or a row error on `target`.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from gym_metrics._util.http import SNIPPET, Answer, HttpError, PooledHttp
from gym_metrics.targets import _capture as capture
from gym_metrics.targets._capture import Exchange
from gym_metrics.targets._tokens import REQUEST_PARAMS, TokenInfoError, chat_token_fields
from gym_metrics.targets._wire import ByteBudget, WirePool, WireTimeout, WireTooLarge, WireUnreachable
from gym_metrics.targets._config import AgentTargetConfig, ModelTargetConfig, TargetConfig
from gym_metrics.targets._chat_dialect import ChatConversionError, responses_request_to_chat
from gym_metrics.targets._convert import (
    chat_request_to_responses,
    chat_to_responses,
    compile_path,
    function_call_item,
    message_item,
    output_text,
    strip_reasoning,
    with_request_fields,
)

log = logging.getLogger("gym_metrics.targets")

@dataclass
class _Call:
    """One generation's HTTP attempts, and what is captured of them (targets/_capture.py)."""

    dialect: str
    body: Any
    attempts: int = 0
    answered: Exchange | None = None
    heard: list[float] = field(default_factory=list)
    """When each attempt's answer began to come (time.perf_counter), over the lean pool."""


_call: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("gym_metrics_target_call", default=None)


class GenerationError(HttpError):
    """A generation that gave no usable answer after its retries (HTTP error, timeout,
    connection error, or an answer that is not one). The message never holds the API key."""

    kind: ClassVar[str] = "generation"
    """The `_gm_error` kind of a rollout that failed this way."""
    row_field: ClassVar[str] = "target"
    """The field of the row error an evaluation records."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message, status=status, retryable=retryable, retry_after=retry_after)
        self.attempts = 0
        """HTTP attempts this generation made (set when it gives up)."""


@dataclass(frozen=True)
class Usage:
    """Tokens one generation used (None where the server did not say)."""

    input_tokens: int | None = None
    output_tokens: int | None = None

    @property
    def total_tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    @classmethod
    def of(cls, response: Mapping[str, Any]) -> Usage:
        """The usage of a Responses-shaped answer."""
        usage = response.get("usage")
        if not isinstance(usage, Mapping):
            return cls()
        i, o = usage.get("input_tokens"), usage.get("output_tokens")
        return cls(i if isinstance(i, int) else None, o if isinstance(o, int) else None)


@dataclass(frozen=True)
class Generation:
    """One generation: the answer in Responses API shape, its usage, the wall time of the
    whole call (retries and backoff included) and the HTTP attempts it took."""

    response: dict[str, Any]
    usage: Usage
    latency_s: float
    attempts: int
    end_token: str | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        """The answer's message text, as generated (reasoning part included)."""
        return output_text(self.response)

    @property
    def answer(self) -> str:
        """The message text without its reasoning part (the target's `reasoning.end_token`)."""
        return strip_reasoning(self.text, self.end_token)


class _Target(PooledHttp):
    """Counts the attempts of each call (in its own context, so concurrent calls do not mix)
    and times it."""

    error = GenerationError

    _wire: WirePool | None = None
    """The lean connection pool, when the caller asked for it (see _wire.py)."""

    dialect = "agent"
    """What a captured model call says it spoke (targets/_capture.py)."""

    async def _attempt(self, url: str, payload: bytes, headers: dict[str, str]) -> Answer:
        call = _call.get()
        exchange = None
        if call is not None:
            call.attempts += 1
            exchange = capture.begin(call.dialect, call.body)
        start = time.perf_counter()
        try:
            if self._wire is not None:
                answer = await self._wire_attempt(self._wire, url, payload, headers)
            else:
                answer = await super()._attempt(url, payload, headers)
        except BaseException as exc:  # a failed attempt is a model call too (cancelled ones included)
            if exchange is not None:
                capture.end(exchange, start, getattr(exc, "status", None), error=exc)
            raise
        if exchange is not None and call is not None:
            capture.end(exchange, start, answer.status_code)
            if call.heard:  # its time to first byte, as NeMo Gym's model server times its first body chunk
                exchange.ttft_ms = round((call.heard.pop() - start) * 1000, 2)
            call.answered = exchange
        return answer

    async def _wire_attempt(self, wire: WirePool, url: str, payload: bytes, headers: dict[str, str]) -> Answer:
        """PooledHttp._attempt's contract (messages, retryable kinds, limits) over the lean pool."""
        self.attempts += 1
        try:
            call = _call.get()
            status, fields, body = await wire.post(url, payload, headers, call.heard if call is not None else None)
        except WireTimeout:
            raise self.error(self.timeout_text.format(name=self._name, seconds=self.config.timeout_seconds), retryable=True) from None
        except WireUnreachable as exc:
            raise self.error(self.scrub(self.unreachable_text.format(name=self._name, error=str(exc))), retryable=True) from None
        except WireTooLarge as exc:
            raise self.too_large(str(exc)) from None
        return self.checked(Answer(status, fields, body))

    async def aclose(self) -> None:
        if self._wire is not None:
            await self._wire.aclose()
        await super().aclose()

    async def _post(self, url: str, body: Any) -> tuple[Any, float, int]:
        """The parsed JSON answer, the call's seconds and its attempts; GenerationError."""
        call = _Call(self.dialect, body)
        token = _call.set(call)
        start = time.perf_counter()
        try:
            raw = (await self.post_json(url, body)).content
        except HttpError as exc:
            error = exc if isinstance(exc, GenerationError) else GenerationError(str(exc), status=exc.status)
            error.attempts = call.attempts
            raise error from None
        except TypeError as exc:  # nothing was sent
            raise GenerationError(f"{self._name} request body is not JSON-serialisable: {exc}") from None
        finally:
            _call.reset(token)
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            if call.answered is not None:
                call.answered.error, call.answered.error_category = "the answer is not JSON", "capture_parse_error"
            raise self._bad(raw, "is not JSON", call.attempts) from None
        scrubbed = self.scrub_answer(raw, data)
        masked = scrubbed is not data and scrubbed != data
        data = without_token_fields(scrubbed) if masked else scrubbed
        if call.answered is not None:
            call.answered.response, call.answered.masked = data, masked
        return data, time.perf_counter() - start, call.attempts

    def _bad(self, raw: bytes | bytearray, why: str, attempts: int) -> GenerationError:
        snippet = self.scrub(bytes(raw[: 4 * SNIPPET]).decode("utf-8", "replace"), SNIPPET, truncated=len(raw) > 4 * SNIPPET)
        error = GenerationError(f"{self._name} answer {why}: {snippet}")
        error.attempts = attempts
        return error


class ModelTarget(_Target):
    """`await target.generate(request)` -> Generation, from an OpenAI-compatible model.

    `request` is a Responses API request (`input`, `instructions`, `tools`, ... as NeMo Gym's
    `responses_create_params`) or a chat-completions one (`messages`, `tools`, ... as NeMo
    Evaluator's prompt template); it is converted to the configured `api`. The config's model,
    system prompt and given inference parameters are applied on top."""

    config: ModelTargetConfig

    def __init__(
        self, config: ModelTargetConfig, *, lean_http: bool = False, budget: ByteBudget | None = None, think_tags: bool = False,
        token_ids: bool = False,
    ) -> None:
        """`lean_http`: send over the lean keep-alive pool of _wire.py instead of httpx
        (collect does, for its rates); the retries, errors, limits and key handling are the
        same. `budget`: the bytes of answers its reads may hold at once (lean pool only).
        `think_tags`: a chat answer's `<think>` blocks become reasoning unless the config says
        otherwise (`reasoning.think_tags`) or names an end token (collect: NeMo Gym's reading).
        `token_ids`: ask a chat endpoint (vLLM) for the token IDs and log-probs and put them on
        the answer's last output item, as NeMo Gym's vLLM model server does (targets/_tokens.py);
        an answer without them is kept without (the caller's capture reports the gap)."""
        super().__init__(config, name="model", log=log)
        self.dialect = config.api
        self.token_ids = token_ids
        self.budget = budget
        given = config.reasoning.think_tags
        self.think_tags = given if given is not None else think_tags and config.reasoning.end_token is None
        if lean_http:
            self._wire = WirePool(config.endpoint(), config.max_concurrency, config.timeout_seconds, config.max_answer_bytes, budget)

    def __repr__(self) -> str:  # the key stays out
        return f"ModelTarget(endpoint={self.config.endpoint()!r}, model={self.config.model!r}, api={self.config.api!r})"

    async def generate(self, request: Mapping[str, Any]) -> Generation:
        """One generation, after retries; GenerationError when there is none."""
        own = self._own_body(request)
        body = _with_metadata_params(own) if self.config.api == "chat" else own
        data, seconds, attempts = await self._post(self.config.endpoint(), body)
        try:
            if self.config.api == "chat":
                # The answer echoes the request as sent, without what metadata.extra_body added
                # (NeMo Gym's vLLM server adds it after its converter, so its answer leaves it out).
                response = with_request_fields(chat_to_responses(data, self.think_tags), _sent(request, own))
                if self.token_ids:
                    _place_tokens(response, data)
            else:
                response = _responses_answer(data)
        except (KeyError, IndexError, TypeError, AttributeError):
            raise self._bad(orjson.dumps(data), f"is not a {self.config.api} answer", attempts) from None
        if response.get("status") == "failed":  # a Responses answer that says it failed: no generation, not a 0
            said = response.get("error")
            error: dict[str, Any] = said if isinstance(said, dict) else {}
            failed = GenerationError(self.scrub(f"{self._name} answered status failed: {error.get('code', '?')}: {error.get('message', '')}"))
            failed.attempts = attempts
            raise failed
        return Generation(response, Usage.of(response), seconds, attempts, self.config.reasoning.end_token)

    async def raw(self, request: Mapping[str, Any]) -> Any:
        """The endpoint's own JSON answer to `request` (sent as `generate` sends it), for
        callers that read the configured API's shape themselves; GenerationError."""
        return (await self._post(self.config.endpoint(), self.request_body(request)))[0]

    def request_body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON body sent for `request` (see the class docstring)."""
        body = self._own_body(request)
        return _with_metadata_params(body) if self.config.api == "chat" else body

    def _own_body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The body before a chat request's metadata params are applied."""
        chat = self.config.api == "chat"
        if chat:
            try:
                body = dict(request) if "messages" in request else responses_request_to_chat(request, token_ids=self.token_ids)
            except ChatConversionError as exc:  # this row's request, never retried
                raise GenerationError(f"the request cannot go to a chat completions endpoint: {exc}") from None
        else:
            body = chat_request_to_responses(request) if "messages" in request else dict(request)
        body["model"] = self.config.model
        if self.config.system_prompt is not None:
            system = {"role": "system", "content": self.config.system_prompt}
            key = "messages" if chat else "input"
            given = body.get(key, [])
            given = [{"role": "user", "content": given}] if isinstance(given, str) else list(given)
            body[key] = [system, *given]
        inference = self.config.inference
        tokens_key = "max_tokens" if chat else "max_output_tokens"
        for key, value in (("temperature", inference.temperature), ("top_p", inference.top_p), (tokens_key, inference.max_tokens), ("seed", inference.seed)):
            if value is not None:
                body[key] = value
        if chat and self.token_ids:
            body.update(REQUEST_PARAMS)
        return body


def _with_metadata_params(body: dict[str, Any]) -> dict[str, Any]:
    """A chat body with what its Responses request's `metadata` asks of the engine, as NeMo Gym's
    vLLM model server sends it: `metadata.chat_template_kwargs` (JSON text) merged into
    `chat_template_kwargs`, and `metadata.extra_body` (JSON text: `{"seed": 3}`, stop strings)
    under the body (a key the body has wins). GenerationError for text that is not a JSON object."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping) or not (metadata.get("extra_body") or metadata.get("chat_template_kwargs")):
        return body
    extra, kwargs = (_json_object(metadata, key) for key in ("extra_body", "chat_template_kwargs"))
    if kwargs:
        body["chat_template_kwargs"] = {**(body.get("chat_template_kwargs") or {}), **kwargs}
    return {**extra, **body}


def _json_object(metadata: Mapping[str, Any], key: str) -> dict[str, Any]:
    text = metadata.get(key) or "{}"
    try:
        value = orjson.loads(text) if isinstance(text, (str, bytes)) else None
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise GenerationError(f"the request's metadata.{key} is not a JSON object's text: {str(text)[:200]!r}")
    return value


def _place_tokens(response: dict[str, Any], completion: Mapping[str, Any]) -> None:
    """The completion's token fields on the response's last output item (NeMo Gym's place, with
    `routed_experts` null when the policy gave none, as its typed item dumps it); an answer
    without them is left as it is (recording.token_gaps reports it)."""
    try:
        fields = chat_token_fields(completion)
    except TokenInfoError:
        return
    if response["output"]:
        response["output"][-1].update(fields, routed_experts=fields.get("routed_experts"))


_SPELLING_FIELDS = frozenset({"prompt_token_ids", "token_ids", "generation_token_ids", "generation_log_probs", "logprobs",
                              "prompt_logprobs", "top_logprobs"})  # fmt: skip
"""Fields of an answer that spell its text as numbers (IDs, log-probs' tokens and bytes)."""


def without_token_fields(value: Any) -> Any:
    """A parsed answer without the fields that spell text as numbers: masking the key in its
    strings leaves them spelling it, so an answer that held the key keeps none of them."""
    if isinstance(value, list):
        return [without_token_fields(v) for v in value]
    if isinstance(value, dict):
        return {k: without_token_fields(v) for k, v in value.items() if k not in _SPELLING_FIELDS}
    return value


def _sent(request: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """The Responses request a chat answer answers: the caller's (in either shape), with the
    model and sampling parameters the body carried."""
    sent = dict(request)
    for key, value in (("model", body.get("model")), ("temperature", body.get("temperature")), ("top_p", body.get("top_p")),
                       ("max_output_tokens", body.get("max_tokens"))):  # fmt: skip
        if value is not None:
            sent[key] = value
    return sent


def _responses_answer(data: Any) -> dict[str, Any]:
    """A Responses API answer, checked for the parts callers read."""
    if not isinstance(data, dict) or not isinstance(data["output"], list):
        raise TypeError("no output list")
    return data


class AgentTarget(_Target):
    """`await target.generate(row)` -> Generation, from an agent endpoint: the body template
    rendered over the row, the answer text and tool calls read by JSONPath and put in
    Responses API shape (an agent reports no usage)."""

    config: AgentTargetConfig

    def __init__(self, config: AgentTargetConfig) -> None:
        super().__init__(config, name="agent", log=log)
        from gym_metrics.scorers.remote import BodyTemplate

        self._template = BodyTemplate(config.body)

    def __repr__(self) -> str:  # the key stays out
        return f"AgentTarget(url={self.config.url!r})"

    async def generate(self, row: Mapping[str, Any]) -> Generation:
        """One generation, after retries; GenerationError when there is none (a body template
        that fails on this row included, nothing sent then)."""
        from gym_metrics.scorers import RowError

        try:
            body = self._template.render(row)
        except RowError as exc:
            raise GenerationError(f"agent body template: {exc}") from None
        data, seconds, attempts = await self._post(self.config.url, body)
        matches = compile_path(self.config.response_path).find(data)
        if not matches or not isinstance(matches[0].value, str):
            raise self._bad(orjson.dumps(data), f"has no text at {self.config.response_path}", attempts)
        output = [message_item(matches[0].value)]
        if self.config.tool_calls_path:
            found = compile_path(self.config.tool_calls_path).find(data)
            calls = found[0].value if found else []
            try:
                output.extend(_agent_call(c) for c in (calls or []))
            except (KeyError, TypeError, AttributeError):
                raise self._bad(orjson.dumps(data), f"has unreadable tool calls at {self.config.tool_calls_path}", attempts) from None
        response = {"object": "response", "status": "completed", "output": output}
        return Generation(response, Usage(), seconds, attempts)


def _agent_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """An agent's tool call (`{name, arguments}` or chat-shaped) as a `function_call` item."""
    function = call.get("function", call)
    return function_call_item(function["name"], function.get("arguments"), call.get("call_id") or call.get("id"))


def make_target(config: TargetConfig) -> ModelTarget | AgentTarget:
    """The client of `config` (reads the API key from its variable now: unset is an error)."""
    return ModelTarget(config) if isinstance(config, ModelTargetConfig) else AgentTarget(config)
