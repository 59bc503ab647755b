"""The viewer's questions to an index: which rows a filter keeps (numpy masks over the columns,
exact counts at any size), a page of them, per-task pass rates and per-agent summaries, and text
search (a scan of the rows' JSON text with a budget per request, resumed by a cursor, so a
search of a 1M-row file answers at once and goes on when asked)."""

from __future__ import annotations

import json
import math
import mmap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.reducers import passes
from gym_metrics.rollouts import ERROR_KINDS
from gym_metrics.view._index import VERDICTS, RunIndex, Indexed

MAX_PAGE = 500
"""Rows (or tasks) one page may ask for."""
SEARCH_BYTES = 32 << 20
"""Bytes of row text one search request reads before it answers with a cursor."""
PREVIEW_CHARS = 160
FAILURES = ("any", "none", *ERROR_KINDS)


@dataclass(frozen=True)
class Filter:
    """What the lists keep: every given condition holds."""

    agent: str | None = None
    task: int | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    failure: str | None = None
    """"any" (an error kept the row from being verified), "none", or one kind of ERROR_KINDS."""
    verdict: str | None = None
    """healthy, unhealthy, unobserved, or "none" (no verdict on record)."""
    text: str = ""

    @staticmethod
    def parse(params: Mapping[str, str]) -> Filter:
        """From a request's query; InvalidInputError naming the parameter that is wrong."""
        bad = []

        def number(name: str, kind: type) -> Any:
            raw = params.get(name, "")
            if raw == "":
                return None
            try:
                value = kind(raw)
            except ValueError:
                bad.append(FieldViolation(name, f"not {'an integer' if kind is int else 'a number'}: {raw[:40]!r}"))
                return None
            if kind is float and math.isnan(value):
                bad.append(FieldViolation(name, "NaN is not a bound"))
            return value

        def choice(name: str, known: tuple[str, ...]) -> str | None:
            raw = params.get(name, "")
            if raw and raw not in known:
                bad.append(FieldViolation(name, f"unknown {raw[:40]!r}; known: {', '.join(known)}"))
            return raw or None

        out = Filter(
            agent=params.get("agent") or None, task=number("task", int), reward_min=number("reward_min", float),
            reward_max=number("reward_max", float), failure=choice("failure", FAILURES),
            verdict=choice("verdict", ("none", *VERDICTS[1:])), text=params.get("q", "")[:200],
        )  # fmt: skip
        if bad:
            raise InvalidInputError("bad filter", bad)
        return out


def select(snap: Indexed, f: Filter) -> np.ndarray:
    """Positions (in file order) of the rows the filter's column conditions keep (not its text)."""
    c = snap.columns
    keep = np.ones(len(c), bool)
    if f.agent is not None:
        code = snap.agents.index(f.agent) if f.agent in snap.agents else -1
        keep &= c.agent == code
    if f.task is not None:
        keep &= c.task == f.task
    if f.reward_min is not None:
        keep &= c.reward >= f.reward_min
    if f.reward_max is not None:
        keep &= c.reward <= f.reward_max
    if f.failure == "any":
        keep &= c.error != 0
    elif f.failure == "none":
        keep &= c.error == 0
    elif f.failure is not None:
        keep &= c.error == 1 + ERROR_KINDS.index(f.failure)
    if f.verdict is not None:
        keep &= c.verdict == (0 if f.verdict == "none" else VERDICTS.index(f.verdict))
    return np.flatnonzero(keep)


def _needles(text: str) -> list[bytes]:
    """The text as a row's JSON may hold it (as typed, JSON-escaped, escaped to ASCII as JSON
    escapes it: `\\u00e9`, `\\ud83d\\ude00`), in the case typed, lower and upper, each lowercased
    as the row's bytes are (ASCII letters only: a byte search cannot fold other scripts)."""
    forms = {form for t in {text, text.lower(), text.upper()} for form in (t, orjson.dumps(t).decode()[1:-1], json.dumps(t)[1:-1])}
    return sorted({s.encode("utf-8", "surrogatepass").lower() for s in forms if s})


def page(index: RunIndex, snap: Indexed, f: Filter, offset: int, limit: int) -> dict[str, Any]:
    """A page of the kept rows. Without text: rows[offset:offset+limit] of an exact total. With
    text: matches found scanning from position `offset` of the kept rows, up to `limit` matches
    or SEARCH_BYTES read; `next` is where to go on (None when the scan reached the end)."""
    if limit < 1 or limit > MAX_PAGE or offset < 0:
        raise InvalidInputError("bad page", [FieldViolation("limit" if offset >= 0 else "offset", f"limit 1..{MAX_PAGE}, offset >= 0")])
    kept = select(snap, f)
    if f.text and offset >= len(kept):  # nothing to scan (an empty file, which cannot be mapped, among others)
        return {"total": int(len(kept)), "rows": [], "next": None, "scanned": offset}
    if not f.text:
        chosen = kept[offset : offset + limit]
        nxt = offset + limit if offset + limit < len(kept) else None
        return {"total": int(len(kept)), "rows": _rows(index, snap, chosen), "next": nxt, "scanned": None}
    needles = _needles(f.text)
    found: list[int] = []
    pos, read = offset, 0
    starts = snap.starts
    with index.path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        while pos < len(kept) and len(found) < limit and read < SEARCH_BYTES:
            line = int(snap.columns.line[kept[pos]])
            text = mm[int(starts[line - 1]) : int(starts[line])].lower()
            read += len(text)
            if any(n in text for n in needles):
                found.append(int(kept[pos]))
            pos += 1
    return {"total": int(len(kept)), "rows": _rows(index, snap, np.array(found, np.int64)),
            "next": pos if pos < len(kept) else None, "scanned": pos}  # fmt: skip


