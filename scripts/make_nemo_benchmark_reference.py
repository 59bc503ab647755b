"""Record how NeMo Gym 0.7.0 reads and runs a benchmark config (`gym eval run --benchmark NAME`),
for tests/nemo_gym/test_benchmark_runs.py to hold `collect --benchmark` to:

- every benchmark config of the wheel (each YAML under `benchmarks/` that declares one
  `type: benchmark` dataset, as NeMo Gym discovers them): the benchmark NeMo Gym's
  `BenchmarkConfig.from_config_path` reads from it (dataset name, the agent that runs it, repeats,
  data file, prompt, prepare script), None for an eval suite, or its error;
- `names`: the benchmark names `gym list benchmarks` lists (`discover_benchmarks`);
- the benchmark cases of tests/data/nemo_gym_configs/tree (`benchmarks/demo_*`: a dataset on the
  agent with a prompt and repeats, on the resources server, pinned, ambiguous, a suite): the same,
  and for each that runs (the suite too: `gym eval run --config`), the rows `gym eval run` collects: the collated file `ng_prepare_data
  +mode=train_preparation` writes (prompt applied, repeats, `task_source`), then the rows its
  rollout collection dispatches (task and rollout indices, the agent resolved from the config);
  for demo_splits also its `train` and `validation` splits' (`gym eval run ++split=...`);
- `seeded`: the rows of benchmarks/demo_decoupled/data/rows.jsonl as `ng_collect_rollouts
  +num_repeats=2 +num_repeats_add_seed=true` dispatches them (each rollout's index as the seed
  in its request's `metadata.extra_body`);
- `mapped`: MAPPED_ROWS as `+agent_map=MAPPED` routes them (each row's agent_ref after it);
- `fanned`: FANNED_ROWS as `+fan_out=FANNED +num_repeats=2` runs them: each rollout's (task,
  rollout, agent) in NeMo Gym's order;
- `repeated`: FANNED_ROWS with `+num_repeats=REPEATS` under each of REPEATED_RUNS (fan_out,
  agent_map): each rollout's (task, rollout, agent);
- `counted`: the rows NeMo Gym's `count_failure_classes_as_zero=COUNTED_CLASSES` adds to the
  metrics from a failures sidecar of SIDECAR_ROWS, the rollouts COUNTED_SCORED already scored;
- `wheel_suites`: the wheel's Nemotron 3.5 eval suites as `gym eval prepare --config` reads
  them (each benchmark's name, agent, repeats and data file, in order);
- `aggregated`: the metric input `gym eval aggregate +count_failure_classes_as_zero` builds from
  the rollouts and failures sidecars of SHARDS (every row it hands the aggregation);
- `interleaved`: the (task, rollout) order `+num_repeats=2 +interleave_repeats=true` dispatches
  those rows in, the first one given again as a fourth line.

Run in the throwaway nemo-gym venv, from the unzipped wheel (the cases run in a copy of the tree):

    cd /tmp/ng && /tmp/ngvenv/bin/python /work/main/scripts/make_nemo_benchmark_reference.py \
        --root /tmp/ng --out /work/main/tests/data/nemo_gym_configs/benchmarks.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TREE = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_configs" / "tree"


MAPPED_ROWS = [
    {"agent_ref": {"name": "a", "type": "responses_api_agents"}, "q": 1}, {"agent_ref": {"name": "b"}, "q": 2},
    {"task_source": "s", "q": 3}, {"q": 4}, {"agent_ref": {"name": "b"}, "task_source": "s", "q": 5},
]  # fmt: skip
for _row in MAPPED_ROWS:
    _row["responses_create_params"] = {"input": f"question {_row['q']}"}
MAPPED = {"a": "A2", "s": "S2", "_default": "D"}
FANNED_ROWS = [
    {"agent_ref": {"name": "a"}, "responses_create_params": {"input": "one"}},
    {"agent_ref": {"name": "b"}, "responses_create_params": {"input": "two"}},
    {"task_source": "s", "responses_create_params": {"input": "three"}},
    {"agent_ref": {"name": "a"}, "responses_create_params": {"input": "one"}},
]
FANNED = {"a": ["x", "y"], "s": ["x", "z"]}
REPEATS = {"x": 1, "a": 3, "_default": 2}
_FAILED = {"agent_ref": {"name": "a"}, "failure_kind": "judge", "failure_reason": "timeout", "_ng_failure_message": "m", "_ng_failure_http_status": 503}
SIDECAR_ROWS = [
    {**_FAILED, "_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed", "reward": 0.0, "extra": 1},
    {**_FAILED, "_ng_task_index": 0, "_ng_rollout_index": 1, "_ng_failure_class": "judge_failed"},
    {**_FAILED, "_ng_task_index": 1, "_ng_rollout_index": 0, "_ng_failure_class": "other"},
    {**_FAILED, "_ng_task_index": 1, "_ng_rollout_index": 1, "_ng_failure_class": "judge_failed"},
    {**_FAILED, "_ng_task_index": 1, "_ng_rollout_index": 1, "_ng_failure_class": "other"},
    {**_FAILED, "_ng_task_index": 2, "_ng_rollout_index": 0, "_ng_failure_class": "other"},
    {**_FAILED, "_ng_task_index": 2, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed", "reward": 0.5},
    {**_FAILED, "_ng_task_index": 3, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed"},
]
COUNTED_CLASSES = ["judge_failed"]
COUNTED_SCORED = [[3, 0]]
REPEATED_RUNS = {"fan_out": {"fan_out": FANNED}, "agent_map": {"agent_map": {"b": "x"}}}
_X, _Y = {"agent_ref": {"name": "x"}, "_ng_environment_server": "x_env"}, {"agent_ref": {"name": "y"}}
SHARDS = {  # shard: (its rows, its failures sidecar), for `gym eval aggregate +count_failure_classes_as_zero`
    "a": ([{**_X, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}, {**_X, "_ng_task_index": 0, "_ng_rollout_index": 1, "reward": 0.0},
           {**_X, "_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 1.0}],
          [{**_X, "_ng_task_index": 1, "_ng_rollout_index": 1, "_ng_failure_class": "judge_failed", "failure_reason": "r"},
           {**_X, "_ng_task_index": 0, "_ng_rollout_index": 1, "_ng_failure_class": "judge_failed"},
           {**_X, "_ng_task_index": 2, "_ng_rollout_index": 0, "_ng_failure_class": "agent_run_error"},
           {**_X, "_ng_task_index": 2, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed", "_ng_failure_http_status": 503},
           {**_X, "_ng_task_index": 3, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed"},
           {"_ng_task_index": 4, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed"}]),
    "b": ([{**_X, "_ng_task_index": 3, "_ng_rollout_index": 0, "reward": 1.0}, {**_Y, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 0.5}],
          [{**_X, "_ng_task_index": 1, "_ng_rollout_index": 1, "_ng_failure_class": "agent_run_error"},
           {**_Y, "_ng_task_index": 5, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed", "reward": 0.25},
           {**_Y, "_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed"},
           {**_Y, "_ng_task_index": 3, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed"}]),
}  # fmt: skip
"""Each shard checked against its own rows by task and rollout alone (y 3/0: b holds x 3/0), the
last attempt of a rollout standing across shards (x 1/1: a's judge_failed, then b's
agent_run_error), a rollout another shard scored not counted (x 3/0), one naming no agent left
out (4/0)."""


def aggregated(folder: Path) -> list[dict[str, Any]]:
    """The metric input `gym eval aggregate +count_failure_classes_as_zero=COUNTED_CLASSES` builds
    from SHARDS (NeMo Gym's own RolloutAggregationHelper, its server calls answered here: no agent
    fronted by a server, so each row is grouped by its stamp or agent, as without a config)."""
    import asyncio
    from types import SimpleNamespace

    import nemo_gym.rollout_collection as collection

    for name, (rows, failures) in SHARDS.items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / f"{name}_failures.jsonl").write_text("".join(json.dumps(r) + "\n" for r in failures))
    seen: list[list[dict[str, Any]]] = []

    async def metrics(self: Any, rows: list[dict[str, Any]], _: Any, out: Path) -> Path:
        seen.append(rows)
        return out

    collection._environment_servers_by_agent = lambda _: {}
    collection.RolloutCollectionHelper.setup_server_client = lambda self: SimpleNamespace(global_config_dict={})
    collection.RolloutCollectionHelper._call_aggregate_metrics = metrics
    config = collection.RolloutAggregationConfig(input_glob=f"{folder}/a.jsonl,{folder}/b.jsonl", output_jsonl_fpath=str(folder / "out.jsonl"),
                                                 count_failure_classes_as_zero=COUNTED_CLASSES, disable_health_check=True)  # fmt: skip
    with contextlib.redirect_stdout(sys.stderr):
        asyncio.run(collection.RolloutAggregationHelper().run_from_config(config))
    return seen[0]


def benchmark(path: Path) -> Any:
    """NeMo Gym's reading of one benchmark config, strict as a run reads it."""
    from nemo_gym.benchmarks import BenchmarkConfig

    try:
        found = BenchmarkConfig.from_config_path(path)
    except Exception as exc:  # noqa: BLE001 - recorded: NeMo Gym refuses this config
        return {"error": type(exc).__name__, "message": str(exc).splitlines()[0]}
    if found is None:
        return None
    d = found.dataset
    return {
        "name": found.name, "agent": found.agent_name, "num_repeats": found.num_repeats, "jsonl_fpath": str(d.jsonl_fpath),
        "prompt_config": None if d.prompt_config is None else str(d.prompt_config), "prepare_script": str(d.prepare_script),
    }  # fmt: skip


