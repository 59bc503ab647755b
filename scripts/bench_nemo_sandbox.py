"""NeMo Gym's sandbox API with its `local` provider: gym-metrics' port (each sandbox a program kept
in gym-metrics' isolated sandbox) beside NeMo Gym 0.7.0's own (commands run on the host,
unconfined), in turn, the same work: `--sandboxes` sandboxes, `--at-once` of them at a time,
each started with a file (litmus_agent's way: its code driver at /tmp), then `--execs` commands
of each kind one after another (`true`; `python3 <that file>`), then stopped. Prints the
medians of a start, an exec of each kind and a stop, and the wall time (BENCHMARKS.md, "NeMo
Gym's sandbox API").

    .venv/bin/python scripts/bench_nemo_sandbox.py --nemo-python /tmp/ngvenv/bin/python --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PATH = "/usr/local/bin:/usr/bin:/bin"
"""Both sides' PATH: the same `python3` (a pyenv shim first on PATH would cost NeMo Gym's host
commands a shell script each; the sandbox does not see it)."""
DRIVER = "import json, sys\nprint(json.dumps({'ok': sum(range(1000))}))\n"


async def _work(module: Any, sandboxes: int, at_once: int, execs: int) -> dict[str, Any]:
    """The timings of one side (`module`: nemo_gym.sandbox or gym_metrics.nemo_gym.sandbox)."""
    times: dict[str, list[float]] = {"start": [], "true": [], "python3": [], "stop": []}
    slots = asyncio.Semaphore(at_once)

    async def one(index: int) -> None:
        async with slots:
            begun = time.perf_counter()
            box = await module.AsyncSandbox({"local": {}}, module.SandboxSpec(files={f"/tmp/gm_bench_{index}.py": DRIVER})).start()
            times["start"].append(time.perf_counter() - begun)
            try:
                for kind, command in (("true", "true"), ("python3", f"python3 /tmp/gm_bench_{index}.py")):
                    for _ in range(execs):
                        begun = time.perf_counter()
                        result = await box.exec(command, timeout_s=60)
                        assert result.return_code == 0, result
                        times[kind].append(time.perf_counter() - begun)
            finally:
                begun = time.perf_counter()
                await box.stop()
                times["stop"].append(time.perf_counter() - begun)

    begun = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(sandboxes)))
    wall = time.perf_counter() - begun
    return {"wall_s": wall, **{k: 1000 * statistics.median(v) for k, v in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo-python", required=True, help="the Python of a venv with nemo-gym 0.7.0")
    parser.add_argument("--sandboxes", type=int, default=40)
    parser.add_argument("--at-once", type=int, default=8)
    parser.add_argument("--execs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--_side", choices=("ours", "nemo"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._side:
        import importlib

        module = importlib.import_module("nemo_gym.sandbox" if args._side == "nemo" else "gym_metrics.nemo_gym.sandbox")
        print(json.dumps(asyncio.run(_work(module, args.sandboxes, args.at_once, args.execs))))
        return
    rows: dict[str, list[dict[str, Any]]] = {"ours": [], "nemo": []}
    for _ in range(args.rounds):
        for side, python in (("ours", sys.executable), ("nemo", args.nemo_python)):
            command = [python, __file__, "--nemo-python", args.nemo_python, "--sandboxes", str(args.sandboxes), "--at-once",
                       str(args.at_once), "--execs", str(args.execs), "--_side", side]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=Path(__file__).parents[1],
                                  env={**os.environ, "PATH": PATH})  # fmt: skip
            if done.returncode:
                raise SystemExit(f"{side}: {done.stderr[-2000:]}")
            rows[side].append(json.loads(done.stdout.splitlines()[-1]))
    print(f"{args.sandboxes} sandboxes, {args.at_once} at once, {args.execs} execs of each kind; medians of {args.rounds} rounds")
    print("| side | wall s | start ms | exec `true` ms | exec `python3 file` ms | stop ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for side, name in (("ours", "gym-metrics (isolated)"), ("nemo", "NeMo Gym 0.7.0 (host, unconfined)")):
        med = {k: statistics.median(r[k] for r in rows[side]) for k in rows[side][0]}
        print(f"| {name} | {med['wall_s']:.2f} | {med['start']:.1f} | {med['true']:.1f} | {med['python3']:.1f} | {med['stop']:.1f} |")


if __name__ == "__main__":
    main()
