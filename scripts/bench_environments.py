"""Several environments in one collect (`--server AGENT=HOST:PORT`) against what a user ran
before it: the mix split by agent and each part collected on its own, one after the other.

Two servers run for the whole benchmark: `serve math_exact` (fast verify) and `serve
scripts/bench_cpu_env.py:BurnServer` (each verify burns 200 us of CPU). The input mixes
--math-rollouts already-answered math_exact rollouts (agent `math`) with --burn-rollouts
rollouts of BurnServer (agent `burn`), interleaved. Each round runs, in turn:

- `mixed`: one `gym-metrics collect --server math=A --server burn=B --input mix.jsonl`;
- `split`: `collect --server A --input math.jsonl`, then `collect --server B --input burn.jsonl`
  (the two parts written by this script beforehand; merging their outputs not counted).

Wall time of each command as a whole (CLI start-up included), medians over --rounds; every run
is checked (all rollouts written, each agent's metrics present).

    .venv/bin/python scripts/bench_environments.py --math-rollouts 200000 --burn-rollouts 20000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_collect import Server, load, make_rows  # noqa: E402


def write(path: Path, rows: list[dict]) -> Path:
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path


def run(args: list[str], out: Path) -> float:
    for left in (out, out.with_name(out.stem + "_aggregate_metrics.json"), out.with_name(out.stem + "_failures.jsonl")):
        left.unlink(missing_ok=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "collect", *args, "--output", str(out)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)  # fmt: skip
    return time.perf_counter() - started


def check(out: Path, rollouts: int, agents: set[str]) -> None:
    with out.open("rb") as f:
        lines = sum(1 for _ in f)
    metrics = json.loads(out.with_name(out.stem + "_aggregate_metrics.json").read_text())
    assert lines == rollouts and {m["agent_ref"]["name"] for m in metrics} == agents, (out, lines, rollouts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--math-rollouts", type=int, default=200_000)
    parser.add_argument("--burn-rollouts", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        math = [{**row, "agent_ref": {"name": "math"}} for row in make_rows("math", ns.math_rollouts)]
        burn = [{**row, "agent_ref": {"name": "burn"}, "_ng_task_index": row["_ng_task_index"] + len(math) // 8 + 1}
                for row in make_rows("burn", ns.burn_rollouts)]  # fmt: skip
        step = max(1, len(math) // max(1, len(burn)))
        mix = [row for i, b in enumerate(burn) for row in (*math[i * step:(i + 1) * step], b)] + math[len(burn) * step:]
        write(folder / "mix.jsonl", mix)
        write(folder / "math.jsonl", math)
        write(folder / "burn.jsonl", burn)
        with Server("math_exact") as a, Server(f"{ROOT / 'scripts' / 'bench_cpu_env.py'}:BurnServer") as b:
            times: dict[str, list[float]] = {"mixed": [], "split": []}
            for _ in range(ns.rounds):
                out = folder / "mixed.jsonl"
                times["mixed"].append(run(["--server", f"math={a.found}", "--server", f"burn={b.found}", "--input", str(folder / "mix.jsonl")], out))
                check(out, len(mix), {"math", "burn"})
                split = run(["--server", a.found, "--input", str(folder / "math.jsonl")], folder / "m.jsonl")
                split += run(["--server", b.found, "--input", str(folder / "burn.jsonl")], folder / "b.jsonl")
                check(folder / "m.jsonl", len(math), {"math"})
                check(folder / "b.jsonl", len(burn), {"burn"})
                times["split"].append(split)
    mixed, split = statistics.median(times["mixed"]), statistics.median(times["split"])
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {load()}; {ns.math_rollouts:,} math_exact + {ns.burn_rollouts:,} burn rollouts, {ns.rounds} rounds")
    print("| run | wall s (median; min-max) | rollouts/s |")
    print("|---|---:|---:|")
    for name, median in (("mixed: one collect, --server math=A --server burn=B", mixed), ("split: two collects, one after the other", split)):
        values = times["mixed" if name.startswith("mixed") else "split"]
        print(f"| {name} | {median:.2f} ({min(values):.2f}-{max(values):.2f}) | {len(mix) / median:,.0f} |")
    print(f"split / mixed = {split / mixed:.2f}x")


if __name__ == "__main__":
    main()
