"""`collect --ray` (issue 42 item 2) on a local Ray instance (2 CPUs): the shards of `--processes`
as Ray tasks, each running the command on its node, the output written by the driver: the
metrics file byte for byte one process's and its lines in key order; a task whose worker is
SIGKILLed mid-shard is run again by Ray with the same result. The server (math_exact) and the
scripted policy run in this process, on loopback, as a cluster's nodes would reach them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import pytest

from gym_metrics.cli import main
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment
from gym_metrics_servers.math_exact.app import MathExactServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
TASKS, REPEATS = 24, 3


def answer(prompt: str) -> PolicyAnswer:
    task = int(prompt.split()[1].rstrip(","))
    return PolicyAnswer(text=f"So the answer is $\\boxed{{{2 * task + (task % 3 == 0)}}}$.", output_tokens=5 + task % 4)


def tasks(path: Path) -> Path:
    rows = [{"agent_ref": {"name": "policy"}, "responses_create_params": {"input": [{"role": "user", "content": f"Task {t}, what is {t} + {t}?"}]},
             "expected_answer": str(2 * t)} for t in range(TASKS)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def in_key_order(out: Path) -> list[bytes]:
    def key(line: bytes) -> tuple[int, int]:
        row = json.loads(line)
        return row["_ng_task_index"], row["_ng_rollout_index"]

    return sorted(out.read_bytes().splitlines(keepends=True), key=key)


def shard_workers() -> list[int]:
    """Ray workers running a shard's task (Ray titles them `ray::_collect_shard`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(b"ray::_collect_shard"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def run(server: str, policy: ScriptedPolicyServer, src: Path, out: Path, *extra: str) -> int:
    args = ["collect", "--server", server, "--input", str(src), "--output", str(out), "--num-repeats", str(REPEATS),
            "--policy-url", policy.url, "--policy-model", "scripted", "--policy-concurrency", "4", *extra]  # fmt: skip
    return await asyncio.to_thread(main, args)


async def test_shards_as_ray_tasks_give_one_processs_files(ray_cluster: ModuleType, tmp_path: Path) -> None:
    src = tasks(tmp_path / "tasks.jsonl")
    async with serve_environment(MathExactServer) as server:
        with ScriptedPolicyServer(answer) as policy:
            assert await run(server.address, policy, src, tmp_path / "one.jsonl") == 0
            assert await run(server.address, policy, src, tmp_path / "ray.jsonl", "--ray", "--processes", "3") == 0
            assert sum(policy.calls.values()) == 2 * TASKS * REPEATS  # each rollout once per run
            # default: one shard per cluster CPU (2)
            assert await run(server.address, policy, src, tmp_path / "ray2.jsonl", "--ray") == 0
    for name in ("ray", "ray2"):
        out = tmp_path / f"{name}.jsonl"
        assert (tmp_path / f"{name}_aggregate_metrics.json").read_bytes() == (tmp_path / "one_aggregate_metrics.json").read_bytes()
        assert out.read_bytes().splitlines(keepends=True) == in_key_order(tmp_path / "one.jsonl")
        assert not (tmp_path / f".{name}.jsonl.shards").exists()


def shard_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("gym-metrics-shard-*"))


async def test_a_shard_whose_worker_dies_is_run_again(ray_cluster: ModuleType, tmp_path: Path) -> None:
    src = tasks(tmp_path / "tasks.jsonl")
    before = shard_folders()
    async with serve_environment(MathExactServer) as server:
        with ScriptedPolicyServer(answer) as policy:
            assert await run(server.address, policy, src, tmp_path / "one.jsonl") == 0
        with ScriptedPolicyServer(answer, delay_s=0.1) as slow:
            collecting = asyncio.ensure_future(run(server.address, slow, src, tmp_path / "ray.jsonl", "--ray", "--processes", "2"))
            deadline = time.monotonic() + 120
            while not (workers := shard_workers()) or sum(slow.calls.values()) < 6:
                assert time.monotonic() < deadline and not collecting.done()
                await asyncio.sleep(0.05)
            os.kill(workers[0], signal.SIGKILL)
            assert await collecting == 0
            assert sum(slow.calls.values()) > TASKS * REPEATS  # the killed shard asked again
        # the lines its tasks were made from came back from the nodes: a resume from a moved input is refused
        ray_out = tmp_path / "ray.jsonl"
        assert (tmp_path / ".ray.jsonl.tasks").read_bytes() == (tmp_path / ".one.jsonl.tasks").read_bytes() != b""
        cut, kept = tmp_path / "cut.jsonl", ray_out.read_bytes().splitlines(keepends=True)
        cut.write_bytes(b"".join(kept[:5]))
        (tmp_path / ".cut.jsonl.tasks").write_bytes((tmp_path / ".ray.jsonl.tasks").read_bytes())
        moved = tmp_path / "moved.jsonl"
        moved.write_bytes(src.read_bytes().splitlines(keepends=True)[-1] + src.read_bytes())
        with ScriptedPolicyServer(answer) as policy:
            assert await run(server.address, policy, moved, cut, "--ray", "--processes", "2", "--resume") == 2
    assert shard_folders() == before  # the killed attempt's folder went with its retry
    assert (tmp_path / "ray_aggregate_metrics.json").read_bytes() == (tmp_path / "one_aggregate_metrics.json").read_bytes()
    assert (tmp_path / "ray.jsonl").read_bytes().splitlines(keepends=True) == in_key_order(tmp_path / "one.jsonl")


