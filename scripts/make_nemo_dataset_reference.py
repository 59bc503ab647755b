"""Record what NeMo Gym 0.7.0's `config_types.DatasetConfig` makes of dataset blocks (the dump,
its warnings, or the errors it raises) and what `task_materialization.materialize_task` makes of
rows, for tests/nemo_gym/test_datasets.py, which runs `record` with gym_metrics.nemo_gym's and
compares.

A tool for producing test data, run in a throwaway nemo-gym venv:

    /tmp/ngvenv/bin/python scripts/make_nemo_dataset_reference.py            # write
    /tmp/ngvenv/bin/python scripts/make_nemo_dataset_reference.py --check    # compare (exit 1 on a difference)

Written to tests/data/nemo_gym_datasets/cases.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

from reference_file import write_or_check  # scripts/

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_datasets" / "cases.json"
GITLAB = {"dataset_name": "d", "version": "0.0.1", "artifact_fpath": "train.jsonl"}
HF = {"repo_id": "org/d", "artifact_fpath": "v.jsonl"}
BASE = {"name": "set", "jsonl_fpath": "data/set.jsonl"}
BLOCKS: dict[str, dict[str, Any]] = {
    "an example set, nothing else": {**BASE, "type": "example"},
    "a train set with a license": {**BASE, "type": "train", "license": "MIT"},
    "a train set without a license": {**BASE, "type": "train"},
    "a validation set, an unknown license": {**BASE, "type": "validation", "license": "BSD"},
    "an unknown type": {**BASE, "type": "test"},
    "prepare script and dependencies kept": {**BASE, "type": "example", "prepare_script": "prep.py", "prepare_dependencies": ["x==1"]},
    "empty dependencies left out": {**BASE, "type": "example", "prepare_dependencies": []},
    "a gitlab source mirrored into the legacy field": {**BASE, "type": "example", "source": {"type": "gitlab", **GITLAB}},
    "a huggingface source mirrored": {**BASE, "type": "example", "source": {"type": "huggingface", "repo_id": "org/d"}},
    "an unknown source type": {**BASE, "type": "example", "source": {"type": "s3", "bucket": "b"}},
    "a legacy gitlab identifier": {**BASE, "type": "example", "gitlab_identifier": GITLAB},
    "a legacy huggingface identifier": {**BASE, "type": "example", "huggingface_identifier": HF},
    "both legacy identifiers": {**BASE, "type": "example", "gitlab_identifier": GITLAB, "huggingface_identifier": HF},
    "a source beside a legacy identifier": {**BASE, "type": "example", "source": {"type": "gitlab", **GITLAB}, "huggingface_identifier": HF},
    "a source beside both legacy identifiers": {**BASE, "type": "example", "source": {"type": "gitlab", **GITLAB}, "gitlab_identifier": GITLAB,
                                                "huggingface_identifier": HF},
    "zero repeats, an empty taskset": {**BASE, "type": "example", "num_repeats": 0, "taskset": ""},
    "a taskset and repeats": {**BASE, "type": "example", "num_repeats": 3, "taskset": "env:tasks"},
    "a missing jsonl_fpath": {"name": "set", "type": "example"},
}  # fmt: skip
ROWS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "task_id named": ({"task_id": 7, "question": "q", "agent_ref": {"name": "a"}, "_ng_task_index": 3}, {"taskset": "t"}),
    "problem_id, then instance_id": ({"problem_id": "p1", "instance_id": "i1", "x": 1}, {"taskset": "t"}),
    "a null task_id falls to instance_id": ({"task_id": None, "instance_id": "i1"}, {"taskset": "t"}),
    "the collector's index": ({"question": "q", "_ng_task_index": 4, "_ng_rollout_index": 1, "task_source": "s", "skills_ref": "k"}, {"taskset": "t"}),
    "the given index": ({"question": "q"}, {"taskset": "t", "task_index": 2}),
    "no index at all": ({"question": "q"}, {"taskset": "t"}),
    "a negative index": ({"question": "q"}, {"taskset": "t", "task_index": -1}),
    "a bool index": ({"question": "q", "_ng_task_index": True}, {"taskset": "t"}),
    "already a task (task_input)": ({"task_input": {}}, {"taskset": "t"}),
    "already a task (task_id mapping)": ({"task_id": {"taskset": "t", "task_id": "1"}}, {"taskset": "t"}),
    "an empty taskset": ({"task_id": "1"}, {"taskset": ""}),
    "an empty task id": ({"task_id": ""}, {"taskset": "t"}),
}  # fmt: skip


def _outcome(make: Callable[[], Any]) -> dict[str, Any]:
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            made = make()
        except Exception as exc:  # noqa: BLE001 - the refusal is what is recorded
            errors = getattr(exc, "errors", None)
            if callable(errors):  # a pydantic ValidationError: its errors without the docs URL
                return {"refused": type(exc).__name__, "errors": [{k: e[k] for k in ("type", "loc", "msg")} for e in errors()]}
            return {"refused": type(exc).__name__, "message": str(exc)}
    out = made.model_dump(mode="json") if hasattr(made, "model_dump") else made
    return {"made": out, "warnings": [f"{w.category.__name__}: {w.message}" for w in said]}


def record(dataset_config: Any, materialize_task: Callable[..., Any]) -> dict[str, Any]:
    blocks = {name: _outcome(lambda block=block: dataset_config.model_validate(block)) for name, block in BLOCKS.items()}
    rows = {name: _outcome(lambda row=row, kw=kw: materialize_task(row, **kw)) for name, (row, kw) in ROWS.items()}
    return json.loads(json.dumps({"blocks": blocks, "rows": rows}))  # (as stored: a location's tuple a list)


def main() -> int:
    from nemo_gym.config_types import DatasetConfig
    from nemo_gym.task_materialization import materialize_task

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    data = {"nemo_gym": "0.7.0", **record(DatasetConfig, materialize_task)}
    return write_or_check(OUT, json.dumps(data, indent=1, sort_keys=True) + "\n", args.check)


if __name__ == "__main__":
    sys.exit(main())