def _rows(index: RunIndex, snap: Indexed, positions: np.ndarray) -> list[dict[str, Any]]:
    c = snap.columns.take(positions)
    out = []
    for i in range(len(c)):
        line = int(c.line[i])
        reward = float(c.reward[i])
        out.append({
            "line": line, "agent": snap.agents[int(c.agent[i])], "task": int(c.task[i]), "rollout": int(c.rollout[i]),
            "reward": None if math.isnan(reward) else reward, "error": "" if not c.error[i] else ERROR_KINDS[int(c.error[i]) - 1],
            "verdict": VERDICTS[int(c.verdict[i])], "masked": bool(c.masked[i]), "preview": preview(index.row_bytes(line)),
        })  # fmt: skip
    return out


def preview(raw: bytes) -> str:
    """The row's last prompt message, cut: what a list shows to tell rows apart."""
    try:
        row = orjson.loads(raw)
        params = row.get("responses_create_params") or {}
        prompt = params.get("input", params.get("messages")) if isinstance(params, dict) else None
    except (orjson.JSONDecodeError, AttributeError):
        return ""
    if isinstance(prompt, str):
        text = prompt
    elif isinstance(prompt, list) and prompt:
        last = next((m for m in reversed(prompt) if isinstance(m, dict) and m.get("role") == "user"), prompt[-1])
        content = last.get("content") if isinstance(last, dict) else last
        if isinstance(content, list):
            content = " ".join(_text(p.get("text", "")) if isinstance(p, dict) else _text(p) for p in content)
        text = _text(content)
    else:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _text(value: Any) -> str:
    """A message part as text: JSON when it is not a string, a note when it nests past what
    orjson writes (254 levels; str() would recurse past Python's limit)."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return "(nested too deep to preview)"


def tasks(snap: Indexed, f: Filter, offset: int, limit: int, zero_agents: np.ndarray | None = None) -> dict[str, Any]:
    """Per task of the kept rows (ordered by task): rollouts, mean reward, pass rate, errors
    (failed rows of `zero_agents` counted 0: Columns.measured)."""
    kept = snap.columns.take(select(snap, f))
    ids, inverse = np.unique(kept.task, return_inverse=True)
    n = np.bincount(inverse, minlength=len(ids))
    reward = kept.measured(zero_agents)
    measured = ~np.isnan(reward)
    m = np.bincount(inverse, weights=measured, minlength=len(ids))
    total = np.bincount(inverse, weights=np.where(measured, reward, 0.0), minlength=len(ids))
    passed = np.bincount(inverse, weights=passes(reward), minlength=len(ids))
    errors = np.bincount(inverse, weights=kept.error != 0, minlength=len(ids))
    sl = slice(offset, offset + min(max(limit, 1), MAX_PAGE))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean, rate = total / m, passed / m
    rows = [{"task": int(t), "rollouts": int(k), "mean_reward": _num(a), "pass_rate": _num(p), "errors": int(e)}
            for t, k, a, p, e in zip(ids[sl], n[sl], mean[sl], rate[sl], errors[sl])]  # fmt: skip
    return {"total": int(len(ids)), "tasks": rows}


def agents(snap: Indexed, zero_agents: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Per agent: rows, mean reward, pass rate, errors and health verdict counts (failed rows
    of `zero_agents` counted 0: Columns.measured)."""
    c = snap.columns
    out = []
    measured_all = c.measured(zero_agents)
    for code, name in enumerate(snap.agents):
        mine = c.agent == code
        reward = measured_all[mine]
        measured = reward[~np.isnan(reward)]
        verdicts = np.bincount(c.verdict[mine], minlength=len(VERDICTS))
        out.append({
            "name": name, "rows": int(mine.sum()), "measured": int(len(measured)),
            "mean_reward": _num(measured.mean()) if len(measured) else None,
            "pass_rate": _num(passes(measured).mean()) if len(measured) else None,
            "errors": int((c.error[mine] != 0).sum()),
            "verdicts": {VERDICTS[i]: int(verdicts[i]) for i in range(1, len(VERDICTS)) if verdicts[i]},
        })  # fmt: skip
    return out


def _num(x: Any) -> float | None:
    v = float(x)
    return v if math.isfinite(v) else None
