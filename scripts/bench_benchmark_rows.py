"""A NeMo Gym benchmark's rows made ready to run: `collect --benchmark`'s reading (the config
read, each raw row made as NeMo Gym collates and dispatches it, indexed) beside NeMo Gym 0.7.0's
own (`ng_prepare_data`'s collation, then its rollout collection's preprocessing and agent
resolution), on the same generated benchmark (figures in BENCHMARKS.md, "collect --benchmark").

    .venv/bin/python scripts/bench_benchmark_rows.py --rows 20000 --repeats 8 --rounds 3 --nemo-python /tmp/ngvenv/bin/python

Each side runs in its own process, in turn, round after round, from a copy of
tests/data/nemo_gym_configs/tree holding the generated benchmark; the time is the reading
alone (imports and start-up left out), and both sides must give the same number of rollouts.

`--suite`: an eval suite instead (the test tree's demo_suite_two with the generated benchmark in
demo_eval's place and a second one of as many rows, two rollouts each, on its own server):
collect's collated file written (`Suite.collate`) and read back, against NeMo Gym's collation and
dispatch of the suite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TREE = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_configs" / "tree"
CONFIG = "benchmarks/bench_rows/config.yaml"


SUITE = "benchmarks/bench_suite/config.yaml"


def make_suite(where: Path, rows: int) -> None:
    """benchmarks/bench_suite: demo_suite_two's shape over bench_rows and a second benchmark."""
    folder = where / "benchmarks" / "bench_suite"
    folder.mkdir()
    text = (where / "benchmarks" / "demo_suite_two" / "config.yaml").read_text()
    (folder / "config.yaml").write_text(text.replace("benchmarks/demo_eval/config.yaml", "benchmarks/bench_rows/config.yaml")
                                        .replace("benchmarks/demo_decoupled/data/rows.jsonl", "benchmarks/bench_suite/second.jsonl"))  # fmt: skip
    with open(folder / "second.jsonl", "w") as f:
        for i in range(rows):
            f.write(json.dumps({"responses_create_params": {"input": [{"role": "user", "content": f"Say {i} twice."}]}, "expected": f"{i} {i}"}) + "\n")


def make_tree(where: Path, rows: int, repeats: int) -> Path:
    shutil.copytree(TREE, where)
    folder = where / "benchmarks" / "bench_rows"
    (folder / "data").mkdir(parents=True)
    text = (where / "benchmarks" / "demo_eval" / "config.yaml").read_text()
    (folder / "config.yaml").write_text(text.replace("demo_eval", "bench_rows").replace("num_repeats: 3", f"num_repeats: {repeats}"))
    shutil.copy(where / "benchmarks" / "demo_eval" / "prompt.yaml", folder / "prompt.yaml")
    with open(folder / "data" / "bench_rows_benchmark.jsonl", "w") as f:
        for i in range(rows):
            question = f"Problem {i}: what is {i} + {i * 7 % 101}? Show the working, then give the answer on its own line. " * 2
            f.write(json.dumps({"question": question, "expected": str(i + i * 7 % 101), "id": i, "meta": {"source": "bench", "level": i % 5}}) + "\n")
    return where


def ours() -> tuple[float, int]:
    from gym_metrics.nemo_gym import prompt_step
    from gym_metrics.collector._input import Rollout, read_input
    from gym_metrics.nemo_gym import read_benchmark

    start = time.perf_counter()
    benchmark = read_benchmark(CONFIG)
    make = benchmark.row_maker(prompt_step(str(benchmark.prompt_config)))
    count = sum(isinstance(item, Rollout) for item in read_input(benchmark.data, benchmark.num_repeats, prepare=make))
    return time.perf_counter() - start, count


def ours_suite() -> tuple[float, int]:
    from gym_metrics.collector._input import Rollout, read_input
    from gym_metrics.nemo_gym import read_benchmarks

    start = time.perf_counter()
    suite = read_benchmarks(SUITE)
    suite.collate(Path("collated.jsonl"))
    agent = suite.agent_of()

    def route(row: dict) -> tuple[dict, None]:
        return {**row, "agent_ref": {"name": agent[row["task_source"]]}}, None

    count = sum(isinstance(item, Rollout) for item in read_input(Path("collated.jsonl"), None, prepare=route))
    return time.perf_counter() - start, count


def nemo(config: str = CONFIG) -> tuple[float, int]:
    from omegaconf import OmegaConf

    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig
    from nemo_gym.rollout_collection import RolloutCollectionConfig, RolloutCollectionHelper
    from nemo_gym.train_data_utils import TrainDataProcessor

    start = time.perf_counter()
    initial = OmegaConf.merge(GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT,
                              {"config_paths": [config], "output_dirpath": "collated", "mode": "train_preparation"})  # fmt: skip
    document = GlobalConfigDictParser().parse(GlobalConfigDictParserConfig(initial_global_config_dict=initial, skip_load_from_cli=True, skip_load_from_dotenv=True))
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        TrainDataProcessor().run(document)
        helper = RolloutCollectionHelper()
        rows = helper._preprocess_rows_from_config(RolloutCollectionConfig(input_jsonl_fpath="collated/benchmark.jsonl", output_jsonl_fpath="o.jsonl"))
        helper.resolve_task_sources(rows, document)
    return time.perf_counter() - start, len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nemo-python", help="the nemo-gym 0.7.0 venv's python (its side is left out without it)")
    parser.add_argument("--suite", action="store_true", help="an eval suite of the benchmark and a second one (module docstring)")
    parser.add_argument("--side", choices=["ours", "nemo", "ours_suite", "nemo_suite"], help=argparse.SUPPRESS)  # one run, in a tree made for it
    args = parser.parse_args()
    if args.side:
        run = {"ours": ours, "nemo": nemo, "ours_suite": ours_suite, "nemo_suite": lambda: nemo(SUITE)}[args.side]
        seconds, count = run()
        print(json.dumps({"seconds": seconds, "rollouts": count}))
        return
    sides = {"gym-metrics": sys.executable, **({"NeMo Gym": args.nemo_python} if args.nemo_python else {})}
    times: dict[str, list[float]] = {name: [] for name in sides}
    counts = set()
    for _ in range(args.rounds):
        for name, python in sides.items():
            with tempfile.TemporaryDirectory() as temp:
                tree = make_tree(Path(temp) / "tree", args.rows, args.repeats)
                side = ("ours" if name == "gym-metrics" else "nemo") + ("_suite" if args.suite else "")
                if args.suite:
                    make_suite(tree, args.rows)
                env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])} if side == "ours" else dict(os.environ)
                done = subprocess.run([python, __file__, "--side", side], cwd=tree, capture_output=True, text=True, env=env)
                if done.returncode:
                    raise SystemExit(f"{name} failed:\n{done.stderr[-2000:]}")
                found = json.loads(done.stdout.strip().splitlines()[-1])
                times[name].append(found["seconds"])
                counts.add(found["rollouts"])
    assert len(counts) == 1, f"the sides disagree on the rollouts: {counts}"
    total = counts.pop()
    what = f"a suite: {args.rows:,} rows x {args.repeats} repeats and {args.rows:,} rows x 2" if args.suite else f"{args.rows:,} rows x {args.repeats} repeats"
    print(f"{what} = {total:,} rollouts, {args.rounds} rounds (medians)")
    best = statistics.median(times["gym-metrics"])
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"| {name} | {median:.2f} s | {total / median:,.0f} rollouts/s | {median / best:.1f}x | {', '.join(f'{s:.2f}' for s in runs)} |")


if __name__ == "__main__":
    main()
