"""Agent-loop collection: each rollout that needs an answer runs as a multi-turn episode in a
session of the environment, then is verified in that session.

Per rollout: SeedSession with the task row, the agent loop (run_episode, _agent_loop.py: the policy
with the environment's tools, each function call a CallTool in the session), Verify in the
session (which ends it), then the row is written. An episode is pinned to one replica (its
session lives there). A replica lost mid-episode (unavailable, or the session gone) is an
infrastructure failure: the episode starts again from a fresh session on another replica, up
to `max_episode_attempts` tries (or the retry policy's retries, whichever is more), each after
the retry policy's backoff (a server restarted on its address is found again), never a reward
of 0. A policy that fails after its retries
writes a failed rollout (`_gm_error` kind `generation`); a row the environment refuses, an
`invalid_request`; an environment whose verify raises, a `verify_failed`. Rows are written
when their episode is verified, so `--resume` resumes finished episodes only. At most
`concurrency` episodes run at once.

A rollout of an agent behind NeMo Gym's session protocol (`session_protocol`: its environment
server `single_agent_turn_legacy`) runs the same program, and an episode that fails at a step
(seeding the session, the policy, verifying) is that server's failure row in the failures sidecar
(EpisodeFailed: `environment_server_failed`, its stage, terminal when the step was refused).

A rollout of an agent that never runs tools (ONE_CALL_AGENTS, the type the server's NeMo Gym
config gives its agent) is one policy call verified, in a session where that agent seeds one
(SEEDING_AGENTS), as that agent runs it.
A rollout of another NeMo Gym agent is run by that agent's own code (`agents`, _agent_code.py),
or stops the run when its code is not given.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from gym_metrics._transport.client import (
    RemoteCallError,
    ResourcesClient,
    ServerBusyError,
    ServerUnavailableError,
    ServerUnreachableError,
    VerifiedBatch,
    tool_caller,
)
from gym_metrics._util.memory import fewer_gc_passes
from gym_metrics.collector._generate import NO_INPUT, REQUEST_KEY, needs_generation
from gym_metrics.collector._options import RetryPolicy
from gym_metrics.collector._input import Rollout
from gym_metrics.collector._progress import Progress
from gym_metrics.collector._verify import Batch
from gym_metrics.errors import InvalidInputError
from gym_metrics.nemo_gym import as_recorded, episode_failure_row, session_seed_body, session_verify_body
from gym_metrics.collector._agent_loop import ONE_CALL_AGENTS, SEEDING_AGENTS, run_episode
from gym_metrics.collector._step_loop import DEFAULT_MAX_STEPS, run_step_episode
from gym_metrics.collector._capture import Capture, captured
from gym_metrics.recording import CAPTURE_KEY, OBSERVATIONS_KEY, TRAJECTORY_KEY, agent_trajectory, rollout_id_of, session_observations
from gym_metrics.targets import labelled
from gym_metrics.collector._agent_code import AgentCode, SessionRoutes, refuse_unrunnable, with_evidence
from gym_metrics.targets import GenerationError, ModelTarget

STOP_KEY = "_gm_stop_reason"
"""The row key of an episode the agent loop stopped at `max_steps` (its response stays NeMo
Gym's, whose simple_agent marks it nowhere but in its trajectory)."""

MAX_BUSY_WAITS = 200
"""Waits of one episode for a server whose sessions are all taken (each up to 5 s)."""

Record = Callable[[Batch, VerifiedBatch], None]
OnFailed = Callable[[Rollout, str], None]


class EpisodeRunner:
    """Runs the episodes of `rollouts` over `clients` (replicas); see the module docstring."""

    def __init__(
        self,
        clients: Sequence[ResourcesClient],
        tools: list[dict[str, Any]],
        target: ModelTarget,
        record: Record,
        on_failed: OnFailed,
        progress: Progress,
        *,
        max_steps: int | None,
        agent_max_steps: Callable[[str], int | None] | None = None,
        agent_type: Callable[[str], str | None] | None = None,
        parallel_tool_calls: bool = False,
        any_tool_name: bool = False,
        steps: bool = False,
        attempts: int,
        log: Callable[[str], None],
        capture: Capture | None = None,
        retry: RetryPolicy | None = None,
        agents: Mapping[str, AgentCode] | None = None,
        session_protocol: frozenset[str] = frozenset(),
        model_servers: Mapping[str, str] | None = None,
        resources_server: str = "",
    ) -> None:
        self.clients, self.tools, self.target = list(clients), tools, target
        self.agents: Mapping[str, AgentCode] = agents if agents is not None else {}
        self._runnable: set[str] = set()
        """Agents whose loop collect runs itself (refuse_unrunnable passed)."""
        self.record, self.on_failed, self.progress, self.log = record, on_failed, progress, log
        self.retry = retry or RetryPolicy()
        self.max_steps, self.agent_max_steps, self.parallel_tool_calls = max_steps, agent_max_steps, parallel_tool_calls
        self.agent_type, self.session_protocol, self.resources_server = agent_type, session_protocol, resources_server
        self.model_servers: Mapping[str, str] = model_servers or {}
        """The model server each agent's config gives it: its calls are recorded under it."""
        self.attempts = max(1, attempts, self.retry.max_retries + 1)
        self.known, self.any_tool_name, self.steps = frozenset(t["name"] for t in tools), any_tool_name, steps
        self.capture = capture
        self.answered: Counter[int] = Counter()
        """Episodes each client verified."""
        self.lost: set[int] = set()
        """Clients that went away (tried last)."""
        self.tool_calls = self.failed_tool_calls = self.retried = self.at_max_steps = 0
        self._next = itertools.count()

    async def run(self, rollouts: Iterator[Rollout]) -> None:
        """Every rollout's episode (or plain verify, for rows that have a response), at most
        the policy's concurrency at once. An episode that cannot finish anywhere (every
        replica gone) stops the run: its error is raised once the others are cancelled."""
        # Thousands of episodes' state alive at once, each living about as long as its policy
        # calls: the young generation waits until most of what it saw made is freed again
        # (about 120 containers an episode), else each collection walks live episodes (a
        # sixth of collect's CPU at 16,000 in flight). Only cyclic garbage waits longer.
        young = min(1_000_000, max(50_000, 20 * self.target.config.max_concurrency))
        with fewer_gc_passes(young, 20, 100):
            await self._run(rollouts)

    async def _run(self, rollouts: Iterator[Rollout]) -> None:
        slots = asyncio.Semaphore(self.target.config.max_concurrency)
        running: set[asyncio.Task[None]] = set()
        failures: list[BaseException] = []

        def done(task: asyncio.Task[None]) -> None:
            running.discard(task)
            if not task.cancelled() and task.exception() is not None:
                failures.append(task.exception())  # type: ignore[arg-type]

        try:
            for rollout in rollouts:
                await slots.acquire()
                if failures:
                    break
                task = asyncio.ensure_future(self._one(rollout, slots))
                running.add(task)
                task.add_done_callback(done)
            while running and not failures:
                await asyncio.wait(list(running), return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for task in list(running):
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
        if failures:
            raise failures[0]

    async def _one(self, rollout: Rollout, slots: asyncio.Semaphore) -> None:
        try:
            if not needs_generation(rollout.row):
                await self._attempts(rollout, self._verify_only)
            elif not isinstance(rollout.row.get(REQUEST_KEY), Mapping):
                self._failed(rollout, f"no {REQUEST_KEY} (a Responses API request) to run an episode from")
            elif "input" not in rollout.row[REQUEST_KEY] and not self.steps:  # (a reset's observation may be the first prompt)
                self._failed(rollout, NO_INPUT)
            elif rollout.agent in self.agents:
                code = self.agents[rollout.agent]  # built on first use: an agent that cannot be stops the run
                await self._attempts(rollout, lambda client, rollout: self._agent_code(code, client, rollout))
            else:
                if rollout.agent not in self._runnable:  # (once an agent: this is the per-episode path)
                    refuse_unrunnable(rollout, self.agent_type(rollout.agent) if self.agent_type is not None and not self.steps else None)
                    self._runnable.add(rollout.agent)
                await self._attempts(rollout, self._step_episode if self.steps else self._one_call if self._calls_once(rollout) else self._episode)
        finally:
            slots.release()

    async def _attempts(self, rollout: Rollout, run: Callable[[ResourcesClient, Rollout], Any]) -> None:
        attempt = busy = 0
        while True:
            index = self._pick()
            try:
                reward, response_json = await run(self.clients[index], rollout)
            except ServerBusyError:  # up, but its sessions are all taken: wait, then again
                busy += 1
                if busy > MAX_BUSY_WAITS:
                    raise
                await asyncio.sleep(random.uniform(0, min(5.0, 0.05 * 2**min(busy, 10))))
                continue
            except (ServerUnavailableError, ServerUnreachableError) as exc:  # SessionLostError too
                attempt += 1
                self.lost.add(index)
                if attempt == self.attempts:
                    raise ServerUnavailableError(f"episode of input line {rollout.line} lost its server {self.attempts} times: {exc}") from None
                self.retried += 1
                wait = self.retry.delay(attempt)
                self.log(f"collect: episode of input line {rollout.line} lost server {self.clients[index].target} ({exc}); starting it again in {wait:.1f}s")
                await asyncio.sleep(wait)
                continue
            except EpisodeFailed as exc:  # (its rollout did not run: out of the score)
                if exc.stage == "agent":
                    self.progress.generated(None, failed=True)
                self._write(rollout, math.nan, json.dumps(exc.row(rollout.agent), ensure_ascii=False), None, "")
                return
            except GenerationError as exc:
                self._failed(rollout, str(exc))
                return
            except InvalidInputError as exc:
                self._write(rollout, 0.0, "", "invalid_request", str(exc))
                return
            except RemoteCallError as exc:  # the environment's own code failed (INTERNAL)
                self._write(rollout, 0.0, "", "verify_failed", exc.details)
                return
            self.lost.discard(index)
            self.answered[index] += 1
            self._write(rollout, reward, response_json, None, "")
            return

    def _pick(self) -> int:
        """The next replica, round robin, those that went away last."""
        n, start = len(self.clients), next(self._next)
        order = [(start + k) % n for k in range(n)]
        return next((i for i in order if i not in self.lost), order[0])

    async def _episode(self, client: ResourcesClient, rollout: Rollout) -> tuple[float, str]:
        calls = client.session_stream()  # the connection's multiplexed stream: cheaper per call
        trace = self.capture.trace() if self.capture is not None else None  # (its clock starts with the episode)
        stage, session, response = "seed", "", None
        try:
            protocol = rollout.agent in self.session_protocol  # (as single_agent_turn_legacy seeds and verifies)
            session = await calls.seed_session(session_seed_body(rollout.row, self.resources_server) if protocol else rollout.row)
            stage = "agent"
            request = dict(rollout.row[REQUEST_KEY])
            if not request.get("tools") and self.tools and not self.any_tool_name:  # a NeMo Gym app's rows keep theirs, as its agent sends them
                request["tools"] = self.tools
            model_ref = self._model_ref(rollout)
            with captured(rollout, self.capture, trace), labelled(model_ref, None) if model_ref is not None else nullcontext():
                episode = await run_episode(
                    self.target, request, tool_caller(calls, session, self.known, self.any_tool_name),
                    max_steps=self._max_steps(rollout), parallel_tool_calls=self.parallel_tool_calls, trace=trace,
                )  # fmt: skip
            self.tool_calls += episode.tool_calls
            self.failed_tool_calls += episode.failed_tool_calls
            self._generated(episode.response)
            body = {**rollout.row, "response": episode.response}
            stage, response = "verification", episode.response
            verified = await calls.verify_text(session_verify_body(rollout.row, episode.response) if protocol else body, session_id=session)
            session = ""  # verify ended it
            if episode.stop == "max_steps":  # counted once verified (a lost episode starts again)
                self.at_max_steps += 1
                rollout.recorded = {**(rollout.recorded or {}), STOP_KEY: episode.stop}
            rollout.row, rollout.raw = body, None  # (only now: a retried episode starts from the task row)
            if model_ref is not None and rollout.trace is not None:
                return verified[0], self._nemo_evidence(rollout, verified[1], model_ref)
            block = (rollout.recorded or {}).get(CAPTURE_KEY) if model_ref is not None and self.capture and self.capture.payloads else None
            if isinstance(block, dict) and block.get("calls"):  # payloads kept: as NeMo Gym's model server records them
                block["calls"] = as_recorded(block["calls"], rollout.row[REQUEST_KEY])
            return verified
        except (GenerationError, InvalidInputError, RemoteCallError) as exc:
            if rollout.agent in self.session_protocol:
                raise EpisodeFailed(stage, exc, response) from exc
            raise
        finally:
            if session:
                await _close_quietly(calls, session)

    def _model_ref(self, rollout: Rollout) -> dict[str, str] | None:
        """The model server a NeMo Gym agent's calls are recorded under, when they are recorded."""
        name = self.model_servers.get(rollout.agent)
        if self.capture is None or name is None:
            return None
        return {"type": "responses_api_models", "name": name}

    def _nemo_evidence(self, rollout: Rollout, text: str, model_ref: dict[str, str]) -> str:
        """The verify answer of a NeMo Gym agent's observed rollout with what simple_agent gives:
        behind the session protocol, its session's evidence at its close (`ng_agent_observations`);
        else its own trajectory with its `/run` answer; then what NeMo Gym's collection adds: the
        calls as its model server records them, joined in, `ng_trajectory` projected, `ng_perf`."""
        assert rollout.trace is not None
        trace, records = rollout.trace
        rollout.trace = None  # (the trajectory is the collection's projection, not the loop's own)
        records = as_recorded(records, rollout.row[REQUEST_KEY])
        answer = json.loads(text)
        if rollout.agent in self.session_protocol:
            answer[OBSERVATIONS_KEY] = session_observations(trace, records, model_ref)
        else:
            row = {**rollout.row, **answer}
            answer[TRAJECTORY_KEY] = agent_trajectory(trace, records, row, rollout_id_of(row), model_ref)
        with_evidence(answer, rollout, records, self.capture, (time.time() - trace.started_at) * 1000)
        return json.dumps(answer, ensure_ascii=False)

    async def _agent_code(self, code: AgentCode, client: ResourcesClient, rollout: Rollout) -> tuple[float, str]:
        """A rollout run by its NeMo Gym agent's own code (its `/run`), in a session of `client`."""
        routes = SessionRoutes(client.session_stream())
        records: list[dict[str, Any]] = []
        started = time.perf_counter()
        try:
            with captured(rollout, self.capture, into=records):
                reward, text = await code.run(rollout.row, routes, self.target, observed=self.capture is not None)
        finally:
            if routes.session:
                await _close_quietly(routes.calls, routes.session)
        answer = json.loads(text)
        if isinstance(answer, dict) and with_evidence(answer, rollout, records, self.capture, (time.perf_counter() - started) * 1000):
            text = json.dumps(answer, ensure_ascii=False)
        self._generated(answer.get("response") if isinstance(answer, Mapping) else None)
        return reward, text

    def _calls_once(self, rollout: Rollout) -> bool:
        return self.agent_type is not None and self.agent_type(rollout.agent) in ONE_CALL_AGENTS

    async def _one_call(self, client: ResourcesClient, rollout: Rollout) -> tuple[float, str]:
        """A rollout of a one-call agent (ONE_CALL_AGENTS): its policy answer verified, in a
        session when the agent seeds one (SEEDING_AGENTS). Observed, its call is recorded as NeMo
        Gym's model server records it, and the trajectory projected from that call alone (these
        agents give none of their own)."""
        calls, kind, model_ref = client.session_stream(), self.agent_type(rollout.agent) if self.agent_type else None, self._model_ref(rollout)
        trace = self.capture.trace() if self.capture is not None and model_ref is None else None
        records: list[dict[str, Any]] = []
        started = time.perf_counter()
        session = await calls.seed_session(rollout.row) if kind in SEEDING_AGENTS else ""
        try:
            with captured(rollout, self.capture, trace, into=records), labelled(model_ref, None) if model_ref is not None else nullcontext():
                episode = await run_episode(self.target, rollout.row[REQUEST_KEY], None, trace=trace)
            self._generated(episode.response)
            body = {**rollout.row, "response": episode.response}
            verified = await calls.verify_text(body, session_id=session)
            session = ""  # verify ended it
        finally:
            if session:
                await _close_quietly(calls, session)
        rollout.row, rollout.raw = body, None
        if model_ref is None:
            return verified
        answer = json.loads(verified[1])
        records = as_recorded(records, body[REQUEST_KEY], relayed=kind == "tool_simulation_agent")
        with_evidence(answer, rollout, records, self.capture, (time.perf_counter() - started) * 1000)
        return verified[0], json.dumps(answer, ensure_ascii=False)

    def _max_steps(self, rollout: Rollout) -> int | None:
        """`--max-steps`, else the bound the server's config gives the rollout's agent."""
        if self.max_steps is not None or self.agent_max_steps is None:
            return self.max_steps
        return self.agent_max_steps(rollout.agent)

    async def _step_episode(self, client: ResourcesClient, rollout: Rollout) -> tuple[float, str]:
        """An episode of an environment that answers each turn (_step_loop.py): reset, a step
        per turn; the row is NeMo Gym's run response (no verify: the reward is the steps')."""
        calls = client.session_stream()
        trace = self.capture.trace() if self.capture is not None else None
        session, reset = await calls.reset_session(rollout.row)
        try:

            async def step(response: dict[str, Any]) -> Mapping[str, Any]:
                nonlocal session
                answer = await calls.step(session, response)
                if answer.get("terminated") or answer.get("truncated"):
                    session = ""  # the step ended it
                return answer

            limit = self._max_steps(rollout)
            with captured(rollout, self.capture, trace):
                episode = await run_step_episode(self.target, rollout.row[REQUEST_KEY], reset, step, max_steps=limit, trace=trace)
            self._generated(episode.row["response"])
            self.at_max_steps += not episode.row["terminated"] and episode.steps == (limit or DEFAULT_MAX_STEPS)
            return episode.reward, json.dumps(episode.row, ensure_ascii=False)
        finally:
            if session:
                await _close_quietly(calls, session)

    async def _verify_only(self, client: ResourcesClient, rollout: Rollout) -> tuple[float, str]:
        return await client.verify_text(rollout.row)

    def _write(self, rollout: Rollout, reward: float, response_json: str, kind: str | None, message: str) -> None:
        verified = VerifiedBatch([rollout.task], [rollout.rollout], [reward], [response_json], [kind], [message])
        self.record([(rollout, b"")], verified)

    def _generated(self, response: Any) -> None:
        """A policy answer counted in the progress line (its output tokens, where it says them)."""
        usage = response.get("usage") if isinstance(response, Mapping) else None
        self.progress.generated(usage.get("output_tokens") if isinstance(usage, Mapping) else None)

    def _failed(self, rollout: Rollout, message: str) -> None:
        self.progress.generated(None, failed=True)
        self.on_failed(rollout, message)


class EpisodeFailed(Exception):
    """An episode of NeMo Gym's session protocol that failed at `stage` (module docstring)."""

    def __init__(self, stage: str, cause: Exception, response: Any) -> None:
        super().__init__(str(cause))
        self.stage, self.response = stage, response
        self.terminal = isinstance(cause, InvalidInputError)  # refused (NeMo Gym's 4xx): a retry would be refused again
        self.message = cause.details if isinstance(cause, RemoteCallError) else str(cause)

    def row(self, agent: str) -> dict[str, Any]:
        return episode_failure_row(self.stage, self.message, self.terminal, agent, self.response)


async def _close_quietly(client: Any, session: str) -> None:
    try:
        await asyncio.wait_for(client.close_session(session), 5.0)
    except Exception:  # the episode failed already; its session expires on its own
        pass
