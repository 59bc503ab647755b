"""Tools: methods of an environment the model may call, declared with `@tool`.

    class Counter(SimpleResourcesServer):
        @tool
        async def increment_counter(self, args: IncrementArgs, session: Session) -> IncrementResult:
            \"\"\"Add `count` to the session's counter.\"\"\"

The arguments are one pydantic model (its JSON schema is what the model is shown; a method
without one takes no arguments); a parameter named `session` gets the rollout's session. The
description is the docstring's first paragraph. What the tool returns becomes the text the
model reads: a pydantic model as its JSON, a str as it is, anything else as JSON.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, TypeVar, overload

import pydantic
import pydantic_core

from gym_metrics.errors import FieldViolation, InvalidInputError, NotFoundError, json_path

_MARK = "__gym_metrics_tool__"


_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


@overload
def tool(method: _F) -> _F: ...


@overload
def tool(*, name: Optional[str] = None) -> Callable[[_F], _F]: ...


def tool(method: Any = None, *, name: Optional[str] = None) -> Any:
    """Mark an async method of an environment as a tool (`@tool` or `@tool(name="...")`); the
    method keeps its type."""

    def mark(func: _F) -> _F:
        is_async = inspect.iscoroutinefunction(func)  # (a TypeGuard would narrow func's type)
        if not is_async:
            raise TypeError(f"@tool {func.__qualname__} must be an async method")
        setattr(func, _MARK, name or func.__name__)
        return func

    return mark(method) if method is not None else mark


class _NoArguments(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")


@dataclass(frozen=True)
class ToolSpec:
    """One tool: how it is shown to the model and how it is called."""

    name: str
    description: str
    arguments: type[pydantic.BaseModel]
    invoke: Callable[[Any, pydantic.BaseModel, Any], Awaitable[Any]]
    """`invoke(env, arguments, session)`: what the tool answers (any value: see output_text)."""

    def parameters_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (the Responses API's `parameters`)."""
        return self.arguments.model_json_schema()

    def as_function_tool(self) -> dict[str, Any]:
        """The Responses API `function` tool the policy is given."""
        return {"type": "function", "name": self.name, "description": self.description, "parameters": self.parameters_schema(), "strict": False}

    def parse(self, arguments_json: str | bytes) -> pydantic.BaseModel:
        """The arguments, validated; InvalidInputError naming the bad field."""
        try:
            return self.arguments.model_validate_json(arguments_json or "{}")
        except pydantic.ValidationError as exc:
            violations = [FieldViolation(json_path("arguments", e["loc"]), e["msg"]) for e in exc.errors()[:20]]
            raise InvalidInputError(f"bad arguments for tool {self.name!r}", violations) from None

    async def run(self, env: Any, arguments: pydantic.BaseModel, session: Any) -> str:
        """Call the tool; its answer as the text the model reads."""
        return output_text(await self.invoke(env, arguments, session))


def output_text(value: Any) -> str:
    """A tool's answer as the model reads it: compact JSON, as a pydantic model dumps (and as
    NeMo Gym's FastAPI routes answer: models inside lists and dicts as their fields, sets as
    lists, bytes as text, dates in ISO form). A value JSON cannot hold fails the call, naming
    its type, rather than reaching the model as its repr."""
    if isinstance(value, str):
        return value
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    try:
        plain = pydantic_core.to_jsonable_python(value)
    except (pydantic_core.PydanticSerializationError, UnicodeDecodeError) as exc:
        raise TypeError(f"the tool returned what JSON cannot hold: {exc}") from None
    return json.dumps(plain, separators=(",", ":"), ensure_ascii=False)


_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a function tool's name may be (the OpenAI and Responses APIs refuse other names)."""


def tools_of(cls: type) -> dict[str, ToolSpec]:
    """The tools an environment class declares (its bases' included), by name; TypeError for
    a name two methods of one class claim (one was dropped without a word) or one a policy
    API refuses. A subclass's tool replaces its bases' of the same name."""
    found: dict[str, ToolSpec] = {}
    for klass in reversed(cls.__mro__):
        mine: dict[str, str] = {}
        for attr, func in vars(klass).items():
            name = getattr(func, _MARK, None)
            if name is None:
                continue
            if not _NAME.fullmatch(name):
                raise TypeError(f"tool {klass.__name__}.{attr}: name {name!r} must be 1-64 letters, digits, _ or - (what policy APIs take)")
            if name in mine:
                raise TypeError(f"tool {klass.__name__}: {mine[name]} and {attr} are both named {name!r}")
            mine[name] = attr
            found[name] = _spec(cls, attr, name)
    return found


def _spec(cls: type, attr: str, name: str) -> ToolSpec:
    func = getattr(cls, attr)
    params = [p for p in inspect.signature(func).parameters.values() if p.name != "self"]
    try:
        hints = typing.get_type_hints(func)
    except Exception:
        hints = {}
    session = [p for p in params if p.name == "session"]
    others = [p for p in params if p.name != "session"]
    if len(others) > 1:
        raise TypeError(f"tool {cls.__name__}.{attr}: one arguments model and `session` at most, got {[p.name for p in params]}")
    model: type[pydantic.BaseModel] = _NoArguments
    if others:
        hint = hints.get(others[0].name)
        if not (isinstance(hint, type) and issubclass(hint, pydantic.BaseModel)):
            raise TypeError(f"tool {cls.__name__}.{attr}: annotate {others[0].name!r} with a pydantic model")
        model = _closed(hint)
    if params and params[0].name == "session" and others:
        raise TypeError(f"tool {cls.__name__}.{attr}: put the arguments model before `session`")
    doc = inspect.getdoc(func) or ""
    takes_arguments, takes_session = bool(others), bool(session)

    async def invoke(env: Any, arguments: pydantic.BaseModel, state: Any) -> Any:
        params = [arguments] if takes_arguments else []
        return await func(env, *params, *([state] if takes_session else []))

    return ToolSpec(name, doc.split("\n\n")[0].strip(), model, invoke)


_CLOSED: dict[type[pydantic.BaseModel], type[pydantic.BaseModel]] = {}


def _closed(model: type[pydantic.BaseModel]) -> type[pydantic.BaseModel]:
    """`model`, refusing arguments it does not declare unless its config says otherwise (a
    misspelt argument was dropped and the call ran with the default: a wrong call scored as
    right); its schema then says so (`additionalProperties: false`). A subclass of it, so the
    tool's method gets an instance of the model it names."""
    if "extra" in model.model_config:
        return model
    closed = _CLOSED.get(model)
    if closed is None:
        closed = _CLOSED[model] = type(model.__name__, (model,), {"model_config": {**model.model_config, "extra": "forbid"}, "__module__": model.__module__, "__qualname__": model.__qualname__})
    return closed


def find_tool(tools: Mapping[str, ToolSpec], name: str) -> ToolSpec:
    """The tool named `name`; NotFoundError listing the known ones."""
    spec = tools.get(name)
    if spec is None:
        known = ", ".join(sorted(tools)) or "none"
        raise NotFoundError(f"no tool {name!r} in this environment (tools: {known})")
    return spec
