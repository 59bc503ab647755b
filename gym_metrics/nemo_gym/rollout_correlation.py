"""Which rollout a call belongs to, as NeMo Gym 0.7.0 tracks it: a rollout id in a context
variable (`rollout_context`, `current_rollout_id`), the id a run request names
(`maybe_rollout_id_from_run_body`: `_ng_rollout_id`, else "<task>-<rollout>", "-a<n>" for a
re-dispatch attempt), and an ASGI middleware that takes the id off a `/ng-rollout/<id>/...` path
prefix for the call's duration (`RolloutContextMiddleware`)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Optional

from pydantic import BaseModel

from gym_metrics.nemo_gym.global_config import (
    ATTEMPT_INDEX_KEY_NAME,
    ROLLOUT_ID_KEY_NAME,
    ROLLOUT_INDEX_KEY_NAME,
    TASK_INDEX_KEY_NAME,
)

ROLLOUT_PATH_PREFIX = "ng-rollout"
"""The first path segment of a rollout-scoped URL (NeMo Gym's config_types.ROLLOUT_PATH_PREFIX)."""
_ID = r"[A-Za-z0-9][A-Za-z0-9._-]*"
ROLLOUT_ID_PATTERN = re.compile(rf"^{_ID}$")
"""A rollout id: a path segment and a file-name part (letters, digits, `.`, `_`, `-`; no leading dot)."""

_current: ContextVar[Optional[str]] = ContextVar("gym_metrics_nemo_gym_rollout_id", default=None)


def _get(body: BaseModel | Mapping[str, Any], key: str) -> Any:
    if isinstance(body, Mapping):
        return body.get(key)
    if key == ROLLOUT_ID_KEY_NAME and hasattr(body, "capture_rollout_id"):
        return body.capture_rollout_id  # BaseRunRequest's field for the `_ng_rollout_id` alias
    return getattr(body, key, None)


def maybe_rollout_id_from_run_body(body: BaseModel | Mapping[str, Any] | None) -> Optional[str]:
    """The rollout id a run request names, or None when it names none. An explicit id that is
    not a valid path segment is refused (ValueError), not rewritten."""
    if not isinstance(body, (BaseModel, Mapping)):
        return None
    given = _get(body, ROLLOUT_ID_KEY_NAME)
    if given is not None:
        if not isinstance(given, str) or not ROLLOUT_ID_PATTERN.match(given):
            raise ValueError(f"{ROLLOUT_ID_KEY_NAME} must match {ROLLOUT_ID_PATTERN.pattern} (letters, digits, '.', '_', '-'); got {given!r}")
        rollout_id = given
    else:
        task, rollout = _get(body, TASK_INDEX_KEY_NAME), _get(body, ROLLOUT_INDEX_KEY_NAME)
        if task is None or rollout is None:
            return None
        rollout_id = f"{task}-{rollout}"
    attempt = _get(body, ATTEMPT_INDEX_KEY_NAME)
    return f"{rollout_id}-a{int(attempt)}" if attempt is not None and int(attempt) > 0 else rollout_id


def current_rollout_id() -> Optional[str]:
    """The rollout id of the call in progress (None outside a rollout_context)."""
    return _current.get()


@contextmanager
def rollout_context(rollout_id: Optional[str]) -> Iterator[None]:
    """`current_rollout_id()` is `rollout_id` inside the block, and what it was after."""
    token = _current.set(rollout_id)
    try:
        yield
    finally:
        _current.reset(token)


ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class RolloutContextMiddleware:
    """An ASGI middleware: an HTTP path `/ng-rollout/<id>/<rest>` reaches the app as `/<rest>`,
    inside `rollout_context(<id>)`; other paths and scopes pass through unchanged."""

    _path = re.compile(rf"^/{re.escape(ROLLOUT_PATH_PREFIX)}/(?P<rollout_id>{_ID})(?P<rest>/.*)$")

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        found = self._path.match(scope.get("path", "")) if scope.get("type") == "http" else None
        if found is None:
            await self._app(scope, receive, send)
            return
        rest = found.group("rest")
        with rollout_context(found.group("rollout_id")):
            await self._app({**scope, "path": rest, "raw_path": rest.encode()}, receive, send)


__all__ = [
    "ROLLOUT_ID_PATTERN",
    "ROLLOUT_PATH_PREFIX",
    "RolloutContextMiddleware",
    "current_rollout_id",
    "maybe_rollout_id_from_run_body",
    "rollout_context",
]
