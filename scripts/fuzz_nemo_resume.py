"""Differential test of `collect --resume`'s plan against NeMo Gym 0.7.0's resumed collection:
which rollouts run again, with which `_ng_attempt_index`, in which order. Each seed makes an
input of 1-30 tasks with 1-4 repeats (its rows materialized: indices given), an output holding a
random subset of them (duplicates, blank lines, rows of tasks not in the input, sometimes a row
without indices or a line that is not JSON) and a failures sidecar of failed attempts (every
count, retryable, terminal or both, rows without indices or without an agent_ref, blank lines,
sometimes a bad line), read under a `NEMO_GYM_MAX_ROLLOUT_ATTEMPTS` unset, 1, 2 or 5. NeMo Gym's
`RolloutCollectionHelper._load_from_cache` (called as scripts/make_nemo_resume_reference.py
calls it, in one subprocess for the whole batch) and ours (OutputFile and Router.to_verify, in
process: the rows a resumed collect sends to verify) are compared exactly. A case both refuse
is counted apart, as is an output row naming no agent (NeMo Gym keys it by its indices; ours
refuses it without --agent, as `aggregate` does); one refused by one side only is a difference.

    .venv/bin/python scripts/fuzz_nemo_resume.py --seeds 0:2000 --nemo-python /tmp/ngvenv/bin/python \
        [--keep DIR]   # DIR gets each differing case's files and both answers

Exit 0 when every case gives the same rows; 1 when one differs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("_ng_task_index", "_ng_rollout_index", "_ng_attempt_index")
Case = dict[str, Any]


def _row(task: int, rollout: int, agent: str | None = "a") -> dict[str, Any]:
    row: dict[str, Any] = {"responses_create_params": {"input": f"task {task}"}, "_ng_task_index": task, "_ng_rollout_index": rollout}
    if agent is not None:
        row["agent_ref"] = {"name": agent}
    return row


def make_case(seed: int) -> Case:
    """One input, output and sidecar (each a list of lines: JSON text, or a blank or bad line)."""
    rng = random.Random(seed)
    tasks, repeats = rng.randint(1, 30), rng.randint(1, 4)
    keys = [(t, r) for t in range(tasks) for r in range(repeats)]
    if rng.random() < 0.3:  # rollouts round by round, as interleaved repeats materialize them
        keys.sort(key=lambda k: k[1])
    inputs = [json.dumps(_row(t, r) | {"response": {"output": []}}) for t, r in keys]
    output: list[str] = []
    unnamed = rng.random() < 0.1
    for t, r in rng.sample(keys, rng.randint(0, len(keys))) + [(tasks + rng.randint(0, 5), 0)] * rng.randint(0, 2):
        output.append(json.dumps(_row(t, r, None if unnamed and rng.random() < 0.05 else "a") | {"reward": rng.choice([0.0, 1.0])}))
        if rng.random() < 0.1:
            output.append(output[-1])  # a duplicate
        if rng.random() < 0.05:
            output.append(rng.choice(["", "   "]))
    if rng.random() < 0.03:
        output.insert(rng.randint(0, len(output)), json.dumps({"reward": 1.0, "agent_ref": {"name": "a"}}))
    if rng.random() < 0.03:
        output.insert(rng.randint(0, len(output)), "{not json")
    sidecar: list[str] = []
    pool = keys + [(tasks + rng.randint(0, 5), rng.randint(0, 2)) for _ in range(rng.randint(0, 3))]
    for t, r in rng.sample(pool, rng.randint(0, len(pool))):
        for _ in range(rng.choice([1, 1, 2, 3, 4, 5, 6])):
            failed = _row(t, r, None if rng.random() < 0.05 else "a") | {"reward": 0.0, "_ng_failure_class": rng.choice(["judge_failed", "agent_run_error", "environment_server_failed"])}
            terminal = rng.choice([None, None, False, True, 1, 0, "yes", ""])
            if terminal is not None:
                failed["_ng_failure_terminal"] = terminal
            if rng.random() < 0.05:
                failed.pop(rng.choice(["_ng_task_index", "_ng_rollout_index"]))
            sidecar.append(json.dumps(failed))
            if rng.random() < 0.03:
                sidecar.append("")
    rng.shuffle(sidecar)
    if rng.random() < 0.02:
        sidecar.insert(rng.randint(0, len(sidecar)), "not json")
    return {"seed": seed, "input": inputs, "output": output, "sidecar": sidecar, "max_attempts": rng.choice([None, "1", "2", "5"])}


def write_files(case: Case, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in (("materialized.jsonl", case["input"]), ("out.jsonl", case["output"]), ("out_failures.jsonl", case["sidecar"])):
        (folder / name).write_text("".join(line + "\n" for line in lines))


def ours(case: Case, folder: Path) -> dict[str, Any]:
    """The rows our resumed collect sends to verify, from the same files."""
    from gym_metrics.collector._keys import find_fixed_keys
    from gym_metrics.collector._options import CollectOptions
    from gym_metrics.collector._outfile import OutputFile, max_rollout_attempts_from_env
    from gym_metrics.collector._progress import Progress
    from gym_metrics.collector._router import Router
    from gym_metrics.errors import GymMetricsError

    write_files(case, folder)
    given = case["max_attempts"]
    if given is None:
        os.environ.pop("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", None)
    else:
        os.environ["NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"] = given
    source = folder / "materialized.jsonl"
    try:
        limit = max_rollout_attempts_from_env()
        opts = CollectOptions(resume=True, max_rollout_attempts=limit)
        fixed = find_fixed_keys(source, opts.num_repeats, opts.default_agent, opts.limit)
        out = OutputFile(folder / "out.jsonl", True, None, False, limit)
        try:
            router = Router(source, opts, out, Progress(None, io.StringIO()), fixed)
            router.log = lambda message: None
            rows = [{k: item.row[k] for k in KEYS if k in item.row} for item in router.to_verify()]
        finally:
            out.close()
    except GymMetricsError as exc:
        return {"refused": type(exc).__name__}
    return {"dispatched": rows}


def nemo_worker(cases_path: Path, answers_path: Path) -> None:
    """Run in NeMo Gym's venv: each case's dispatched rows, or the error it raised."""
    sys.path.insert(0, str(ROOT / "scripts"))
    dispatched = importlib.import_module("make_nemo_resume_reference").dispatched

    answers: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(sys.stderr):
        for case in json.loads(cases_path.read_text()):
            folder = Path(tmp) / str(case["seed"])
            write_files(case, folder)
            try:
                answers.append({"dispatched": dispatched(folder, case["max_attempts"])})
            except Exception as exc:  # noqa: BLE001  (a refusal, counted apart)
                answers.append({"refused": type(exc).__name__})
    answers_path.write_text(json.dumps(answers))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:500", help="FIRST:STOP (default 0:500)")
    parser.add_argument("--nemo-python", default="/tmp/ngvenv/bin/python", help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--keep", type=Path, help="write each differing case's files and both answers here")
    parser.add_argument("--nemo-worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nemo_worker:
        nemo_worker(*args.nemo_worker)
        return 0
    first, stop = (int(x) for x in args.seeds.split(":"))
    cases = [make_case(seed) for seed in range(first, stop)]
    tally: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        cases_path, answers_path = Path(tmp) / "cases.json", Path(tmp) / "answers.json"
        cases_path.write_text(json.dumps(cases))
        made = subprocess.run([args.nemo_python, __file__, "--nemo-worker", str(cases_path), str(answers_path)], capture_output=True, text=True, check=False)
        if made.returncode:
            print(made.stderr[-3000:], file=sys.stderr)
            return 1
        theirs = json.loads(answers_path.read_text())
        for case, nemo in zip(cases, theirs):
            mine = ours(case, Path(tmp) / "ours" / str(case["seed"]))
            if "refused" in nemo and "refused" in mine:
                tally["both refused"] += 1
            elif "refused" in mine and any('"agent_ref"' not in line and "_ng_task_index" in line for line in case["output"]):
                tally["ours refuses an output row naming no agent (as aggregate does)"] += 1
            elif nemo == mine:
                tally["same"] += 1
            else:
                tally["differ"] += 1
                print(f"seed {case['seed']}: NeMo Gym {json.dumps(nemo)[:300]}\n    ours {json.dumps(mine)[:300]}")
                if args.keep:
                    write_files(case, args.keep / str(case["seed"]))
                    (args.keep / str(case["seed"]) / "answers.json").write_text(json.dumps({"nemo_gym": nemo, "ours": mine, "max_attempts": case["max_attempts"]}, indent=1))
    print(f"{len(cases)} cases: {dict(tally)}")
    return 1 if tally["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