WHEEL_SUITES = ["benchmarks/nemotron_3.5_super/eval_container_config.yaml", "benchmarks/nemotron_3.5_super/eval_container_config_with_staged.yaml"]
"""The wheel's eval suites whose every include it ships (the Nemotron 3 Ultra ones name a file it lacks)."""


def suite_read(config: str) -> list[list[Any]]:
    """A suite config's benchmarks as `gym eval prepare --config SUITE` reads them, in its order:
    (name, agent, repeats, data file). Its own function runs; what it would then do is answered
    here (no prepare script imported or run, no dependency installed; a script the wheel lacks
    taken as present: its benchmark is still named)."""
    import io
    from types import SimpleNamespace

    import nemo_gym.cli.eval as ev

    seen: list[Any] = []

    class Present(type(Path())):  # type: ignore[misc]
        def exists(self, **kwargs: Any) -> bool:
            return True

    ev._install_prepare_dependencies = lambda bc: None
    ev.importlib = SimpleNamespace(import_module=lambda name: SimpleNamespace(prepare=lambda **k: None))
    ev._multiprocess_benchmark_prepare_fn = lambda args: seen.append(args[0])
    ev.Path = Present
    sys.argv = ["gym", f"+config_paths=[{config}]"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        ev.prepare_benchmark()
    return [[b.name, b.agent_name, b.num_repeats, str(b.dataset.jsonl_fpath)] for b in seen]


def dispatched(config: Path, out: Path, split: str = "benchmark") -> dict[str, Any]:
    """The collated rows of `config`'s `split` datasets and the rows NeMo Gym's rollout collection dispatches from them."""
    from omegaconf import OmegaConf

    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig
    from nemo_gym.rollout_collection import RolloutCollectionConfig, RolloutCollectionHelper

    ng_prepare_data = Path(sys.executable).parent / "ng_prepare_data"
    command = [str(ng_prepare_data), f"+config_paths=[{config}]", f"+output_dirpath={out}", "+mode=train_preparation"]
    subprocess.run(command, check=True, capture_output=True)
    collated = out / f"{split}.jsonl"
    initial = OmegaConf.merge(GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, {"config_paths": [str(config)]})
    parser_config = GlobalConfigDictParserConfig(initial_global_config_dict=initial, skip_load_from_cli=True, skip_load_from_dotenv=True)
    document = GlobalConfigDictParser().parse(parser_config)
    helper = RolloutCollectionHelper()
    rows = helper._preprocess_rows_from_config(RolloutCollectionConfig(input_jsonl_fpath=str(collated), output_jsonl_fpath=str(out / "rollouts.jsonl")))
    helper.resolve_task_sources(rows, document)
    return {"collated": collated.read_text().splitlines(), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True, help="the unzipped nemo-gym wheel")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--suite", help=argparse.SUPPRESS)  # one wheel suite read, in a process of its own
    args = parser.parse_args()
    if args.suite:
        os.chdir(args.root)
        print(json.dumps(suite_read(args.suite)))
        return
    from nemo_gym.benchmarks import _benchmark_config_paths

    root = args.root.resolve()
    os.chdir(root)
    wheel = {str(p.relative_to(root)): benchmark(p.relative_to(root)) for p in _benchmark_config_paths(root / "benchmarks")}
    cases: dict[str, Any] = {}
    for path in sorted(TREE.glob("benchmarks/demo_*/config.yaml")):
        name = str(path.relative_to(TREE))
        with tempfile.TemporaryDirectory() as temp:  # a tree each: collating writes beside the data
            tree = Path(temp) / "tree"
            shutil.copytree(TREE, tree)
            os.chdir(tree)  # as a user runs NeMo Gym: from the tree's root
            case: dict[str, Any] = {"benchmark": benchmark(Path(name))}
            if (case["benchmark"] is not None and "error" not in case["benchmark"]) or "suite" in name:  # a suite: gym eval run --config
                case.update(dispatched(Path(name), Path(temp) / "out"))
            if "splits" in name:  # gym eval run --config X ++split=train|validation
                case["splits"] = {split: dispatched(Path(name), Path(temp) / f"out_{split}", split) for split in ("train", "validation")}
            cases[name] = case
    from nemo_gym.rollout_collection import RolloutCollectionHelper

    rows = [json.loads(line) for line in (TREE / "benchmarks/demo_decoupled/data/rows.jsonl").read_text().splitlines()]
    seeded = RolloutCollectionHelper().preprocess_examples(rows, agent_map={"_default": "demo_env_simple_agent"}, num_repeats=2, num_repeats_add_seed=True)
    from nemo_gym.rollout_collection import RolloutCollectionConfig

    lines = [*(TREE / "benchmarks/demo_decoupled/data/rows.jsonl").read_text().splitlines(keepends=True)]
    lines.append(lines[0])
    raw = [(i, line, {**json.loads(line), "agent_ref": {"name": "demo_env_simple_agent"}}) for i, line in enumerate(lines)]
    config = RolloutCollectionConfig(input_jsonl_fpath="-", output_jsonl_fpath="-", num_repeats=2, interleave_repeats=True)
    with contextlib.redirect_stdout(sys.stderr):
        order = [[r["_ng_task_index"], r["_ng_rollout_index"]] for r in RolloutCollectionHelper._preprocess_raw_rows(raw, config)]
    from nemo_gym.benchmarks import discover_benchmarks

    os.chdir(root)
    with contextlib.redirect_stdout(sys.stderr):
        names = sorted(discover_benchmarks())
    with contextlib.redirect_stdout(sys.stderr):
        mapped = [r["agent_ref"] for r in RolloutCollectionHelper().preprocess_examples(MAPPED_ROWS, agent_map=MAPPED)]
        fanned_rows = RolloutCollectionHelper().preprocess_examples(FANNED_ROWS, fan_out=FANNED, num_repeats=2)
        fanned = [[r["_ng_task_index"], r["_ng_rollout_index"], r["agent_ref"]["name"]] for r in fanned_rows]
        repeated = {}
        for run, routing in REPEATED_RUNS.items():
            rows_run = RolloutCollectionHelper().preprocess_examples(FANNED_ROWS, num_repeats=REPEATS, **routing)
            repeated[run] = [[r["_ng_task_index"], r["_ng_rollout_index"], (r.get("agent_ref") or {}).get("name")] for r in rows_run]
    from nemo_gym.rollout_collection import _failure_rows_counted_as_zero

    with tempfile.TemporaryDirectory() as temp:
        sidecar = Path(temp) / "out_failures.jsonl"
        sidecar.write_text("".join(json.dumps(r) + "\n" for r in SIDECAR_ROWS))
        counted_rows = _failure_rows_counted_as_zero([sidecar], COUNTED_CLASSES, {tuple(k) for k in COUNTED_SCORED})
    with tempfile.TemporaryDirectory() as temp:
        aggregated_rows = aggregated(Path(temp))
    wheel_suites = {}
    for config in WHEEL_SUITES:  # (each in a process: NeMo Gym's global config is read once a process)
        done = subprocess.run([sys.executable, __file__, "--root", str(root), "--out", "-", "--suite", config], check=True, capture_output=True, text=True)
        wheel_suites[config] = json.loads(done.stdout.strip().splitlines()[-1])
    reference = {"nemo_gym": "0.7.0", "wheel": wheel, "names": names, "cases": cases, "seeded": seeded, "interleaved": order,
                 "mapped": {"rows": MAPPED_ROWS, "agent_map": MAPPED, "agent_refs": mapped},
                 "fanned": {"rows": FANNED_ROWS, "fan_out": FANNED, "rollouts": fanned},
                 "repeated": {"num_repeats": REPEATS, "runs": REPEATED_RUNS, "rollouts": repeated},
                 "counted": {"sidecar": SIDECAR_ROWS, "classes": COUNTED_CLASSES, "scored": COUNTED_SCORED, "rows": counted_rows},
                 "aggregated": {"shards": SHARDS, "classes": COUNTED_CLASSES, "rows": aggregated_rows}, "wheel_suites": wheel_suites}  # fmt: skip
    args.out.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    suites = sum(v is None for v in wheel.values())
    errors = sum(isinstance(v, dict) and "error" in v for v in wheel.values())
    print(f"{len(wheel)} wheel benchmark configs ({suites} suites, {errors} refused), {len(cases)} cases -> {args.out}")


if __name__ == "__main__":
    main()
