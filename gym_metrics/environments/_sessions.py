"""Per-rollout sessions: one episode's state in an environment, from seeding to close.

A session is opened with the task row (`seed_session`), used by that rollout's tool calls and
its verify, and closed by the verify that ends the episode, by `close_session`, or when it has
been idle for `idle_ttl_s` (a client that went away). A session `held` by a live SessionCalls
stream never idles out: the stream's end closes it, and its episode may wait on a slow policy
longer than the TTL. Nor does one with a call running in it (`busy`): a seed that waits for a
slot, a long tool call or verify; its idle clock starts when the call ends. At most `max_sessions` live at once: a
seed past that is refused (RESOURCE_EXHAUSTED, retryable), never an eviction of a live episode.
Closing drops everything the session held.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import secrets
import time
import typing
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic

from gym_metrics._util.deprecated import warn
from gym_metrics._util.limits import IDLE_TTL_S, MAX_SESSIONS
from gym_metrics.errors import FieldViolation, InvalidInputError, NotFoundError, OverloadedError, json_path



_M = TypeVar("_M", bound=pydantic.BaseModel)


@dataclass
class Session:
    """One rollout's state: `state` is the environment's to fill (seed_session, tools, verify
    read and write it); `row` is the task row it was seeded with."""

    id: str
    row: Mapping[str, Any]
    state: dict[str, Any] = field(default_factory=dict)
    reset: Any = None
    """What the environment's reset answered (a ResetResult), for one that answers turns."""
    client: str = ""
    """Who opened it, as its door saw them (the peer's address, without its port; "" when
    unknown): what an environment bounds per client (a sandbox's kept programs, say)."""
    held: bool = False
    """Seeded on a SessionCalls stream, which closes it when it ends: exempt from the idle TTL."""
    busy: int = 0
    """Calls running in it (SessionStore.working): exempt from the idle TTL while they run."""

    def _idle(self, used: float, now: float, ttl: float) -> bool:
        return not self.held and not self.busy and now - used > ttl

    def row_as(self, model: type[_M]) -> _M:
        """The task row validated by `model` (the fields seed_session reads; others ignored
        unless the model forbids them); InvalidInputError naming each field that does not fit,
        refused as the whole SeedSession call."""
        try:
            return model.model_validate(self.row)
        except pydantic.ValidationError as exc:
            violations = [FieldViolation(json_path("body_json", e["loc"]), e["msg"]) for e in exc.errors()[:20]]
            raise InvalidInputError(f"the row does not fit {model.__name__}", violations) from None


class SessionStore:
    """The live sessions of one server, least recently used first (see the module docstring).
    `clock` is time.monotonic (a test may pass its own)."""

    def __init__(
        self, max_sessions: int = MAX_SESSIONS, idle_ttl_s: float = IDLE_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_sessions, self.idle_ttl_s, self._clock = max_sessions, idle_ttl_s, clock
        self._live: OrderedDict[str, tuple[Session, float]] = OrderedDict()
        self.opened = 0
        self.expired = 0
        """Sessions closed for being idle (their client went away)."""

    def __len__(self) -> int:
        return len(self._live)

    def live_ids(self) -> list[str]:
        return list(self._live)

    def __contains__(self, session_id: object) -> bool:
        """True while `session_id` is live (not closed, not idle past the TTL)."""
        entry = self._live.get(session_id) if isinstance(session_id, str) else None
        return entry is not None and not entry[0]._idle(entry[1], self._clock(), self.idle_ttl_s)

    def open(self, row: Mapping[str, Any], client: str = "") -> Session:
        """A new session for `row`, opened by `client`; OverloadedError when max_sessions are
        live (sweep first)."""
        if len(self._live) >= self.max_sessions:
            raise OverloadedError(
                f"{len(self._live):,} sessions are live, the server's max_sessions; finish or close episodes, "
                "or raise serve --max-sessions", retry_after_s=1.0,
            )  # fmt: skip
        session = Session(secrets.token_hex(16), row, client=client)
        self._live[session.id] = (session, self._clock())
        self.opened += 1
        return session

    def get(self, session_id: str) -> Session:
        """The live session `session_id` (its idle clock restarts); NotFoundError when it is
        unknown, closed or expired."""
        entry = self._live.get(session_id)
        if entry is None or entry[0]._idle(entry[1], self._clock(), self.idle_ttl_s):  # an expired one waits for sweep
            raise NotFoundError(f"no live session {session_id!r} (unknown, closed, or idle past {self.idle_ttl_s:g} s)")
        self._live[session_id] = (entry[0], self._clock())
        self._live.move_to_end(session_id)
        return entry[0]

    @contextlib.contextmanager
    def working(self, session: Session) -> Iterator[Session]:
        """`session` busy while the block runs (never swept); its idle clock restarts after."""
        session.busy += 1
        try:
            yield session
        finally:
            session.busy -= 1
            if session.id in self._live:
                self._live[session.id] = (session, self._clock())

    def close(self, session_id: str) -> Session | None:
        """Close `session_id`; the session, or None when it was not live."""
        entry = self._live.pop(session_id, None)
        return None if entry is None else entry[0]

    def sweep(self) -> list[Session]:
        """Close and return the sessions idle past the TTL (the oldest are first: stops early;
        a held or busy one met on the way goes to the back, as if just used)."""
        now, gone = self._clock(), []
        for _ in range(len(self._live)):
            session_id, (session, used) = next(iter(self._live.items()))
            if now - used <= self.idle_ttl_s:
                break
            if session.held or session.busy:
                self._live[session_id] = (session, now)
                self._live.move_to_end(session_id)
                continue
            del self._live[session_id]
            self.expired += 1
            gone.append(session)
        return gone


async def seed_with_row(env: Any, session: Session) -> None:
    """seed_session(session); the older seed_session(session, body) still works, the row
    validated by the model `body` is annotated with, and warns once per class."""
    model = _seed_model(type(env).seed_session)
    if model is None:
        await env.seed_session(session)
        return
    await env.seed_session(session, session.row_as(model))


def _warn_body_form(seed: Any) -> None:
    warn(f"{seed.__qualname__}(session, body)", "seed_session(session) with body = session.row_as(Model)", stacklevel=2)


@functools.lru_cache(maxsize=None)
def _seed_model(seed: Any) -> type[pydantic.BaseModel] | None:
    """The model of seed_session's second parameter (a plain dict model when unannotated);
    None when it takes the session only."""
    params = [p for p in inspect.signature(seed).parameters.values() if p.name not in ("self", "session")]
    if not params:
        return None
    _warn_body_form(seed)
    hint = typing.get_type_hints(seed).get(params[0].name)
    return hint if isinstance(hint, type) and issubclass(hint, pydantic.BaseModel) else _AnyRow


class _AnyRow(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
