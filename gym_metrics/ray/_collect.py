"""`collect --ray [ADDRESS]`: the shards of `collect --processes N` (collector/_processes.py) as
Ray tasks across a cluster, the output written where the driver runs.

The input goes to the object store once; each task writes it into a folder of its own on its
node, collects its shard there (the same command with `--shard I/N`, in the worker process;
after a `--resume`, from the rows and failures the driver already holds for it) and sends back its rows,
its failures and its counts. The driver writes them into the shards folder beside the output,
then merges and aggregates as `--processes` does, so the files are the same. A task whose
worker or node died is run again by Ray (its shard from the start, or from the rows the driver
held when it was sent); a stopped run keeps what its running shards collected (each hands its
rows to an inbox actor the driver makes as it stops them). The servers and the policy must be
reachable from every node.
"""

from __future__ import annotations

import collections
import contextlib
import io
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from gym_metrics.collector import Shard, ShardProgress, child_argv, close_shards, failures_path_for, open_shards, stats_path, task_lines_path
from gym_metrics.errors import GymMetricsError
from gym_metrics.ray._replicas import _ray

TASK_RETRIES = 3
"""Times Ray runs a shard's task again after its worker or node died."""
CANCEL_WAIT_S = 15.0
"""How long a stopped run waits for its cancelled shards to be gone."""


