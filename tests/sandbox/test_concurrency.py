"""2,000 sandboxed verifies at once through a real gRPC server: no silent zero. Each program's
reward, run alone first, is what every one of its concurrent runs gets; programs that start a
subprocess (the fragile case of a verify that forks) and threads are among them."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.sandbox import Pool
from gym_metrics.testing import serve_environment
from gym_metrics_servers.code_tests import CodeTestsServer

sys.path.insert(0, str(Path(__file__).parents[1]))

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow, pytest.mark.usefixtures("sandbox")]
CONCURRENT = 2_000

PROGRAMS = {
    "right": "a, b = map(int, input().split())\nprint(a + b)",
    "wrong": "a, b = map(int, input().split())\nprint(a - b)",
    "subprocess": (
        "import subprocess, sys\na, b = map(int, input().split())\n"  # -I -S: the child skips site (half the CPU of a fork + exec)
        "print(subprocess.run([sys.executable, '-I', '-S', '-c', f'print({a} + {b})'], capture_output=True, text=True).stdout.strip())"
    ),
    "threads": (
        "import threading\na, b = map(int, input().split())\nout = []\n"
        "t = threading.Thread(target=lambda: out.append(a + b))\nt.start()\nt.join()\nprint(out[0])"
    ),
    "crash": "raise SystemExit(3)",
    # killed at its time limit, while the others run: none of them may be hit (0.05 s: as many
    # kills, 4x fewer seconds holding one of the pool's places)
    "sleeper": "import time\ntime.sleep(30)",
}


def body(name: str, i: int) -> dict[str, Any]:
    code = PROGRAMS[name]
    text = f"```python\n{code}\n```"
    return {
        "response": {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]},
        "tests": [{"input": f"{i} {i + 1}\n", "output": str(2 * i + 1)}], "time_limit_s": 0.05 if name == "sleeper" else 30,
    }  # fmt: skip


async def test_two_thousand_at_once_score_as_each_alone() -> None:
    async with serve_environment(CodeTestsServer(Pool(queue_timeout_s=240))) as server, ResourcesClient(server.address) as client:
        alone = {name: (await client.verify(body(name, 7)))["reward"] for name in PROGRAMS}
        assert alone == {"right": 1.0, "wrong": 0.0, "subprocess": 1.0, "threads": 1.0, "crash": 0.0, "sleeper": 0.0}
        names = [list(PROGRAMS)[i % len(PROGRAMS)] for i in range(CONCURRENT)]
        started = time.monotonic()
        results = await asyncio.gather(*(client.verify(body(name, i)) for i, name in enumerate(names)))
        elapsed = time.monotonic() - started
    wrong = [(i, name, r["reward"], r["test_results"]) for i, (name, r) in enumerate(zip(names, results)) if r["reward"] != alone[name]]
    assert wrong == [], f"{len(wrong)} of {CONCURRENT} differ from the program run alone, e.g. {wrong[:3]}"
    statuses = {name: {r["test_results"][0]["status"] for n, r in zip(names, results) if n == name} for name in PROGRAMS}
    assert statuses == {"right": {"ok"}, "wrong": {"wrong_answer"}, "subprocess": {"ok"}, "threads": {"ok"}, "crash": {"error"},
                        "sleeper": {"timeout"}}  # fmt: skip
    print(f"{CONCURRENT} sandboxed verifies at once in {elapsed:.1f} s ({CONCURRENT / elapsed:.0f}/s)")
