"""Group scoring, for RL trainers: one prompt's completions scored at once through the
environment's verify, with no transport.

A group is a task row and its completions; each completion becomes the verify request's
`response` (a completion given as text becomes an assistant message of a Responses object), so
an environment scores a trainer's completions exactly as it scores collected rollouts. Every
completion's failure is reported beside its reward (kind and message), never as a silent 0; a
failure of one completion is never the group's or the call's. A verify answer that is no
reward to train on fails its completion too (`verify_failed`, saying why): a reward that is not
finite (NaN, an infinity), or an answer that masks itself (`mask_sample` true: NeMo Gym's judge
that failed, scored 0 and masked), which a trainer would otherwise take as a real 0.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gym_metrics._util.jsonbounds import check_items
from gym_metrics.environments._handler import INVALID_REQUEST, TIMEOUT, VERIFY_FAILED, EnvironmentHandler
from gym_metrics.errors import FieldViolation, InvalidInputError

MAX_COMPLETIONS_PER_CALL = 65_536
"""Completions one ScoreGroups call may carry (a trainer's step is a few thousand)."""
MAX_GROUPS_PER_CALL = 65_536
"""Groups one ScoreGroups call may carry (each holds at least one completion in any real step)."""


def check_counts(groups: int, completions: int) -> None:
    """InvalidInputError naming the limit when a call carries too many groups or completions:
    counted before anything is built for them."""
    for what, count, limit in (("groups", groups, MAX_GROUPS_PER_CALL), ("completions", completions, MAX_COMPLETIONS_PER_CALL)):
        if count > limit:
            name = f"MAX_{what.upper()}_PER_CALL"
            raise InvalidInputError(f"too many {what} in one call", [FieldViolation("groups", f"{count:,} {what}; at most {limit:,} ({name}): split the call")])


@dataclass
class Group:
    """One prompt's completions: the task row (JSON text or a dict), the completions (each a
    Responses object or a text) and, optionally, a session each."""

    row: Any
    completions: Sequence[Any]
    sessions: Sequence[str] = ()
    encoded: bool = False
    """The completions are JSON texts (as the wire carries them), not values."""


@dataclass
class GroupScores:
    """Position i for completion i."""

    rewards: list[float] = field(default_factory=list)
    failed: list[bool] = field(default_factory=list)
    error_kind: list[str | None] = field(default_factory=list)
    error_message: list[str] = field(default_factory=list)
    response_json: list[str] = field(default_factory=list)


_IDS = itertools.count()
_PROCESS = uuid.uuid4().hex[:12]


def text_response(text: str) -> dict[str, Any]:
    """A completion's text as a Responses API response: one assistant message (its ids unique
    in this process's run: a counter, not a uuid per completion)."""
    tag = f"{_PROCESS}{next(_IDS):012x}"
    content = [{"type": "output_text", "text": text, "annotations": []}]
    message = {"type": "message", "id": f"msg_{tag}", "role": "assistant", "status": "completed", "content": content}
    return {
        "id": f"resp_{tag}", "object": "response", "created_at": int(time.time()), "model": "", "status": "completed",
        "output": [message], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    }  # fmt: skip


def _value(item: Any) -> Any:
    """A row given as JSON text, parsed; a dict as it is."""
    return orjson.loads(item) if isinstance(item, (str, bytes)) else item


async def score_groups(handler: EnvironmentHandler, groups: Sequence[Group], *, omit_responses: bool = False) -> list[GroupScores]:
    """Every group's scores, in order. The completions of all groups go through one verify
    batch (the collector's path: started eagerly, within the handler's bound on concurrent
    verifies and its time budget, each failure that completion's); those in sessions are
    verified one by one in them."""
    check_counts(len(groups), sum(len(g.completions) for g in groups))
    outs = [GroupScores([0.0] * len(g.completions), [False] * len(g.completions), [None] * len(g.completions),
                        [""] * len(g.completions), [""] * len(g.completions)) for g in groups]  # fmt: skip
    bodies: list[Any] = []
    where: list[tuple[int, int]] = []
    in_sessions: list[tuple[int, int, dict[str, Any]]] = []
    for g, group in enumerate(groups):
        for i, body in _bodies(g, group, outs[g]):
            if group.sessions:
                in_sessions.append((g, i, body))
            else:
                bodies.append(body)
                where.append((g, i))

    def write(item: int, reward: float, response_json: str, kind: str | None, message: str) -> None:
        g, i = where[item]
        _settle(outs[g], i, reward, response_json, kind, message, omit_responses)

    slots = handler.slots()
    if bodies:
        await handler.verify_batch(bodies, write, slots, lambda item: where[item])
    if in_sessions:
        await asyncio.gather(*(_in_session(handler, outs[g], i, body, groups[g].sessions[i], slots, omit_responses) for g, i, body in in_sessions))
    return outs


def _bodies(index: int, group: Group, out: GroupScores) -> list[tuple[int, dict[str, Any]]]:
    """(position, verify request) of each completion that is well formed; the others failed."""
    n = len(group.completions)
    try:
        if isinstance(group.row, (str, bytes)):
            check_items(group.row, f"groups[{index}].row_json")
        row = _value(group.row)
        if not isinstance(row, Mapping):
            raise ValueError(f"must be a JSON object, got {type(row).__name__}")
        if group.sessions and len(group.sessions) != n:
            raise ValueError(f"{len(group.sessions)} sessions for {n} completions")
    except InvalidInputError as exc:
        for i in range(n):
            _fail(out, i, INVALID_REQUEST, str(exc))
        return []
    except ValueError as exc:  # the whole group's row is bad: each completion says so
        for i in range(n):
            _fail(out, i, INVALID_REQUEST, f"groups[{index}].row_json: {exc}")
        return []
    found = []
    for i, given in enumerate(group.completions):
        try:
            if group.encoded:
                check_items(given, f"groups[{index}].completion_json[{i}]")
            completion = orjson.loads(given) if group.encoded else given
        except InvalidInputError as exc:
            _fail(out, i, INVALID_REQUEST, str(exc))
            continue
        except ValueError as exc:
            _fail(out, i, INVALID_REQUEST, f"groups[{index}].completion_json[{i}] is not JSON: {exc}")
            continue
        found.append((i, {**row, "response": text_response(completion) if isinstance(completion, str) else completion}))
    return found


async def _in_session(
    handler: EnvironmentHandler, out: GroupScores, i: int, body: dict[str, Any], session: str, slots: asyncio.Semaphore, omit: bool
) -> None:
    async with slots:
        try:
            reward, response_json = await handler.verify(body, session)
        except asyncio.TimeoutError as exc:
            _fail(out, i, TIMEOUT, str(exc))
            return
        except Exception as exc:  # this completion's failure only
            _fail(out, i, INVALID_REQUEST if isinstance(exc, InvalidInputError) else VERIFY_FAILED, str(exc))
            return
    _settle(out, i, reward, response_json, None, "", omit)


_MASKED = re.compile(r'"mask_sample"\s*:\s*true')


def not_a_reward(reward: float, response_json: str) -> str | None:
    """Why a verify answer gives no reward to train on (module docstring), or None."""
    if not math.isfinite(reward):
        return f"verify answered reward {reward}, not a finite number: nothing to train on"
    if _MASKED.search(response_json) is None:  # (a nested one, instance_config's, is checked below)
        return None
    try:
        answer = orjson.loads(response_json)
    except ValueError:
        return None
    if not isinstance(answer, Mapping) or answer.get("mask_sample") is not True:
        return None
    why = ": ".join(str(answer[k])[:1000] for k in ("failure_kind", "failure_reason") if answer.get(k))
    return f"verify masked the rollout (mask_sample: its reward {reward:g} is not a measurement){': ' + why if why else ''}"


def _settle(out: GroupScores, i: int, reward: float, response_json: str, kind: str | None, message: str, omit: bool) -> None:
    if kind is None:
        why = not_a_reward(reward, response_json)
        if why is not None:
            kind, message = VERIFY_FAILED, why
    if kind is not None:
        _fail(out, i, kind, message)
        return
    out.rewards[i] = reward
    if not omit:
        out.response_json[i] = response_json


def _fail(out: GroupScores, i: int, kind: str, message: str) -> None:
    out.failed[i], out.error_kind[i], out.error_message[i] = True, kind, message
