"""What the framework reads of an environment's `verify`: that it can be called as the framework
calls it, the request and response models its annotations name, and its request validated from
a body (a re-scored row's outputs left out, errors named by field)."""

from __future__ import annotations

import copy
import functools
import inspect
import typing
from typing import Any, TypeVar

import orjson
import pydantic
import pydantic_core

from gym_metrics.errors import FieldViolation, json_path
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse


def check_verify(cls: type) -> None:
    """A `verify` of the class's own that cannot be called as the framework calls it (`await
    env.verify(body)`), or a sync `seed_session`, `close_session`, `reset` or `step`, is refused
    when the class is made, naming it, not on every rollout."""
    for name, takes in _AWAITED.items():  # a sync override failed every session with "can't be used in 'await' expression"
        method = cls.__dict__.get(name)
        if method is not None and callable(method) and not inspect.iscoroutinefunction(method):
            raise TypeError(f"{cls.__qualname__}.{name} must be an async method: async def {name}(self, {takes})")
    verify = cls.__dict__.get("verify")
    if verify is None:
        return
    where = f"{cls.__qualname__}.verify"
    if not inspect.iscoroutinefunction(verify):
        raise TypeError(f"{where} must be an async method: async def verify(self, body)")
    params = list(inspect.signature(verify).parameters.values())[1:]
    if not params or not any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params):
        raise TypeError(f"{where} takes the rollout's body: async def verify(self, body)")


_AWAITED = {"seed_session": "session", "close_session": "session", "reset": "session", "step": "session, response"}
"""The environment's other methods the framework awaits, and their parameters (for the message)."""

_Model = TypeVar("_Model")




@functools.lru_cache(maxsize=None)
def takes_session(verify: Any) -> bool:
    return "session" in inspect.signature(verify).parameters


@functools.lru_cache(maxsize=None)
def annotation(func: Any, param: str, default: type[_Model]) -> type[_Model]:
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # unresolvable forward references: fall back to the base model
        return default
    if param != "return":  # the parameter named `body` (NeMo Gym's `verify(self, request, body)`), else the first
        params = list(inspect.signature(func).parameters)
        if param not in params and len(params) >= 2:
            param = params[1]
    hint = hints.get(param)
    return typing.cast("type[_Model]", hint) if isinstance(hint, type) and issubclass(hint, pydantic.BaseModel) else default


_Request = TypeVar("_Request", bound=BaseVerifyRequest)


def validate_text(model: type[_Request], text: str | bytes) -> _Request:
    """`model` from JSON text: parsed, then validated in Python mode; JSON mode when that fails
    (see parse_verify_request)."""
    try:
        return model.model_validate(pydantic_core.from_json(text, cache_strings="keys"))
    except ValueError:  # not JSON (pydantic_core's error), or fails Python-mode validation
        return model.model_validate_json(text)


def without_outputs(request: _Request, response_model: type[BaseVerifyResponse]) -> _Request:
    """The request without the unknown fields that are the response's: a rollouts file being
    re-scored carries the last verify's outputs (`reward`, `num_expected`), which NeMo Gym's
    request models never see (they ignore unknown fields), and which would meet the same
    keywords in the common `Response(**body.model_dump(), reward=..., ...)`. So do the
    collector's own notes on the last run's row (`_gm_error`, `_gm_stored_reward`, ...): echoed
    back, a stale `_gm_error` made a rollout scored now count as failed. Other unknown fields
    stay, as the request model keeps them."""
    extra = request.__pydantic_extra__
    if extra:
        for name in _output_names(type(request), response_model) & extra.keys():
            del extra[name]
        for name in [k for k in extra if k.startswith(COLLECTOR_NOTE)]:
            del extra[name]
    return request


COLLECTOR_NOTE = "_gm_"
"""The prefix of the fields `collect` adds to a row it writes (never an environment's input)."""


@functools.lru_cache(maxsize=None)
def _output_names(request_model: type[pydantic.BaseModel], response_model: type[pydantic.BaseModel]) -> frozenset[str]:
    """Field names (and aliases) of the response model that the request model does not declare."""

    def names(model: type[pydantic.BaseModel]) -> set[str]:
        found = set(model.model_fields)
        found.update(f.alias for f in model.model_fields.values() if f.alias)
        found.update(f.validation_alias for f in model.model_fields.values() if isinstance(f.validation_alias, str))
        return found

    return frozenset(names(response_model) - names(request_model))


def violations(exc: pydantic.ValidationError, root: str, row: int | None) -> list[FieldViolation]:
    return [FieldViolation(json_path(root, err["loc"]), err["msg"], row) for err in exc.errors()]


def response_json(response: BaseVerifyResponse) -> str:
    """The verify answer as JSON (pydantic-core's, as fast as it gets). A custom field pydantic
    cannot write (a numpy scalar from a scoring library: np.int64, np.float32, np.bool_) is
    written as its number through orjson; any other value is a TypeError naming its field."""
    try:
        return response.model_dump_json()
    except pydantic_core.PydanticSerializationError:
        pass
    fields = response.model_dump()
    for name, value in fields.items():
        try:
            orjson.dumps(value, option=_NUMPY)
        except TypeError as exc:
            raise TypeError(f"its answer's field {name!r} holds a value JSON cannot hold: {exc}") from None
    return orjson.dumps(fields, option=_NUMPY).decode()


_NUMPY = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def json_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """`model`'s JSON schema, a copy of the one made once: pydantic makes it anew on every call,
    about 120 ms for a ported NeMo Gym environment's typed rows; a copy, a few."""
    return copy.deepcopy(_json_schema(model))


@functools.lru_cache(maxsize=None)
def _json_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()

