"""A trainer's rewards across restarts: a server SIGKILLed and restarted on its port mid-run
(the reward client waits and retries; every group gets its rewards, none lost), and a trainer
SIGKILLed mid-epoch (every reward it was told of is in its recorded rollouts, whole lines only,
and its next run appends after them)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "collector"))
from test_collector_faults import LISTENING, Procs, cli, free_port  # noqa: E402

from gym_metrics.integrations import RewardClient  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def serve(procs: Procs, port: int, log: Path) -> subprocess.Popen[bytes]:
    offset = log.stat().st_size if log.exists() else 0
    proc = procs.start(cli("serve", "math_exact", "--port", str(port)), log, log.parent)
    deadline = time.monotonic() + 20
    while not LISTENING.search(log.read_bytes()[offset:].decode(errors="replace")):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.02)
    return proc


def group(n: int) -> tuple[dict[str, object], list[str]]:
    return {"responses_create_params": {"input": f"What is {n}+{n}?"}, "expected_answer": str(2 * n)}, [str(2 * n), "no", f"Answer: {2 * n}"]


def test_a_server_restarted_mid_run_loses_no_reward(tmp_path: Path) -> None:
    procs, port = Procs(), free_port()
    try:
        server = serve(procs, port, tmp_path / "server.log")
        client = RewardClient(f"127.0.0.1:{port}", max_retries=12)
        answers: list[list[float]] = []
        errors: list[BaseException] = []

        def trainer() -> None:
            try:
                for n in range(60):
                    answers.append(client.score([group(n)])[0].rewards)
                    time.sleep(0.01)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        thread = threading.Thread(target=trainer)
        thread.start()
        while len(answers) < 10:
            time.sleep(0.01)
        server.send_signal(signal.SIGKILL)
        server.wait(10)
        time.sleep(0.5)  # calls fail meanwhile: the client waits and retries
        serve(procs, port, tmp_path / "server.log")
        thread.join(60)
        client.close()
    finally:
        procs.kill_all()
    assert not errors and answers == [[1.0, 0.0, 1.0]] * 60


TRAINER = """
import sys, time
from gym_metrics.integrations import RewardClient
client = RewardClient(sys.argv[1], record=sys.argv[2])
for n in range(int(sys.argv[3]), 10_000):
    row = {"responses_create_params": {"input": f"What is {n}+{n}?"}, "expected_answer": str(2 * n)}
    rewards = client.score([(row, [str(2 * n), "no"])], step=n)[0].rewards
    print(n, rewards, flush=True)
"""


def test_a_trainer_killed_mid_epoch_keeps_every_reward_it_was_told(tmp_path: Path) -> None:
    procs, port = Procs(), free_port()
    record, told = tmp_path / "train_rollouts.jsonl", tmp_path / "told.txt"
    try:
        serve(procs, port, tmp_path / "server.log")
        trainer = procs.start([sys.executable, "-c", TRAINER, f"127.0.0.1:{port}", str(record), "0"], told, tmp_path)
        while told.read_text().count("\n") < 30:
            assert trainer.poll() is None, told.read_text()
            time.sleep(0.01)
        trainer.send_signal(signal.SIGKILL)
        trainer.wait(10)
        said = [int(line.split()[0]) for line in told.read_text().splitlines() if line[:1].isdigit()]
        RewardClient(f"127.0.0.1:{port}", record=record).close()  # a restarted trainer: its file is made whole
        rows = [json.loads(line) for line in record.read_bytes().splitlines()]
    finally:
        procs.kill_all()
    recorded = {int(r["agent_ref"]["name"].removeprefix("step_")) for r in rows}
    assert set(said) <= recorded  # every reward the trainer was told of is recorded
    assert all(len([r for r in rows if r["agent_ref"]["name"] == f"step_{n}"]) == 2 for n in said)
    assert record.read_bytes().endswith(b"\n")


def test_a_restarted_trainers_rows_never_repeat_a_key(tmp_path: Path) -> None:
    """Rows recorded by a trainer and by its restart aggregate without a repeated key."""
    from gym_metrics.aggregate import aggregate_file
    from gym_metrics.testing import serve_environment
    import asyncio

    record = tmp_path / "train.jsonl"

    async def run() -> None:
        async with serve_environment("math_exact") as server:
            for _ in range(2):  # the trainer, then its restart, both at step 0
                client = RewardClient(server.address, record=record)
                await client.score_async([group(1), group(2)], step=0)
                client.close()

    asyncio.run(run())
    metrics, _, _ = aggregate_file(record, tmp_path / "train_aggregate_metrics.json")
    [step] = json.loads(metrics.read_text())
    assert step["agent_ref"]["name"] == "step_0" and step["agent_metrics"]["mean/reward"] == pytest.approx(2 / 3)
