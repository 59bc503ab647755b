"""Benchmark `evaluate` on tool-call rows; prints a Markdown table (and writes it with --out).

Usage: python scripts/bench_evaluate.py [--rows 100000] [--runs 5] [--no-cli] [--no-server] [--out FILE]

(a) in-process: evaluate(metric, rows) over rows already in memory, for tool_call_accuracy
    (strict and unordered) and tool_calling; best of --runs.
(b) the CLI end to end: `gym-metrics evaluate --metric tool_call_accuracy --input ROWS.jsonl`
    in a child process (interpreter start, reading and parsing the JSONL, scoring, writing the
    result JSON); best wall time of 3 runs.
(c) `gym-metrics evaluate --server` against `gym-metrics serve tool_calling` in another process
    (one run).

The rows (seeded) mix 1-4 calls over 1-3 turns with string, number, boolean, list and nested
arguments; about 30% are reordered, 20% have a wrong value, 10% a missing or extra call and
1% are rows RAGAS rejects (arguments given as a JSON string).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_collect import Server  # noqa: E402

from gym_metrics.evaluation import evaluate  # noqa: E402

TOOLS = ["get_weather", "search", "book_flight", "send_email", "lookup"]


def make_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Rows in both formats (RAGAS user_input / reference_tool_calls and OpenAI response /
    expected_tool_calls), so every metric scores the same rows."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        calls = [(rng.choice(TOOLS), _args(rng)) for _ in range(rng.randint(1, 4))]
        predicted = [(name, dict(args)) for name, args in calls]
        roll = rng.random()
        if roll < 0.3:
            rng.shuffle(predicted)
        elif roll < 0.5:
            name, args = predicted[0]
            args[next(iter(args))] = "wrong"
        elif roll < 0.6:
            predicted = (
                predicted[:-1] if len(predicted) > 1 and rng.random() < 0.5 else predicted + [("search", {"q": "x"})]
            )
        turns = _split(predicted, rng)
        messages: list[dict[str, Any]] = [{"content": f"task {i}", "type": "human"}]
        for turn in turns:
            messages.append({"content": "", "type": "ai", "tool_calls": [{"name": nm, "args": a} for nm, a in turn]})
            messages.extend({"content": "ok", "type": "tool"} for _ in turn)
        messages.append({"content": "done", "type": "ai"})
        if rng.random() < 0.01:  # rejected by RAGAS: arguments as a JSON string
            messages[1]["tool_calls"][0]["args"] = json.dumps(messages[1]["tool_calls"][0]["args"])
        rows.append(
            {
                "user_input": messages,
                "reference_tool_calls": [{"name": nm, "args": a} for nm, a in calls],
                "response": {
                    "choices": [
                        {
                            "message": {
                                "role": "assistant",
                                "tool_calls": [
                                    {
                                        "id": f"call_{k}",
                                        "type": "function",
                                        "function": {"name": nm, "arguments": json.dumps(a)},
                                    }
                                    for k, (nm, a) in enumerate(predicted)
                                ],
                            }
                        }
                    ]
                },
                "expected_tool_calls": [
                    {"type": "function", "function": {"name": nm, "arguments": a}} for nm, a in calls
                ],
            }
        )
    return rows


def _args(rng: random.Random) -> dict[str, Any]:
    pool: list[tuple[str, Any]] = [
        ("city", rng.choice(["Paris", "Tokyo", "Lima"])),
        ("days", rng.randint(1, 9)),
        ("price", round(rng.random() * 100, 2)),
        ("flexible", rng.random() < 0.5),
        ("tags", ["a", "b"][: rng.randint(0, 2)]),
        ("filters", {"max": rng.randint(1, 5), "sort": "asc"}),
    ]
    return dict(rng.sample(pool, rng.randint(1, 4)))


def _split(calls: list[Any], rng: random.Random) -> list[list[Any]]:
    turns = rng.randint(1, min(3, len(calls)))
    cuts = sorted(rng.sample(range(1, len(calls)), turns - 1)) if turns > 1 else []
    bounds = [0, *cuts, len(calls)]
    return [calls[a:b] for a, b in zip(bounds, bounds[1:])]


def bench_in_process(rows: list[dict[str, Any]], runs: int) -> list[tuple[str, float, float]]:
    out = []
    for label, metric, config in [
        ("tool_call_accuracy", "tool_call_accuracy", None),
        ("tool_call_accuracy (strict_order=false)", "tool_call_accuracy", {"strict_order": False}),
        ("tool_calling", "tool_calling", None),
    ]:
        best = float("inf")
        for _ in range(runs):
            started = time.perf_counter()
            result = evaluate(metric, rows, config=config)
            best = min(best, time.perf_counter() - started)
        mean = result.stats[-1].mean
        out.append((label, best, float("nan") if mean is None else mean))
    return out


def bench_cli(path: Path, extra: list[str], runs: int) -> float:
    """Best wall time of `runs` runs of the CLI in a fresh process."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gym_metrics.cli",
                "evaluate",
                "--input",
                str(path),
                "-o",
                str(path.with_suffix(".out.json")),
                *extra,
            ],
            check=True,
            capture_output=True,
        )
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-cli", action="store_true")
    parser.add_argument("--no-server", action="store_true")
    parser.add_argument("--out", type=Path, help="also write the table here")
    ns = parser.parse_args()

    rows = make_rows(ns.rows)
    lines = [
        f"{ns.rows:,} tool-call rows; {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "",
        "| what | seconds | rows/s | mean score |",
        "|---|---:|---:|---:|",
    ]
    for label, seconds, mean in bench_in_process(rows, ns.runs):
        lines.append(
            f"| in-process `evaluate`, {label} (best of {ns.runs}) | {seconds:.2f} | {ns.rows / seconds:,.0f} | {mean:.4f} |"
        )
    if not (ns.no_cli and ns.no_server):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "rows.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            size = path.stat().st_size / 1e6
            if not ns.no_cli:
                seconds = bench_cli(path, ["--metric", "tool_call_accuracy"], 3)
                what = f"CLI end to end, `--metric tool_call_accuracy` ({size:.0f} MB JSONL, best of 3)"
                lines.append(f"| {what} | {seconds:.2f} | {ns.rows / seconds:,.0f} | |")
            if not ns.no_server:
                server = Server("tool_calling")
                try:
                    seconds = bench_cli(path, ["--server", server.address], 1)
                finally:
                    server.stop()
                what = "CLI end to end, `--server` (tool_calling in another process)"
                lines.append(f"| {what} | {seconds:.2f} | {ns.rows / seconds:,.0f} | |")
    text = "\n".join(lines)
    print(text)
    if ns.out:
        ns.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
