"""`gym-metrics dataset reasoning-gym NAME | --mix NAME:WEIGHT ... -o ROWS.jsonl`: task rows
from another library's generators, in the shape `collect` reads (docs/environments.md#from-other-libraries)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import add_global_flags, int_in, max_local_processes, non_negative_int
from gym_metrics.errors import ExitCode, FieldViolation, InvalidInputError

ORDER = 65  # its place in `gym-metrics --help` (cli/_discovery.py)
DEFAULT_SIZE = 500
"""reasoning-gym's own default size."""
DEFAULT_SEED = 42
MAX_SIZE = 1_000_000
"""The most rows one command writes: about 1.5 GB of JSONL and 3 minutes a worker for
leg_counting (an unbounded size wrote without end)."""


def add_parsers(sub: Any) -> None:
    dataset = sub.add_parser("dataset", help="task rows from another library's generators (reasoning-gym)")
    sources = dataset.add_subparsers(dest="dataset_source", required=True)
    p = sources.add_parser(
        "reasoning-gym", help="reasoning-gym's procedurally generated tasks, each row carrying its answer key (the reasoning-gym extra)",
    )  # fmt: skip
    p.add_argument("name", nargs="?", metavar="NAME", help="a reasoning-gym dataset (--list names them)")
    p.add_argument("--mix", nargs="+", action="extend", metavar="NAME:WEIGHT", help="a weighted mix instead, as reasoning-gym's composite dataset draws it")
    p.add_argument(
        "--size", type=int_in(1, MAX_SIZE, " rows (about 1.5 GB of JSONL)"), default=DEFAULT_SIZE, metavar="N",
        help=f"rows (entries 0..N-1; default {DEFAULT_SIZE}, reasoning-gym's; at most {MAX_SIZE:,})",
    )  # fmt: skip
    p.add_argument("--seed", type=non_negative_int, default=DEFAULT_SEED, metavar="S", help=f"the dataset's seed (default {DEFAULT_SEED})")
    p.add_argument(
        "--config", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
        help="a dataset setting, VALUE as JSON when it parses (3, [1, 2], true) else as text; in a mix NAME.KEY=VALUE",
    )  # fmt: skip
    p.add_argument("--system-prompt", default="default", metavar="NAME", help="reasoning-gym's system prompt to put first (default: default, its evaluation's; none: no system message)")
    p.add_argument("--agent", default="policy", metavar="NAME", help="agent_ref.name of every row (default: policy)")
    p.add_argument("-o", "--output", type=Path, metavar="ROWS.jsonl", help="where the rows go")
    most = max_local_processes()
    p.add_argument(
        "--workers", type=int_in(1, most, " (4 a core of this machine, at least 8)"), default=1, metavar="N",
        help=f"processes generating slices of the entries side by side (the file is the same; default 1; at most {most} here)",
    )  # fmt: skip
    p.add_argument("--list", action="store_true", help="print the dataset names and exit")
    p.set_defaults(func=run_reasoning_gym)
    b = sources.add_parser(
        "nemo-gym-benchmark", help="prepare a NeMo Gym benchmark's data (gym eval prepare): run its prepare script, from its tree (a suite's: each benchmark's)",
    )  # fmt: skip
    b.add_argument("benchmark", nargs="?", metavar="NAME|CONFIG.yaml", help="the benchmark (NAME: benchmarks/NAME/config.yaml here)")
    b.add_argument("--cached", action="store_true", help="keep data already there (NeMo Gym's use_cached_prepared_benchmarks)")
    b.add_argument("--list", action="store_true", help="print the benchmarks here, one a line (name, dataset, agent, repeats, prepared or not)")
    b.set_defaults(func=run_nemo_gym_benchmark)
    for source in sources.choices.values():
        add_global_flags(source)


def run_reasoning_gym(ns: argparse.Namespace) -> int:
    from gym_metrics.ecosystems import reasoning_gym as rg

    if ns.list:
        _refuse_with_list([("NAME", ns.name is not None), ("--mix", ns.mix is not None), ("--output", ns.output is not None), ("--config", bool(ns.config))])
        return _print_names(rg.dataset_names())
    if (ns.name is None) == (ns.mix is None):
        raise InvalidInputError("name one dataset or give --mix", [FieldViolation("NAME", "a dataset name, or --mix NAME:WEIGHT ... (not both)")])
    if ns.output is None:
        raise InvalidInputError("no output file", [FieldViolation("--output", "give -o ROWS.jsonl")])
    if not ns.agent.strip():  # collect refuses rows without an agent's name
        raise InvalidInputError("no agent name", [FieldViolation("--agent", "must be a non-empty agent name")])
    started = time.perf_counter()
    if ns.mix is None:
        request = rg.RowsRequest(ns.size, ns.seed, name=ns.name, config=_config(ns.config), prompt=ns.system_prompt, agent=ns.agent)
    else:
        request = rg.RowsRequest(ns.size, ns.seed, parts=tuple(_mix(ns.mix, ns.config)), prompt=ns.system_prompt, agent=ns.agent)
    counts = rg.write_rows(request, ns.output, ns.workers)
    what = ns.name if ns.mix is None else "a mix: " + ", ".join(f"{name} {n}" for name, n in sorted(counts.items()))
    print(
        f"{sum(counts.values())} rows of {what} (seed {ns.seed}, reasoning-gym {rg.version()}) -> {ns.output} "
        f"in {time.perf_counter() - started:.2f}s",
        file=sys.stderr,
    )
    return ExitCode.OK


