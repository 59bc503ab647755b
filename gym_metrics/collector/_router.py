"""Phase 1's bookkeeping: which input rows are written at once, which are verified (or
generated first), and the output lines of each answered batch or failed generation."""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from gym_metrics._transport.client import VerifiedBatch
from gym_metrics._util.unique import unique
from gym_metrics.rollouts import ERROR_KEY, MASK_KEY, BadLine, RolloutColumns
from gym_metrics.collector._keys import FixedKeys
from gym_metrics.collector._input import Rollout, ScoredLines, dumps_row, read_input
from gym_metrics.collector._outfile import FailuresFile, OutputFile
from gym_metrics.collector._progress import Progress
from gym_metrics.collector._capture import with_trajectory
from gym_metrics.collector._generate import needs_generation, with_rollout_seed
from gym_metrics.collector._rows import written_row
from gym_metrics.collector._verify import MAX_BODY_BYTES, Batch, too_large
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym import RELAY_TYPE, EnvironmentServer, relay_name

NO_RESPONSE = "no `response` to verify and no policy to generate one: give collect --policy-url and --policy-model, or rows with a response"

if TYPE_CHECKING:
    from gym_metrics.collector._options import CollectOptions


FAILURE_CLASS_KEY = "_ng_failure_class"
"""NeMo Gym's mark of a rollout that failed (a judge that did not answer): its row goes to the
failures sidecar, not to the rollouts file."""
ATTEMPT_KEY = "_ng_attempt_index"
"""A rollout run again after failed attempts: how many (NeMo Gym's stamp, on the row written)."""
NO_PERSIST_KEY = "_ng_no_persist"
"""NeMo Gym's mark of a rollout whose harness failed, not the rollout (an agent's `/run` answer
says it): written nowhere, so `--resume` runs it again."""

STORED_REWARD_KEY = "_gm_stored_reward"
"""With --reverify: the reward a row carried before it was verified again (not measured: it
starts with `_`)."""


_BOOKKEEPING = ("reward", "mask_sample", "failure_kind", "failure_reason")


def without_failure(row: dict[str, Any]) -> dict[str, Any]:
    """A failures-sidecar row as a verify request again: its verifier inputs, without the
    reward and the failure bookkeeping NeMo Gym's judge failsafe added."""
    out = {k: v for k, v in row.items() if k not in _BOOKKEEPING and not k.startswith("_ng_failure")}
    config = out.get("instance_config")
    if isinstance(config, dict) and "mask_sample" in config:
        out["instance_config"] = {k: v for k, v in config.items() if k != "mask_sample"}
    return out


def _same_reward(stored: Any, new: Any) -> bool:
    try:
        return float(stored) == float(new)
    except (TypeError, ValueError):
        return False