async def test_a_shards_bad_line_is_named_and_a_left_sidecar_is_done(ray_cluster: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A shard stopped by a bad input line said only its exit code; the failures sidecar a run
    left was not sent to the shards (its rollouts were attempted again, though terminal)."""
    src = tasks(tmp_path / "tasks.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(src.read_bytes() + b"{not json\n")
    async with serve_environment(MathExactServer) as server:
        with ScriptedPolicyServer(answer) as policy:
            assert await run(server.address, policy, bad, tmp_path / "bad_out.jsonl", "--ray", "--processes", "2") == 2
            asked = sum(policy.calls.values())
            await asyncio.sleep(2)
            assert sum(policy.calls.values()) == asked  # the other shard was stopped with the run (it went on calling the policy)
            said = capsys.readouterr().err
            assert f"failed on its node (exit 2): {bad}: bad input line" in said and f"line {TASKS + 1}: json: not valid JSON" in said and str(tempfile.gettempdir()) + "/gym-metrics-shard" not in said, said

            assert await run(server.address, policy, src, tmp_path / "one.jsonl") == 0
            out = tmp_path / "out.jsonl"
            lines = (tmp_path / "one.jsonl").read_bytes().splitlines(keepends=True)
            failed = [json.dumps({**json.loads(line), "_ng_failure_terminal": True}).encode() + b"\n" for line in lines[2::7]]  # never to run again
            out.write_bytes(b"".join(line for line in lines if line not in lines[2::7]))
            out.with_name("out_failures.jsonl").write_bytes(b"".join(failed))
            policy.calls.clear()
            assert await run(server.address, policy, src, out, "--ray", "--processes", "2", "--resume") == 0
            assert sum(policy.calls.values()) == 0
    assert out.read_bytes().splitlines(keepends=True) == [line for line in in_key_order(tmp_path / "one.jsonl") if line not in lines[2::7]]
    assert sorted(out.with_name("out_failures.jsonl").read_bytes().splitlines(keepends=True)) == sorted(failed)


async def test_a_stopped_run_keeps_what_its_running_shards_collected(ray_cluster: ModuleType, tmp_path: Path) -> None:
    """Ctrl-C cancelled the running shards' tasks, and the rows they had collected went with them
    (they lived on their nodes): --resume asked the policy for them again. A cancelled shard now
    hands its rows to the driver as it stops; --resume asks only for the rest."""
    src, out = tasks(tmp_path / "tasks.jsonl"), tmp_path / "ray.jsonl"
    address = ray_cluster.get_runtime_context().gcs_address
    async with serve_environment(MathExactServer) as server:
        with ScriptedPolicyServer(answer) as policy:
            assert await run(server.address, policy, src, tmp_path / "one.jsonl") == 0
        with ScriptedPolicyServer(answer, delay_s=0.3) as slow:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gym_metrics.cli", "collect", "--server", server.address, "--input", str(src), "--output", str(out),
                "--num-repeats", str(REPEATS), "--policy-url", slow.url, "--policy-model", "scripted", "--policy-concurrency", "4",
                "--ray", address, "--processes", "2", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )  # fmt: skip
            deadline = time.monotonic() + 120
            while sum(slow.calls.values()) < 24:
                assert time.monotonic() < deadline and proc.returncode is None
                await asyncio.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            _, said = await asyncio.wait_for(proc.communicate(), 90)
        assert proc.returncode == 130, said.decode()
        kept = sum(p.read_bytes().count(b"\n") for p in (tmp_path / ".ray.jsonl.shards").glob("*-of-2.jsonl"))
        assert kept >= 12 and f"collect: {kept:,} rows of the 2 stopped shards kept for --resume" in said.decode(), said.decode()
        with ScriptedPolicyServer(answer) as policy:
            assert await run(server.address, policy, src, out, "--ray", "--processes", "2", "--resume") == 0
            assert sum(policy.calls.values()) == TASKS * REPEATS - kept  # the kept rows were not asked for again
    assert (tmp_path / "ray_aggregate_metrics.json").read_bytes() == (tmp_path / "one_aggregate_metrics.json").read_bytes()
    assert out.read_bytes().splitlines(keepends=True) == in_key_order(tmp_path / "one.jsonl")