def run_nemo_gym_benchmark(ns: argparse.Namespace) -> int:
    from gym_metrics.nemo_gym import read_benchmarks

    if ns.list:
        _refuse_with_list([("NAME", ns.benchmark is not None), ("--cached", ns.cached)])
        return _print_names(_benchmark_lines())
    if ns.benchmark is None:
        raise InvalidInputError("no benchmark named", [FieldViolation("NAME", "a benchmark (--list names them) or its config's path")])
    found = read_benchmarks(ns.benchmark)
    for benchmark in getattr(found, "benchmarks", (found,)):  # a suite's, each in turn (gym eval prepare --config SUITE)
        if ns.cached and benchmark.data.is_file():
            print(f"{benchmark.name}: already prepared: {benchmark.data}", file=sys.stderr)
            continue
        started = time.perf_counter()
        written = benchmark.prepare()
        with written.open("rb") as f:
            rows = sum(1 for line in f if line.strip())
        print(f"{benchmark.name}: {rows} rows -> {written} in {time.perf_counter() - started:.2f}s", file=sys.stderr)
    return ExitCode.OK


def _refuse_with_list(flags: list[tuple[str, bool]]) -> None:
    """--list prints the names and exits: what else was given would be dropped without a word."""
    given = [flag for flag, on in flags if on]
    if given:
        raise InvalidInputError(f"--list prints the names and exits: {', '.join(given)} would do nothing", [FieldViolation("--list", "give it alone")])


def _benchmark_lines() -> list[str]:
    """The benchmarks of the working directory's tree: name, dataset, agent, repeats, prepared."""
    from gym_metrics.nemo_gym import benchmark_names, read_benchmarks

    lines = []
    for name in benchmark_names(Path.cwd()):
        try:
            found = read_benchmarks(name)
        except InvalidInputError as exc:
            lines.append(f"{name}\t(cannot be read: {exc})")
            continue
        each = getattr(found, "benchmarks", (found,))  # a suite: its benchmarks' (its own text declares one, its includes more)
        state = "prepared" if all(b.data.is_file() for b in each) else "not prepared"
        named = ", ".join(b.name for b in each)
        lines.append(f"{name}\t{'suite: ' * (len(each) > 1)}{named}\t{', '.join(b.agent for b in each)}\t{', '.join(f'x{b.num_repeats}' for b in each)}\t{state}")
    return lines


def _print_names(names: list[str]) -> int:
    """One name a line; a reader that stops early (`| head`) is not an error."""
    try:
        print("\n".join(names), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (no second error at exit)
    return ExitCode.OK


def _value(text: str) -> Any:
    import orjson

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _pairs(given: list[str]) -> list[tuple[str, Any]]:
    out = []
    for item in given:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise InvalidInputError(f"--config {item!r}", [FieldViolation("--config", "KEY=VALUE")])
        out.append((key.strip(), _value(value)))
    return out


def _config(given: list[str]) -> dict[str, Any]:
    return dict(_pairs(given))


def _mix(given: list[str], config: list[str]) -> list[Any]:
    from gym_metrics.ecosystems.reasoning_gym import MixPart

    parts: dict[str, MixPart] = {}
    for item in given:
        name, colon, weight = item.rpartition(":")
        try:
            value = float(weight) if colon else 1.0
        except ValueError:
            raise InvalidInputError(f"--mix {item!r}", [FieldViolation("--mix", "NAME:WEIGHT, the weight a number")]) from None
        name = name if colon else item
        parts[name] = MixPart(name, value)
    for key, value in _pairs(config):
        name, dot, setting = key.partition(".")
        if not dot or name not in parts:
            raise InvalidInputError(f"--config {key}", [FieldViolation("--config", f"in a mix, NAME.KEY=VALUE with NAME one of {', '.join(parts)}")])
        parts[name].config[setting] = value
    if len(parts) != len(given):
        raise InvalidInputError("a dataset is in the mix twice", [FieldViolation("--mix", "each dataset once (reasoning-gym's composite refuses repeats)")])
    return list(parts.values())
