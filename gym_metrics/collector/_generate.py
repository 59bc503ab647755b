"""Generate, then verify: the rollouts that need an answer get one from the policy model while
earlier ones are already being verified.

`GeneratedBatches` sits between the input and VerifyStream. A feeder task reads the input;
each rollout without a `response` (or reward) starts a generation, at most `concurrency` at
once, and goes to the ready queue with the policy's Responses-shaped answer as its `response`;
rollouts that already have one go there directly. The verify sender takes whatever is ready
as its next batch (`next_batch()`), so verification never waits for the whole input. Memory is
bounded by the generations in flight plus a ready queue of at most `ready_limit` rollouts (the
feeder waits for room), and big answers by one byte budget whatever the concurrency
(ANSWER_BUDGET_BYTES: an answer's body is read only when it fits beside the answers already
held, each counted until its rollout is written and freed). A generation that fails after its
retries is handed to `on_failed` (written as a failed rollout), never raised.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gym_metrics.collector._capture import Capture, captured
from gym_metrics.collector._input import Rollout
from gym_metrics.collector._progress import Progress
from gym_metrics.collector._verify import Batch
from gym_metrics.targets import ByteBudget, Generation, GenerationError, ModelTarget, ModelTargetConfig
from gym_metrics._util.jsonio import dumps_finite

REQUEST_KEY = "responses_create_params"
NO_INPUT = f"{REQUEST_KEY} has no input: the prompt to ask the policy (NeMo Gym's request model requires it)"
"""The row field holding the Responses API request (NeMo Gym's task rows)."""

ANSWER_BUDGET_BYTES = 256 << 20
"""Bytes of policy answers collect holds at once (being read, or generated and not yet
written; each counts twice its size: a rollout's row and its encoded body). One answer up to
`max_answer_bytes` always proceeds, so the peak is about this plus one answer."""
_HELD_FROM = 64 << 10
"""Rollouts smaller than this are not counted (they do not matter, and counting costs CPU)."""

OnFailed = Callable[[Rollout, str], None]
"""Called once per rollout whose generation failed, with the error message."""


def make_target(config: ModelTargetConfig, *, token_ids: bool = False) -> ModelTarget:
    """The policy client, on the lean HTTP pool (httpx costs ~0.7 ms of CPU per request, see
    targets/_wire.py), its reads under one ANSWER_BUDGET_BYTES budget; a chat answer's `<think>`
    blocks become reasoning, as NeMo Gym's converter makes them."""
    return ModelTarget(config, lean_http=True, budget=ByteBudget(ANSWER_BUDGET_BYTES, factor=2), think_tags=True, token_ids=token_ids)


def with_rollout_seed(row: dict[str, Any], rollout: int) -> dict[str, Any]:
    """The row with its rollout index as the engine's sampling seed, as NeMo Gym's
    `num_repeats_add_seed` writes it: `"seed"` added to its request's `metadata.extra_body` (JSON
    text, json.dumps' spelling), which a chat endpoint's body then gets (targets: a vLLM
    server's seed); ValueError when that text is not a JSON object's."""
    params = dict(row.get(REQUEST_KEY) or {})
    metadata = dict(params.get("metadata") or {})
    try:
        extra = json.loads(metadata.get("extra_body") or "{}")
    except (TypeError, json.JSONDecodeError):
        extra = None
    if not isinstance(extra, dict):
        raise ValueError(f"is not a JSON object's text: {str(metadata.get('extra_body'))[:200]!r}")
    extra["seed"] = rollout
    metadata["extra_body"] = json.dumps(extra)
    params["metadata"] = metadata
    return {**row, REQUEST_KEY: params}


def needs_generation(row: Mapping[str, Any]) -> bool:
    """A row without a response to verify (and without a reward: those never get here)."""
    return row.get("response") is None


class GeneratedBatches:
    """The verify batches of `rollouts`, generated first where needed (see the module
    docstring). `next_batch()` is safe to cancel: nothing is taken from the queue until a batch
    is returned."""

    def __init__(
        self,
        rollouts: Iterator[Rollout],
        target: ModelTarget,
        on_failed: OnFailed,
        progress: Progress,
        *,
        max_items: int,
        max_bytes: int,
        capture: Capture | None = None,
    ) -> None:
        self.rollouts, self.target, self.on_failed, self.progress = rollouts, target, on_failed, progress
        self.capture = capture
        self.max_items, self.max_bytes = max_items, max_bytes
        self.concurrency = target.config.max_concurrency
        self.ready_limit = max(max_items, self.concurrency)
        self._ready: deque[tuple[Rollout, bytes]] = deque()
        self._changed = asyncio.Condition()
        self._slots = asyncio.Semaphore(self.concurrency)
        self._running: set[asyncio.Task[None]] = set()
        self._done = False
        self._error: BaseException | None = None
        self._feeder: asyncio.Task[None] | None = None

    async def next_batch(self) -> Batch | None:
        """The next batch (what is ready, up to max_items / max_bytes, at least one rollout);
        None when every rollout has been batched; the input's error once it is drained."""
        if self._feeder is None:
            self._feeder = asyncio.ensure_future(self._feed())
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._ready) or self._done)
            if not self._ready:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                return None
            batch: Batch = []
            size = 0
            while self._ready and len(batch) < self.max_items:
                if batch and size + len(self._ready[0][1]) > self.max_bytes:
                    break
                item = self._ready.popleft()
                batch.append(item)
                size += len(item[1])
            self._changed.notify_all()  # room for the feeder
            return batch

    async def aclose(self) -> None:
        """Stop reading, cancel the generations still running (a run that failed), close the
        clients."""
        tasks = [t for t in (self._feeder, *self._running) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.target.aclose()

    async def _feed(self) -> None:
        """Read the input, start generations, wait for the last one, then mark the end."""
        try:
            for n, rollout in enumerate(self.rollouts):
                async with self._changed:
                    await self._changed.wait_for(lambda: len(self._ready) < self.ready_limit)
                if needs_generation(rollout.row):
                    await self._slots.acquire()
                    task = asyncio.ensure_future(self._generate(rollout))
                    self._running.add(task)
                    task.add_done_callback(self._running.discard)
                else:
                    await self._push(rollout)
                    if n % 256 == 255:
                        await asyncio.sleep(0)  # let the sender and the generations run
        except Exception as exc:  # a bad input line: batch what was read, then raise it
            self._error = exc
        finally:
            if self._running:
                await asyncio.gather(*list(self._running), return_exceptions=True)
            async with self._changed:
                self._done = True
                self._changed.notify_all()

    async def _generate(self, rollout: Rollout) -> None:
        try:
            request = rollout.row.get(REQUEST_KEY)
            if not isinstance(request, Mapping):
                self._failed(rollout, f"no {REQUEST_KEY} (a Responses API request) to generate from")
                return
            if "input" not in request:
                self._failed(rollout, NO_INPUT)
                return
            trace = self.capture.trace() if self.capture is not None else None
            try:
                with captured(rollout, self.capture, trace):
                    asked_at = time.time()
                    generation = await self.target.generate(request)
                    if trace is not None:
                        trace.single_turn(request, generation.response, asked_at)
            except GenerationError as exc:
                self._failed(rollout, str(exc))
                return
            self._generated(rollout, generation)
            await self._push(rollout)
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError) and self._error is None:
                self._error = exc  # a bug, not a model failure: the run fails with it
            raise
        finally:
            self._slots.release()

    def _generated(self, rollout: Rollout, generation: Generation) -> None:
        rollout.row = {**rollout.row, "response": generation.response}
        rollout.raw = None  # the line written is the row, not the input line
        self.progress.generated(generation.usage.output_tokens)

    def _failed(self, rollout: Rollout, message: str) -> None:
        self.progress.generated(None, failed=True)
        self.on_failed(rollout, message)

    async def _push(self, rollout: Rollout) -> None:
        body = dumps_finite(rollout.row)
        budget = self.target.budget
        if budget is not None and len(body) >= _HELD_FROM:
            budget.hold(rollout, len(body))  # until written and freed, wherever it is then
        async with self._changed:
            self._ready.append((rollout, body))
            self._changed.notify_all()
