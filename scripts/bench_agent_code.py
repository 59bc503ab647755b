"""Throughput of a NeMo Gym agent run by its ported code (docs/nemo-gym.md#agents): the test
tree's benchmarks/demo_agent (two policy turns through the agent's own /v1/responses, then
verify) over N rows, against the same rows run by collect's own simple_agent loop
(benchmarks/demo_eval's agent: one turn), each `collect --benchmark` in a process of its own,
the environment served for the run, the scripted policy answering from this process; and the
ported agent observed (`--trajectory`: it reports an observation bundle, which is joined to its
captured calls and projected into `ng_trajectory` and `ng_perf`, as NeMo Gym's collection does).

    .venv/bin/python scripts/bench_agent_code.py --rows 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gym_metrics.nemo_gym.port import port_folder
from gym_metrics.testing import ScriptedPolicyServer

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "tests" / "data" / "nemo_gym_configs" / "tree"
QUESTIONS = [("What is 2+2?", "4"), ("Name a primary colour.", "red"), ("Capital of France?", "Paris")]


def answer(prompt: str) -> str:
    if prompt.startswith("You said: "):
        return prompt.removeprefix("You said: ").split(".")[0]
    return {"What is 2+2?": "4", "Name a primary colour.": "blue", "Capital of France?": "Paris"}.get(prompt.split("\n")[0], "?")


def tree_with_rows(work: Path, rows: int) -> Path:
    shutil.copytree(TREE / "benchmarks", work / "benchmarks")
    port_folder(TREE / "resources_servers" / "demo_env", work / "resources_servers" / "demo_env")
    port_folder(TREE / "responses_api_agents" / "demo_two_turn_agent", work / "responses_api_agents" / "demo_two_turn_agent")
    lines = "".join(json.dumps({"question": q, "expected": e, "n": i}) + "\n" for i, (q, e) in
                    ((i, QUESTIONS[i % 3]) for i in range(rows)))  # fmt: skip
    for bench in ("demo_agent", "demo_eval"):
        data = work / "benchmarks" / bench / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / f"{bench}_benchmark.jsonl").write_text(lines)
    return work


RUNS = {"demo_agent": ("demo_agent", [], "ported agent code, 2 turns"),
        "demo_agent --trajectory": ("demo_agent", ["--trajectory"], "the same, observed: evidence joined and projected"),
        "demo_eval": ("demo_eval", [], "collect's simple_agent loop, 1 turn")}  # fmt: skip


def run(work: Path, bench: str, url: str, flags: list[str]) -> tuple[float, float]:
    out = work / f"out_{bench}.jsonl"
    for stale in work.glob(f"out_{bench}*"):
        stale.unlink()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    command = [str(Path(sys.executable).with_name("gym-metrics")), "collect", "--benchmark", f"benchmarks/{bench}/config.yaml", "--num-repeats", "1",
               "--output", str(out), "--policy-url", url, "--policy-model", "m", "--policy-api", "responses", "--policy-concurrency", "64", *flags]  # fmt: skip
    subprocess.run(command, cwd=work, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-agent-code-") as tmp, ScriptedPolicyServer(answer) as policy:
        work = tree_with_rows(Path(tmp), args.rows)
        results: dict[str, list[tuple[float, float]]] = {label: [] for label in RUNS}
        for _ in range(args.rounds):
            for label, (bench, flags, _) in RUNS.items():  # in turn, each round
                results[label].append(run(work, bench, policy.url, flags))
    for label, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"{label} ({RUNS[label][2]}): {args.rows} rows, wall {wall:.2f} s (median of {len(runs)}), {args.rows / wall:,.0f} rows/s, "
              f"CPU of collect and its served environment {1000 * cpu / args.rows:.2f} ms a row")  # fmt: skip


if __name__ == "__main__":
    main()
