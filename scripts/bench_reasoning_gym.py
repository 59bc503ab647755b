"""reasoning-gym through gym-metrics against reasoning-gym alone (BENCHMARKS.md, "reasoning-gym").

Scoring: rows already answered, scored through gRPC (`gym-metrics serve reasoning_gym` in one
process, `gym-metrics collect` in another: verify, write, aggregate with per-dataset metrics)
against the floor, reasoning-gym's own `extract_answer` and `score_answer` in a plain Python loop
over the same rows read from the same file. Generation: `gym-metrics dataset reasoning-gym` (rows
written) against `reasoning_gym.create_dataset` iterated in a loop (nothing written).

    python scripts/bench_reasoning_gym.py rows --rows 50000 --out /tmp/rg_rows.jsonl
    python scripts/bench_reasoning_gym.py floor --input /tmp/rg_rows.jsonl
    python scripts/bench_reasoning_gym.py grpc --input /tmp/rg_rows.jsonl
    python scripts/bench_reasoning_gym.py gen-floor basic_arithmetic --size 20000
    gym-metrics dataset reasoning-gym basic_arithmetic --size 20000 -o /tmp/rg_gen.jsonl

Each mode but `rows` times itself (the scoring or generation part, imports aside) and appends
its figures as one JSON line to --figures (default bench_reasoning_gym.jsonl); timing each
whole process, twice over paired runs, gives the ratios BENCHMARKS.md quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MIX = (
    ("leg_counting", 1), ("chain_sum", 1), ("basic_arithmetic", 1), ("spell_backward", 1), ("word_sorting", 1),
    ("letter_counting", 1), ("number_sorting", 1), ("gcd", 1), ("caesar_cipher", 1), ("propositional_logic", 1),
)  # fmt: skip
"""Ten common datasets, each scored its own way (exact text, numbers, lists, validity checks)."""
KINDS = ("right", "partly", "wrong", "no_tags")


def make_rows(ns: argparse.Namespace) -> None:
    """A mix of MIX as the dataset command writes it, each row answered (its kind in turn)."""
    from gym_metrics.ecosystems.reasoning_gym import MixPart, RowsRequest, write_rows
    from gym_metrics_servers.reasoning_gym.scripted import answer_text, response

    import orjson

    tasks = Path(ns.out).with_suffix(".tasks.jsonl")
    request = RowsRequest(ns.rows, ns.seed, parts=tuple(MixPart(name, weight) for name, weight in MIX))
    write_rows(request, tasks, workers=os.cpu_count() or 1)
    with open(ns.out, "wb") as out:
        for index, line in enumerate(tasks.read_bytes().splitlines()):
            row = orjson.loads(line)
            text = answer_text(row["entry"], KINDS[index % len(KINDS)])
            out.write(orjson.dumps({**row, "_ng_task_index": index, "response": response(text)}, option=orjson.OPT_APPEND_NEWLINE))  # (JSON read back: plain values)
    tasks.unlink()
    print(f"{ns.rows} answered rows -> {ns.out}")


def floor(ns: argparse.Namespace) -> None:
    """reasoning-gym alone: each row read, its dataset built once, its answer extracted and scored."""
    import reasoning_gym
    from reasoning_gym.utils import extract_answer

    started = time.perf_counter()
    datasets: dict[str, Any] = {}
    total, rows = 0.0, 0
    with open(ns.input, "rb") as f:
        for line in f:
            row = json.loads(line)
            ref = row["reasoning_gym"]
            key = json.dumps(ref["dataset"]) + json.dumps(ref["config"], sort_keys=True) + f"{ref['seed']}/{ref['size']}"
            dataset = datasets.get(key)
            if dataset is None:
                dataset = datasets[key] = reasoning_gym.create_dataset(ref["dataset"], seed=ref["seed"], size=ref["size"], **ref["config"])
            text = "".join(p["text"] for item in row["response"]["output"] for p in item["content"])
            try:
                total += dataset.score_answer(extract_answer(text), row["entry"])
            except Exception:
                pass  # scored 0.0, as reasoning-gym's evaluation scores it
            rows += 1
    seconds = time.perf_counter() - started
    _figures(ns, {"mode": "floor", "rows": rows, "seconds": seconds, "rows_per_s": rows / seconds, "mean_reward": total / rows})


def grpc(ns: argparse.Namespace) -> None:
    """`gym-metrics serve reasoning_gym` and `gym-metrics collect` of the rows, each a process."""
    exe = [sys.executable, "-m", "gym_metrics.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp, "serve.log")
        with log.open("wb") as err:
            server = subprocess.Popen([*exe, "serve", "reasoning_gym", "--host", "127.0.0.1", "--port", "0"], stderr=err, stdout=subprocess.DEVNULL)
        try:
            address = _listening(log, server)
            started = time.perf_counter()
            subprocess.run([*exe, "collect", "--server", address, "--input", ns.input, "--output", str(Path(tmp, "out.jsonl"))],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            seconds = time.perf_counter() - started
        finally:
            server.terminate()
            server.wait(30)
        metrics = json.loads(Path(tmp, "out_aggregate_metrics.json").read_text())
        agent = metrics[0]["agent_metrics"] if isinstance(metrics, list) else metrics["agent_metrics"]
        rows = sum(1 for _ in open(ns.input, "rb"))
    _figures(ns, {"mode": "grpc", "rows": rows, "seconds": seconds, "rows_per_s": rows / seconds, "mean_reward": agent["mean/reward"]})


def gen_floor(ns: argparse.Namespace) -> None:
    """reasoning-gym alone: create_dataset, every entry generated in a loop, nothing written."""
    import reasoning_gym

    started = time.perf_counter()
    dataset = reasoning_gym.create_dataset(ns.name, size=ns.size, seed=ns.seed)
    count = sum(1 for _ in dataset)
    seconds = time.perf_counter() - started
    _figures(ns, {"mode": "gen-floor", "dataset": ns.name, "rows": count, "seconds": seconds, "rows_per_s": count / seconds})


def _listening(log: Path, server: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"listening on (\S+)", log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if server.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit(f"the server did not start: {log.read_text(errors='replace')}")


def _figures(ns: argparse.Namespace, figures: dict[str, Any]) -> None:
    line = json.dumps({**figures, "python": sys.version.split()[0], "at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    with open(ns.figures, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--figures", default="bench_reasoning_gym.jsonl", help="where each run's figures are appended")
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("rows", help="write the answered rows")
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out", required=True)
    p.set_defaults(func=make_rows)
    for name, func in (("floor", floor), ("grpc", grpc)):
        p = sub.add_parser(name, help=func.__doc__)
        p.add_argument("--input", required=True)
        p.set_defaults(func=func)
    p = sub.add_parser("gen-floor", help=gen_floor.__doc__)
    p.add_argument("name")
    p.add_argument("--size", type=int, default=20_000)
    p.add_argument("--seed", type=int, default=42)
    p.set_defaults(func=gen_floor)
    ns = parser.parse_args()
    ns.func(ns)


if __name__ == "__main__":
    main()