def _collect_shard(
    command: Callable[[list[str]], int], argv: list[str], given: bytes, held: tuple[bytes, bytes, bytes], index: int, count: int,
    run: str, input_name: str,
) -> tuple[bytes, bytes, bytes, bytes]:
    """In a Ray worker: shard `index` of `count` of run `run` collected in a folder of its own by
    `command` (the CLI's main), from the rows, failures and task lines (what its resume checks
    the input against) the driver `held` for it; (its rows, its failures, its stats as JSON,
    its task lines). The folder of an attempt whose worker died on this node is
    removed first (a killed worker removes nothing). A shard that fails raises with the last
    lines it printed, its input named `input_name` (the driver's) as it names its lines."""
    shard = Shard(index, count)
    prefix = f"gym-metrics-shard-{run}-{index}-"
    for left in Path(tempfile.gettempdir()).glob(prefix + "*"):
        shutil.rmtree(left, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        folder = Path(tmp)
        (folder / "input.jsonl").write_bytes(given)
        final = folder / "out.jsonl"
        out = shard.output(final)
        out.parent.mkdir()
        failures = failures_path_for(out)
        out.write_bytes(held[0])
        failures.write_bytes(held[1])
        task_lines_path(out).write_bytes(held[2])
        tail = _Tail(sys.stderr)
        try:
            with contextlib.redirect_stderr(tail):
                code = command([*child_argv(argv, shard, final), "--input", str(folder / "input.jsonl")])
        except KeyboardInterrupt:  # ray.cancel's, where the command did not catch it
            _hand_over(run, index, out)
            raise
        if _hand_over(run, index, out):  # the driver is stopping the run: it takes this shard's rows, not its answer
            raise KeyboardInterrupt
        if code != 0:
            errors = [line for line in tail.lines if line.startswith("error: ")]
            said = (errors[-1].removeprefix("error: ") if errors else " | ".join(tail.lines) or "it printed nothing").replace(str(folder / "input.jsonl"), input_name)
            failed = GymMetricsError(f"shard {index + 1} of {count} failed on its node (exit {code}): {said}")
            failed.exit_code = code if code in (2, 3, 4) else 1  # type: ignore[attr-defined]  # the shard's own verdict, as --processes gives it
            raise failed
        return out.read_bytes(), failures.read_bytes(), stats_path(out).read_bytes(), task_lines_path(out).read_bytes()


def _hand_over(run: str, index: int, out: Path) -> bool:
    """Once the driver stops the run (it makes an inbox, `_Inbox`, then cancels the shards:
    however the cancel ended the command, or before it came), this shard's rows, failures and
    task lines go to the inbox, so the run keeps what its running shards collected (--resume
    goes on from there); True then. False while the run goes on (no inbox)."""
    ray = _ray()
    try:
        inbox = ray.get_actor(_inbox_name(run))
    except ValueError:
        return False
    parts = (_read(out), _read(failures_path_for(out)), _read(task_lines_path(out)))
    with contextlib.suppress(Exception):  # (the driver stopped waiting: --resume runs the shard's rows again)
        ray.get(inbox.keep.remote(index, parts), timeout=CANCEL_WAIT_S / 3)
    return True


class _Inbox:
    """A Ray actor the driver makes as it stops a run: its cancelled shards leave their rows here."""

    def __init__(self) -> None:
        self.parts: dict[int, tuple[bytes, bytes, bytes]] = {}

    def keep(self, index: int, parts: tuple[bytes, bytes, bytes]) -> None:
        self.parts[index] = parts

    def taken(self) -> dict[int, tuple[bytes, bytes, bytes]]:
        return self.parts


def _inbox_name(run: str) -> str:
    return f"gym-metrics-inbox-{run}"


class _Tail(io.TextIOBase):
    """A text stream that passes what is written on to `to` and keeps its last lines."""

    def __init__(self, to: TextIO, keep: int = 5) -> None:
        self.to, self.lines, self._part = to, collections.deque[str](maxlen=keep), ""

    def write(self, text: str) -> int:
        self.to.write(text)
        *whole, self._part = (self._part + text).split("\n")
        self.lines.extend(line for line in whole if line.strip())
        return len(text)

    def flush(self) -> None:
        self.to.flush()


def collect_shards_on_ray(
    argv: Sequence[str], final: Path, count: int | None, total: int | None, *, resume: bool, default_agent: str | None,
    log: Callable[[str], None], input_path: Path, command: Callable[[list[str]], int], address: str | None = None,
    stop: threading.Event | None = None, watch: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Run the shards as Ray tasks (`count`: the cluster's CPUs when None), each running
    `command` (the CLI's main) on its shard's arguments; write what they send back into the
    shards folder, merge it into `final`; their stats (module docstring)."""
    ray = _ray()
    started = not ray.is_initialized()
    if started:
        _init(ray, address)
    try:
        count = count or max(1, int(ray.cluster_resources().get("CPU", 1)))
        lock = open_shards(final, count, resume=resume, default_agent=default_agent, log=log)
        try:
            shards = [Shard(i, count) for i in range(count)]
            progress = ShardProgress(total, [], watch)
            task = ray.remote(max_retries=TASK_RETRIES, retry_exceptions=False)(_collect_shard)
            given = ray.put(input_path.read_bytes())
            held = [(_read(s.output(final)), _read(failures_path_for(s.output(final))), _read(task_lines_path(s.output(final)))) for s in shards]
            run = uuid.uuid4().hex[:12]
            pending = {task.remote(command, list(argv), given, held[s.index], s.index, count, run, str(input_path)): s for s in shards}
            rows = sum(h[0].count(b"\n") for h in held)
            try:
                while pending:
                    if stop is not None and stop.is_set():  # interrupted: the tasks go, their shards' files stay
                        raise KeyboardInterrupt
                    done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                    for ref in done:
                        shard = pending.pop(ref)
                        try:
                            lines, failures, stats, task_lines = ray.get(ref)
                        except Exception as exc:
                            raise _failed(exc, shard, count) from None
                        _write_shard(shard.output(final), (lines, failures, task_lines), stats)
                        rows += lines.count(b"\n") - held[shard.index][0].count(b"\n")
                    progress.set_done(rows)  # (rows arrive a shard at a time)
            except BaseException:
                kept = _cancel(ray, {ref: shard.index for ref, shard in pending.items()}, run)  # a shard failed, or the run was stopped: the others stop too
                for index, parts in kept.items():  # what they collected, for --resume (no stats: not finished)
                    _write_shard(shards[index].output(final), parts)
                if kept:  # (a shard that had not begun, or was killed, hands in nothing)
                    rows_kept = sum(p[0].count(b"\n") for p in kept.values())
                    log(f"collect: {rows_kept:,} rows of the {len(pending)} stopped shard{'s' * (len(pending) > 1)} kept for --resume")
                raise
            progress.close()
            return close_shards(final, count, default_agent)
        finally:
            lock.close()
    finally:
        if started:
            ray.shutdown()


def _cancel(ray: Any, running: dict[Any, int], run: str) -> dict[int, tuple[bytes, bytes, bytes]]:
    """Stop the shards still running (`running`: task -> shard; on a cluster they would go on
    calling the policy after the run ended), and wait a bounded while for them to be gone: asked
    first (a KeyboardInterrupt in the task: it leaves its rows in an inbox made for them and
    removes its folder), then killed; the folders of killed ones on this node are removed here
    (a killed worker removes nothing). The rows the asked shards left, by shard."""
    refs = list(running)
    inbox = None
    if refs:
        with contextlib.suppress(Exception):  # (no inbox: the stopped shards' rows are collected again on --resume)
            inbox = ray.remote(num_cpus=0)(_Inbox).options(name=_inbox_name(run)).remote()
            ray.get(inbox.taken.remote(), timeout=CANCEL_WAIT_S / 3)  # it answers: the shards can find it
    for ref in refs:
        ray.cancel(ref, force=False)
    left = ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT_S / 3)[1] if refs else []
    for ref in left:
        ray.cancel(ref, force=True)
    if left:
        ray.wait(left, num_returns=len(left), timeout=CANCEL_WAIT_S)
    for folder in Path(tempfile.gettempdir()).glob(f"gym-metrics-shard-{run}-*"):
        shutil.rmtree(folder, ignore_errors=True)
    kept: dict[int, tuple[bytes, bytes, bytes]] = {}
    if inbox is not None:
        with contextlib.suppress(Exception):
            kept = {i: p for i, p in ray.get(inbox.taken.remote(), timeout=CANCEL_WAIT_S / 3).items() if i in running.values()}
        ray.kill(inbox)
    return kept


def _write_shard(out: Path, parts: tuple[bytes, bytes, bytes], stats: bytes | None = None) -> None:
    """A shard's rows, failures and task lines (and its stats once it finished) into the shards folder."""
    lines, failures, task_lines = parts
    out.write_bytes(lines)
    if failures:
        failures_path_for(out).write_bytes(failures)
    if stats is not None:
        stats_path(out).write_bytes(stats)
    task_lines_path(out).write_bytes(task_lines)


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _init(ray: Any, address: str | None) -> None:
    """ray.init; a local start that times out (a loaded machine) is tried again, three times in all."""
    for attempt in (1, 2, 3):
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="warning")
            return
        except Exception as exc:  # "Timed out waiting for file ...", "The current node timed out during startup"
            ray.shutdown()
            if attempt == 3 or address or "timed out" not in str(exc).lower():
                raise


def _failed(exc: BaseException, shard: Shard, count: int) -> GymMetricsError:
    """The error a shard's task ended with: the shard's own (its exit code kept), or what Ray says."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, GymMetricsError):
        failed = GymMetricsError(f"{cause}; fix the cause and run again with --resume")
        failed.exit_code = getattr(cause, "exit_code", 1)  # type: ignore[attr-defined]
        return failed
    text = str(exc).strip().splitlines()
    return GymMetricsError(f"shard {shard.index + 1} of {count} failed on Ray: {text[-1] if text else type(exc).__name__}; run again with --resume")


__all__ = ["TASK_RETRIES", "collect_shards_on_ray"]