class Router:
    """Splits the input: already-verified rows are written at once, the rest are verified."""

    def __init__(
        self, path: Path, opts: CollectOptions, out: OutputFile, progress: Progress, fixed: FixedKeys | None = None
    ) -> None:
        self.path, self.opts, self.out, self.progress = path, opts, out, progress
        self.fixed = fixed
        """The input's fixed keys (`find_fixed_keys`), found before anything was written."""
        self.tasks: dict[str, set[int]] = defaultdict(set)
        self.bad_lines: list[BadLine] = []
        self.verified = self.passed_through = self.skipped_done = self.generation_failed = self.unanswered = 0
        self.failures = FailuresFile(out.path, opts.resume or opts.reverify_failed)
        self.dropped: dict[str, int] = defaultdict(int)
        """Rollouts whose verify answer named a failure class, by class (in the sidecar)."""
        self.not_kept = 0
        self.no_reward = 0
        """Rollouts verified with a NaN or infinite reward (null in the row, as NeMo Gym writes it)."""
        """Rollouts whose answer said not to keep them (NO_PERSIST_KEY): in neither file."""
        self.log: Callable[[str], None] = lambda message: print(message, file=sys.stderr)
        self.reverified = self.rewards_changed = 0
        """With --reverify: rows that carried a reward and were verified again; of those, the
        ones whose new reward differs from the stored one."""
        self.generation_failures: dict[str, int] = defaultdict(int)
        """Failed generations per agent (this run's)."""
        self._pending: list[bytes] = []
        self.columns: dict[str, list[RolloutColumns]] = defaultdict(list)
        """Columns of passed-through rows, while every output row is among them."""
        self.complete = True
        self.agent_type = "simple_agent"
        """The NeMo Gym agent type the rows are collected as (`gymnasium_agent` for an
        environment that answers each step), for the environment server each row names."""
        self.environment_servers: dict[str, tuple[str, str]] = {}
        """The served config's environment server (name, type) of each of its agents."""
        self._servers: dict[str, EnvironmentServer] = {}
        self._checked: set[str] = set()

    def environment_server(self, agent: str) -> EnvironmentServer:
        """The environment server NeMo Gym puts in front of `agent`: the served config's, else
        the relay its config migration would generate for an agent of `agent_type`."""
        server = self._servers.get(agent)
        if server is None:
            given = self.environment_servers.get(agent)
            server = EnvironmentServer(*given) if given else EnvironmentServer(relay_name(agent, self.agent_type), RELAY_TYPE)
            self._servers[agent] = server
        return server

    def _check_agent(self, rollout: Rollout) -> None:
        """An agent the served NeMo Gym config does not have (a misspelt `agent_ref.name`,
        `--agent` or `--agent-map`; or a name of the user's own, a label) is said once: its
        rollouts run as the config's agents do when they agree (simple_agent), and are scored
        under that name. NeMo Gym's collection refuses such a row; here an agent is also a label
        a run is compared by, so it is said, not refused."""
        self._checked.add(rollout.agent)
        known = self.environment_servers
        if not known or rollout.agent in known:
            return
        close = get_close_matches(rollout.agent, list(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        self.log(f"warning: input line {rollout.line}: agent {rollout.agent!r} is not an agent of the served config{hint}: its agents are "
                 f"{', '.join(sorted(known))}; its rollouts run as theirs, scored under {rollout.agent!r}")  # fmt: skip

    def to_verify(self) -> Iterator[Rollout]:
        opts = self.opts
        reverify = opts.reverify or opts.reverify_failed
        shard = opts.shard
        for item in self._input(reverify):
            if isinstance(item, Rollout) and opts.reverify_failed:
                item.row, item.stored_reward = without_failure(item.row), None
            if isinstance(item, BadLine):
                self._bad(item)
                continue
            if isinstance(item, ScoredLines):
                self._pass_through(item)
                continue
            if not item.verified and item.raw is not None and len(item.raw) > MAX_BODY_BYTES:  # no message carries it (make_batches checks the rest)
                self._bad(BadLine(item.line or 0, "(the row)", too_large(len(item.raw), item.line).violations[0].description))
                continue
            self.tasks[item.agent].add(item.task)
            if shard is not None and not shard.owns(item.task, item.agent, f"line {item.line}"):
                continue
            if item.agent not in self._checked:
                self._check_agent(item)
            key = (item.agent, item.task, item.rollout)
            if key in self.out.done:
                self.skipped_done += 1
                continue
            attempt = self.out.retries.attempt(key)
            if attempt is None:  # spent or terminal, counting the sidecar's rows that name no agent
                self.skipped_done += 1
                continue
            if attempt:  # run again after failed attempts: NeMo Gym's stamp, on every row it writes
                item.row, item.raw = {**item.row, ATTEMPT_KEY: attempt}, None
            if item.verified:
                self.complete = False
                self._pending.append(item.raw + b"\n" if item.raw is not None else dumps_row(item.row))
                self.passed_through += 1
                self.progress.add(item.agent, _reward(item.row))
                if len(self._pending) >= 4096:
                    self.flush()
                continue
            if opts.seed_each_rollout and opts.target is not None and needs_generation(item.row):
                try:
                    item.row, item.raw = with_rollout_seed(item.row, item.rollout), None
                except ValueError as exc:
                    self._bad(BadLine(item.line, "responses_create_params.metadata.extra_body", str(exc)))
                    continue
            yield item
        self.flush()

    def _input(self, reverify: bool) -> Iterator[Rollout | BadLine | ScoredLines]:
        """The input's items; with `interleave_repeats`, its rollouts round by round (every
        task's rollout 0 in input order, then every rollout 1, ...: NeMo Gym's stable sort by
        rollout index), the input read again each round (memory stays bounded), bad and
        scored lines taken from the first round only."""
        opts = self.opts

        def read() -> Iterator[Rollout | BadLine | ScoredLines]:
            return read_input(self.path, opts.num_repeats, opts.default_agent, self.fixed, reverify, opts.prepare_row, opts.limit, opts.max_rollouts,
                              opts.fan_out, self.out.task_lines)  # fmt: skip

        if not opts.interleave_repeats:
            yield from read()
            return
        round_ = 0
        while True:
            later = False
            for item in read():
                if not isinstance(item, Rollout):
                    if round_ == 0:
                        yield item
                elif item.rollout == round_:
                    yield item
                else:
                    later = later or item.rollout > round_
            if not later:
                return
            round_ += 1

    def _pass_through(self, scored: ScoredLines) -> None:
        """Already-scored lines, column-wise: keys noted, lines copied, progress counted."""
        shard = self.opts.shard
        keep = np.ones(len(scored), dtype=bool) if shard is None else shard.owned(scored.task, scored.agent_code, scored.agents)
        owned = keep.copy()
        for code, name in enumerate(scored.agents):
            mine = scored.agent_code == code
            if not mine.any():
                continue
            self.tasks[name].update(unique(scored.task[mine]).tolist())
            if self.out.done:
                for i in np.flatnonzero(mine).tolist():
                    if (name, int(scored.task[i]), int(scored.rollout[i])) in self.out.done:
                        keep[i] = False
            rewards = scored.reward[mine & keep]
            self.progress.add_many(name, len(rewards), float(np.nansum(rewards)), int(np.isfinite(rewards).sum()))
        self.skipped_done += int((owned & ~keep).sum())
        if scored.columns is None or not keep.all():
            self.complete = False
        elif self.complete:
            for name, cols in scored.columns.items():
                self.columns[name].append(cols)
        self.flush()
        self.out.write([scored.text(None if keep.all() else keep)])
        self.passed_through += int(keep.sum())
        self.progress.tick()

    def record(self, batch: Batch, verified: VerifiedBatch) -> None:
        """Write an answered batch: each row with its verify response (parsed once, here) or
        its error."""
        self.complete = False
        lines: list[bytes] = []
        dropped: list[bytes] = []
        add, isfinite = self.progress.add, math.isfinite
        for (rollout, _), reward, text, kind, message in zip(
            batch, verified.reward, verified.response_json, verified.error_kind, verified.error_message
        ):
            if kind is None and text:
                row = written_row(rollout.row, orjson.loads(text), self.environment_server(rollout.agent), self.opts.keep_input_fields)
                if row.get(NO_PERSIST_KEY):  # as NeMo Gym's collection: in neither file, run again on resume
                    self.not_kept += 1
                    self._say_not_kept(rollout, row)
                    add(rollout.agent, None, error=True)
                    continue
                failure = row.get(FAILURE_CLASS_KEY)
                if failure is not None:  # NeMo Gym's collection: to the sidecar, out of the score
                    self.dropped[str(failure)] += 1
                    dropped.append(dumps_row(row))
                    add(rollout.agent, None, error=True)
                    continue
                if not isfinite(reward):  # NeMo Gym writes it null and its stats drop it: so here, but said
                    self.no_reward += 1
                    add(rollout.agent, None)
                else:  # a masked rollout is out of the metrics' mean: out of the progress line's too
                    add(rollout.agent, None if row.get(MASK_KEY) else reward)
            else:
                # The server knows only the rollout; the user needs the input line.
                message = f"input line {rollout.line}: {message}" if rollout.line else message
                row = {**rollout.row, ERROR_KEY: {"kind": kind, "message": message}}
                row.pop("reward", None)
                add(rollout.agent, None, error=True)
            if rollout.recorded:
                row.update(rollout.recorded)
                with_trajectory(row, rollout)
            if rollout.stored_reward is not None:
                row[STORED_REWARD_KEY] = rollout.stored_reward
                if kind is None:  # (a row that failed has no new reward to differ: it is counted as failed)
                    self.reverified += 1
                    self.rewards_changed += not _same_reward(rollout.stored_reward, row.get("reward"))
            lines.append(dumps_row(row))
        self.flush()
        self.out.write(lines)
        if dropped:
            self.failures.write(dropped)
        self.verified += len(lines) + len(dropped)
        self.progress.tick()

    def _say_not_kept(self, rollout: Rollout, row: dict[str, Any]) -> None:
        """Each rollout left out of both files is said as it happens (NeMo Gym says it too)."""
        why = str(row.get("agent_error") or row.get("_ng_failure_message") or row.get("error") or "")[:200]
        where = f"input line {rollout.line}" if rollout.line else f"task {row.get('_ng_task_index')} rollout {row.get('_ng_rollout_index')}"
        self.log(f"collect: {where} not kept (its answer says {NO_PERSIST_KEY}; class {row.get(FAILURE_CLASS_KEY)}): {why}; --resume runs it again")

    def answered(self, rollouts: Iterator[Rollout]) -> Iterator[Rollout]:
        """`rollouts` but those with no response to verify, which, with no policy to generate
        one, are failed rollouts (never verified as an empty answer: a silent 0)."""
        for rollout in rollouts:
            if rollout.row.get("response") is None:
                self.unanswered += 1
                self.record_failed(rollout, NO_RESPONSE)
            else:
                yield rollout

    def record_failed(self, rollout: Rollout, message: str) -> None:
        """Write a rollout whose generation failed (or that has no response and no policy to
        make one): a failed rollout (`_gm_error` kind `generation`), counted like a failed
        verification."""
        self.complete = False
        message = f"input line {rollout.line}: {message}" if rollout.line else message
        row = {**rollout.row, **(rollout.recorded or {}), ERROR_KEY: {"kind": "generation", "message": message}}
        row.pop("reward", None)
        self.progress.add(rollout.agent, None, error=True)
        self.flush()
        self.out.write([dumps_row(row)])
        self.generation_failed += 1
        self.generation_failures[rollout.agent] += 1
        self.progress.tick()

    def flush(self) -> None:
        if self._pending:
            self.out.write(self._pending)
            self._pending = []
            self.progress.tick()

    def _bad(self, bad: BadLine) -> None:
        self.bad_lines.append(bad)
        if self.opts.on_bad_line == "fail":
            self.flush()
            raise InvalidInputError(
                f"{self.path}: bad input line (fix it and re-run with --resume, or use --on-bad-line skip)",
                [FieldViolation(bad.field, bad.reason, bad.line, row_name="line")],
            )
        print(f"warning: skipped {self.path}:{bad}", file=sys.stderr)


def _reward(row: dict[str, Any]) -> float | None:
    """The row's reward as the progress line's mean counts it: none when masked."""
    value = row.get("reward")
    return float(value) if isinstance(value, (int, float)) and not row.get(MASK_KEY) else None
