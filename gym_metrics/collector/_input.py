"""Read the collector's input JSONL line by line: each line is a task or a rollout of an agent.

A line with a top-level `reward` (any JSON value but null: `"1.0"` is data, kept as it is) is
already verified and goes straight to the output; any other line is a verify request. Task and
rollout indices are assigned as NeMo Gym does (collector/_keys.py), and `--num-repeats K`
expands each line into K rollouts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from gym_metrics._util.jsonio import dumps_finite, lone_surrogate_at
from gym_metrics.rollouts import BOM, MAX_INDEX, ROLLOUT_KEY, ROLLOUT_KEY_ALIASES, TASK_KEY, TASK_KEY_ALIASES, BadLine, BufferRows, RolloutColumns, agent_name, agent_problem, bad_json_reason, line_bounds, parse_row, read_chunks, row_index_value
from gym_metrics.collector._keys import FixedKeys, Indexer, InputChanged, TaskLines, is_scored, line_identity, may_hold_key
from gym_metrics.collector._rows import with_agent_ref
from gym_metrics.errors import FieldViolation, InvalidInputError


@dataclass
class Rollout:
    """One rollout of the input: its key, its row (indices set) and whether it needs verifying."""

    agent: str
    task: int
    rollout: int
    row: dict[str, Any]
    verified: bool
    raw: bytes | None = None
    """The input line itself, when it can be written out unchanged."""
    line: int = 0
    """Its line in the input file (1-based): what messages about it name."""
    stored_reward: Any = None
    """With `--reverify`: the reward the row carried (verified again; written beside the new
    one as `_gm_stored_reward`)."""
    recorded: dict[str, Any] | None = None
    """What its generation recorded (`ng_model_call_capture`), written on its row."""
    trace: Any = None
    """(EpisodeTrace, model-call records) for its `ng_trajectory`, made when it is written."""


@dataclass
class ScoredLines:
    """Lines of a chunk that already carry a reward and their keys: written out unchanged."""

    agents: list[str]
    agent_code: np.ndarray
    task: np.ndarray
    rollout: np.ndarray
    reward: np.ndarray
    chunk: bytes
    starts: np.ndarray
    ends: np.ndarray
    """Where each scored line lies in `chunk` (newline excluded)."""
    columns: dict[str, RolloutColumns] | None = None
    """When every line of the chunk is scored: its rows as engine columns (labels: input line
    numbers), so aggregation need not read them back from the output."""
    unnamed: np.ndarray | None = None
    """Lines that name no agent: `default_agent` (`--agent`) is written on them."""
    default_agent: str = ""

    def __len__(self) -> int:
        return len(self.starts)

    def text(self, keep: np.ndarray | None = None) -> bytes:
        """The (kept) lines, newline-terminated, copied as whole runs of adjacent lines."""
        s, e = (self.starts, self.ends) if keep is None else (self.starts[keep], self.ends[keep])
        if not len(s):
            return b""
        unnamed = None if self.unnamed is None else self.unnamed if keep is None else self.unnamed[keep]
        if unnamed is not None and unnamed.any():
            c, agent = self.chunk, self.default_agent
            return b"".join((with_agent_ref(c[a:b], agent) if u else c[a:b]) + b"\n" for a, b, u in zip(s.tolist(), e.tolist(), unnamed.tolist()))
        breaks = np.flatnonzero(s[1:] != e[:-1] + 1) + 1
        firsts = np.concatenate(([0], breaks))
        lasts = np.concatenate((breaks - 1, [len(s) - 1]))
        return b"\n".join(self.chunk[a:b] for a, b in zip(s[firsts].tolist(), e[lasts].tolist())) + b"\n"


CHUNK_BYTES = 16 << 20


Repeats = Optional[Union[int, Mapping[str, int]]]
"""Rollouts of each line: K for all, or K by agent (NeMo Gym's num_repeats dict: keyed by the
agent a rollout runs with, else by the key the line came with, its agent_ref.name or
task_source; `_default` for the rest); None: lines with a reward are finished rollouts."""

RowPrepare = Callable[[dict[str, Any]], tuple[dict[str, Any], Optional[bytes]]]
"""A change each input row gets before it is indexed (collect --prompt-config: the row's
`responses_create_params.input` built from a template; --benchmark: the row NeMo Gym collates):
(the row, the text that says which rows are one task, None: the line's own); ValueError or
KeyError: a bad line (`ValueError(why, field)` names its field; else the input's)."""


def read_input(
    path: Path, num_repeats: Repeats, default_agent: str | None = None, fixed: FixedKeys | None = None, reverify: bool = False,
    prepare: RowPrepare | None = None, limit: int | None = None, max_rollouts: int | None = None,
    fan_out: Mapping[str, Sequence[str]] | None = None, lines: TaskLines | None = None,
) -> Iterator[Rollout | BadLine | ScoredLines]:
    """The input in file order, a chunk of whole lines at a time (memory stays bounded).

    Lines that already carry a numeric reward and their `_ng_` indices are recognised
    column-wise and come back as ScoredLines; every other line is parsed on its own and gets
    its indices from an Indexer (`fixed`: the keys of scored lines, `find_fixed_keys`, which
    counted rollout indices pass over). `default_agent` names the lines without an agent_ref
    (otherwise they are bad lines). `reverify`: rows that carry a reward keep their indices but
    are verified again, their reward set aside (Rollout.stored_reward). `prepare`: each row is
    changed so before it is indexed (every line is then parsed on its own). `limit`: the first
    `limit` lines only; `max_rollouts`: the first `max_rollouts` rollouts only; `fan_out`: a
    line keyed there (by its agent_ref.name, else its task_source) runs once per agent listed.
    `lines`: each counted task's line checked against the output being resumed (TaskLines).
    """
    indexer = Indexer(fixed, lines)
    column_wise = num_repeats is None and not reverify and prepare is None and max_rollouts is None and not fan_out
    left = max_rollouts
    for line_no, chunk, starts, ends, scored in _prepared(path, column_wise, default_agent, limit):
        if scored is not None:
            keep, found = scored
            if len(found):
                yield found
        for i in range(len(starts)):
            if scored is not None and keep[i]:
                continue
            start, end = int(starts[i]), int(ends[i])
            raw = chunk[start:end].strip()
            if not raw:
                continue
            try:
                for rollout in _rollouts(raw, line_no + i + 1, num_repeats, default_agent, indexer, (chunk, start, end), prepare, fan_out):
                    if left is not None:
                        if left <= 0:
                            return
                        left -= 1
                    yield _to_verify_again(rollout) if reverify and rollout.verified else rollout
            except InputChanged as changed:
                raise InvalidInputError(
                    f"{path} is not the input the output being resumed was made from",
                    [FieldViolation("(the line)", f"task {changed.task} was made from another line in that run (a line added, removed or edited "
                                    "before this one): resume with that input, or write a new output", line_no + i + 1, row_name="line")],
                ) from None
            except _Bad as bad:
                if prepare is None and not any(may_hold_key(raw, key.encode()) for key in TASK_KEY_ALIASES):
                    indexer.task_of(line_identity(chunk, start, end), bad=True)  # its task index kept: fixed and resumed, the lines after it keep theirs
                yield BadLine(line_no + i + 1, bad.field, bad.reason)


READ_AHEAD = 1
"""Chunks whose column-wise pass runs ahead, in threads, of the chunk being handled."""

Prepared = tuple[int, bytes, np.ndarray, np.ndarray, "tuple[np.ndarray, ScoredLines] | None"]
"""(lines before the chunk, chunk, line starts, line ends, its column-wise pass)."""


def _prepared(path: Path, column_wise: bool, default_agent: str | None, limit: int | None = None) -> Iterator[Prepared]:
    """The chunks in order with their column-wise pass (when `column_wise`), made READ_AHEAD
    chunks ahead in threads: pyarrow's JSON parse releases the GIL but keeps to one core, so
    the next chunks parse while this one is handled."""
    pending: deque[tuple[int, bytes, np.ndarray, np.ndarray, Future[Any] | None]] = deque()
    line_no = 0
    with ThreadPoolExecutor(max(READ_AHEAD, 1), thread_name_prefix="gym-metrics-read") as pool:
        try:
            for chunk in read_chunks(path, CHUNK_BYTES, limit):
                starts, ends = line_bounds(chunk)
                job = pool.submit(_scored_lines, chunk, starts, ends, line_no, default_agent) if column_wise else None
                pending.append((line_no, chunk, starts, ends, job))
                line_no += len(starts)
                while len(pending) > (READ_AHEAD if column_wise else 0):
                    yield _finished(pending.popleft())
            while pending:
                yield _finished(pending.popleft())
        finally:
            for *_, job in pending:
                if job is not None:
                    job.cancel()


def _finished(item: tuple[int, bytes, np.ndarray, np.ndarray, Future[Any] | None]) -> Prepared:
    line_no, chunk, starts, ends, job = item
    return line_no, chunk, starts, ends, None if job is None else job.result()


def _scored_lines(
    chunk: bytes, starts: np.ndarray, ends: np.ndarray, line_offset: int, default_agent: str | None = None
) -> tuple[np.ndarray, ScoredLines] | None:
    """Column-wise pass over a chunk: which lines are already scored rollouts with their
    `_ng_` keys (those need no parsing). None when the chunk does not parse column-wise, or
    when no line can have a `reward` key (then the lines are parsed once, one by one, not
    twice)."""
    if not may_hold_key(chunk, b"reward"):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    from gym_metrics.rollouts import agent_codes, arrow_numeric_field, columns_from_table, parse_lines

    all_lines = BufferRows(chunk, starts, ends)
    parsed = parse_lines(chunk, all_lines, 0, len(starts))
    if parsed is None:
        return None
    table, lines = parsed
    names = set(table.column_names)
    if not {TASK_KEY, ROLLOUT_KEY, "reward"} <= names or ("agent_ref" not in names and default_agent is None):
        return None
    agent = agent_codes(table.column("agent_ref") if "agent_ref" in names else None, default_agent, table.num_rows)
    reward = arrow_numeric_field(table.column("reward"))
    task, rollout = table.column(TASK_KEY), table.column(ROLLOUT_KEY)
    if agent is None or reward is None or not (pa.types.is_integer(task.type) and pa.types.is_integer(rollout.type)):
        return None
    t = pc.fill_null(task, -1).to_numpy(zero_copy_only=False)
    r = pc.fill_null(rollout, -1).to_numpy(zero_copy_only=False)
    agents, codes = agent
    ok = reward.present & (t >= 0) & (r >= 0) & np.array([bool(a) for a in agents], dtype=bool)[codes]
    unnamed = None if default_agent is None else _unnamed(table, names)
    keep = np.zeros(len(starts), dtype=bool)
    keep[lines[ok]] = True
    # rows `--agent` names are written with an agent_ref these columns lack: aggregated from the output
    columns = columns_from_table(table, all_lines, lines, default_agent) if ok.all() and (unnamed is None or not unnamed.any()) else None
    for cols in (columns or {}).values():
        assert cols.row_labels is not None  # columns_from_table labels every row
        cols.row_labels = cols.row_labels + line_offset
    found = ScoredLines(
        agents,
        codes[ok],
        t[ok].astype(np.int64),
        r[ok].astype(np.int64),
        reward.values[ok],
        chunk,
        starts[lines[ok]],
        ends[lines[ok]],
        columns,
        None if unnamed is None or not unnamed[ok].any() else unnamed[ok],
        default_agent or "",
    )
    return keep, found


def _unnamed(table: Any, names: set[str]) -> np.ndarray:
    """The rows whose agent_ref has no name (column-wise `agent_name(row) is None`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = table.column("agent_ref") if "agent_ref" in names else None
    if column is None or not pa.types.is_struct(column.type) or column.type.get_field_index("name") < 0:
        return np.ones(table.num_rows, dtype=bool)
    return np.asarray(pc.is_null(pc.struct_field(column, "name")).to_numpy(zero_copy_only=False), dtype=bool)


class _Bad(Exception):
    def __init__(self, field: str, reason: str) -> None:
        self.field, self.reason = field, reason


Where = tuple[bytes, int, int]
"""(chunk, start, end) of a line: its text as NeMo Gym compares lines is `line_identity(*where)`."""


def _rollouts(
    raw: bytes, line_no: int, num_repeats: Repeats, default_agent: str | None, indexer: Indexer, where: Where,
    prepare: RowPrepare | None = None, fan_out: Mapping[str, Sequence[str]] | None = None,
) -> Iterator[Rollout]:
    try:
        row = parse_row(raw)
    except ValueError as exc:
        raise _Bad("json", bad_json_reason(exc)) from None
    if not isinstance(row, dict):
        raise _Bad("row", f"expected a JSON object, got {type(row).__name__}")
    came_as = _routing_key(row)  # (before any agent_map)
    targets = fan_out.get(came_as) if fan_out and came_as is not None else None
    identity: bytes | None = None
    if prepare is not None:
        try:
            row, identity = prepare(row)
        except (KeyError, ValueError) as exc:
            field = exc.args[1] if len(exc.args) > 1 else "responses_create_params.input"  # ValueError(why, field): another field
            raise _Bad(str(field), str(exc.args[0] if exc.args else exc)) from None
    scored = num_repeats is None and is_scored(row)  # any reward but null
    keys = _plain_keys(row)
    if keys is not None and scored:  # a finished rollout with its keys (a fixed key); no copy
        yield Rollout(*keys, row, True, raw, line_no)
        return
    if (where_bad := lone_surrogate_at(raw, row)) is not None:  # this row is sent, or written again
        raise _Bad(where_bad, "holds a lone surrogate escape (\\ud800-\\udfff without its pair): not valid Unicode, so it cannot be sent or written as UTF-8")
    if targets is not None and not scored:
        yield from _fan_out(row, targets, line_no, num_repeats, came_as, indexer, identity if identity is not None else line_identity(*where))
        return
    task: int | None
    line: bytes | None = raw if prepare is None else None  # what is written for the row unless its dict is
    if keys is not None:
        agent, task = keys[0], keys[1]
    else:
        agent = _agent(row, default_agent)
        if agent_name(row) is None:
            named = _named_by_default(row, raw, agent)
            line = named if line is not None else None
        try:
            task = _given_task(row, scored)
            given = row_index_value(row, ROLLOUT_KEY_ALIASES) if scored and _has_any(row, ROLLOUT_KEY_ALIASES) else None
        except InvalidInputError as exc:
            v = exc.violations[0]
            raise _Bad(v.field, v.description) from None
        if task is not None and given is not None:  # a finished rollout with both indices (aliases too)
            keeps_raw = row.get(TASK_KEY) == task and row.get(ROLLOUT_KEY) == given
            yield Rollout(agent, task, given, _with_keys(row, task, given), True, line if keeps_raw else None, line_no)
            return
        if task is None:
            task = indexer.task_of(identity if identity is not None else line_identity(*where))
    for r in indexer.rollouts(task, _repeats(num_repeats, agent, came_as)):
        if row.get(TASK_KEY) == task and row.get(ROLLOUT_KEY) == r:  # the row has its keys: no copy
            yield Rollout(agent, task, r, row, scored, line, line_no)
        else:
            yield Rollout(agent, task, r, _with_keys(row, task, r), scored, None, line_no)


def _routing_key(row: dict[str, Any]) -> str | None:
    """The key a row came with, which fan_out and a num_repeats dict look up (NeMo Gym's routing
    basis): its agent_ref.name as written, else its task_source."""
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    key = name if name is not None else row.get("task_source")
    return key if isinstance(key, str) else None


def _repeats(num_repeats: Repeats, agent: str, came_as: str | None) -> int:
    """The rollouts of a line run with `agent` (module Repeats); _Bad when a dict has no entry."""
    if not isinstance(num_repeats, Mapping):
        return num_repeats or 1
    for key in (agent, came_as, "_default"):
        if key is not None and key in num_repeats:
            return num_repeats[key]
    raise _Bad("num_repeats", f"no --num-repeats entry for agent {agent!r}" + (f" or key {came_as!r}" if came_as not in (None, agent) else "") + ", and no _default")


def _fan_out(
    row: dict[str, Any], targets: Sequence[str], line_no: int, num_repeats: Repeats, came_as: str | None, indexer: Indexer, identity: bytes,
) -> Iterator[Rollout]:
    """The row's rollouts for each agent of `targets` in turn (its repeats each), one task, the
    rollout indices counted on across the agents (a copy's agent_ref `{"name": agent}`), as NeMo
    Gym's fan_out runs them."""
    try:
        task = _given_task(row, False)
    except InvalidInputError as exc:
        raise _Bad(exc.violations[0].field, exc.violations[0].description) from None
    task = task if task is not None else indexer.task_of(identity)
    counts = [_repeats(num_repeats, agent, came_as) for agent in targets]  # (a missing entry fails the line before any rollout)
    for agent, count in zip(targets, counts):
        copy = row if (row.get("agent_ref") or {}).get("name") == agent else {**row, "agent_ref": {"name": agent}}
        for r in indexer.rollouts(task, count):
            yield Rollout(agent, task, r, _with_keys(copy, task, r), False, None, line_no)


def indexed_rows(path: Path, default_agent: str) -> Iterator[dict[str, Any]]:
    """Each row of `path` with the `_ng_task_index` / `_ng_rollout_index` collect gives it (NeMo
    Gym's rules) and an agent_ref; InvalidInputError naming a bad line."""
    for item in read_input(path, None, default_agent, reverify=True):
        if isinstance(item, BadLine):
            raise InvalidInputError("a bad line", [FieldViolation(f"line {item.line}: {item.field}", item.reason)])
        if isinstance(item, Rollout):
            row = dict(item.row)
            if item.stored_reward is not None:
                row["reward"] = item.stored_reward
            row.setdefault("agent_ref", {"name": default_agent})
            yield row


def _to_verify_again(rollout: Rollout) -> Rollout:
    row = dict(rollout.row)
    stored = row.pop("reward")
    return Rollout(rollout.agent, rollout.task, rollout.rollout, row, False, None, rollout.line, stored)


def _named_by_default(row: dict[str, Any], raw: bytes, agent: str) -> bytes | None:
    """A row that `--agent` names gets its agent_ref (`with_agent_ref`), so what collect writes
    names its agent for every later command. Its line, when it had no agent_ref key: the same
    bytes with the key appended; else None (the row is written from its dict)."""
    had_key = "agent_ref" in row
    ref = row.get("agent_ref")
    row["agent_ref"] = {**(ref if isinstance(ref, dict) else {}), "name": agent}
    return None if had_key else with_agent_ref(raw, agent)


def _agent(row: dict[str, Any], default_agent: str | None) -> str:
    problem = agent_problem(row, default_agent)
    if problem:
        raise _Bad("agent_ref.name", problem)
    agent = agent_name(row)
    agent = default_agent if agent is None else agent
    if not agent:
        raise _Bad("agent_ref.name", "is empty: every line must name its agent")
    return agent


def _given_task(row: dict[str, Any], scored: bool) -> int | None:
    """The line's own task index: for a line to verify, its `_ng_task_index` (as NeMo Gym: a
    `task_index` column is data there); for a scored line (a rollout), any index `aggregate`
    reads. None: the line has none (null counts as none)."""
    if scored:
        return row_index_value(row, TASK_KEY_ALIASES) if _has_any(row, TASK_KEY_ALIASES) else None
    return row_index_value(row, (TASK_KEY,)) if row.get(TASK_KEY) is not None else None


def _plain_keys(row: dict[str, Any]) -> tuple[str, int, int] | None:
    """(agent, task, rollout) of the usual row (agent_ref.name a non-empty string, both `_ng_`
    indices integers from 0 to MAX_INDEX, so the row has its keys already); None: check it in full."""
    ref, task, rollout = row.get("agent_ref"), row.get(TASK_KEY), row.get(ROLLOUT_KEY)
    if type(ref) is dict and type(task) is int and type(rollout) is int and 0 <= task <= MAX_INDEX and 0 <= rollout <= MAX_INDEX:
        name = ref.get("name")
        if type(name) is str and name:
            return name, task, rollout
    return None


def _has_any(row: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return any(row.get(k) is not None for k in keys)


def _with_keys(row: dict[str, Any], task: int, rollout: int) -> dict[str, Any]:
    out = dict(row)
    out[TASK_KEY] = task
    out[ROLLOUT_KEY] = rollout
    return out


def dumps_row(row: dict[str, Any]) -> bytes:
    """A row as one JSONL line (NaN becomes null: the output is strict JSON; a value orjson
    refuses, as Python's json writes it: jsonio.dumps_finite)."""
    return dumps_finite(row) + b"\n"
