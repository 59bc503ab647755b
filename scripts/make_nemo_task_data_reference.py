"""Record what NeMo Gym 0.7.0's `nemo_gym.task_data` answers (schemas loaded from real
`task_data.py` files, rows validated and normalized, reports summarized, broken schema modules
refused, server folders found), for tests/nemo_gym/test_task_data.py, which runs `record` with
gym_metrics.nemo_gym.task_data and compares.

A tool for producing test data, run in a throwaway nemo-gym venv:

    /tmp/ngvenv/bin/python scripts/make_nemo_task_data_reference.py            # write
    /tmp/ngvenv/bin/python scripts/make_nemo_task_data_reference.py --check    # compare (exit 1 on a difference)

Every schema of SCHEMAS (models and an annotated discriminated union, with and without
`legacy_location` fields) is written to a temporary server folder and loaded; every row of ROWS
goes through a TaskDataValidator alone and all together, through normalize_task_fields and
is_materialized_task_row; each module of BROKEN is loaded for its exception. Paths under the
temporary folder are written as `<tmp>`. Written to tests/data/nemo_gym_task_data/cases.json.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import inspect
import json
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, Callable

from reference_file import write_or_check  # scripts/

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_task_data" / "cases.json"
_HEAD = "from typing import Annotated, List, Literal, Optional, Union\nfrom pydantic import BaseModel, ConfigDict, Field\n"
_LEGACY = 'json_schema_extra={"legacy_location": "verifier_metadata"}'
SCHEMAS: dict[str, str] = {
    "plain": _HEAD + f"""
class TaskData(BaseModel):
    model_config = ConfigDict(extra="allow")
    question: str
    expected_answer: Optional[int] = None
    label: str = Field(default="", json_schema_extra={{"consumed_by": ["metrics"]}})
""",
    "legacy": _HEAD + f"""
class TaskData(BaseModel):
    model_config = ConfigDict(extra="allow")
    question: str
    answer: str = Field(default="", {_LEGACY})
    rubric: Optional[List[str]] = Field(default=None, {_LEGACY})
    note: str = Field(default="", json_schema_extra={{"legacy_location": "elsewhere"}})
""",
    "union": _HEAD + f"""
class MathTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: Literal["math"]
    answer: int = Field({_LEGACY})

class CodeTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["code"]
    tests: List[str] = Field(default_factory=list, {_LEGACY})
    question: str = ""

TaskData = Annotated[Union[MathTask, CodeTask], Field(discriminator="kind")]
""",
    "forbid": _HEAD + """
class TaskData(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str
""",
    "ignore": _HEAD + """
class TaskData(BaseModel):
    question: str
""",
    "listed": _HEAD + f"""
class Item(BaseModel):
    answer: str = Field({_LEGACY})

TaskData = List[Item]
""",
}  # fmt: skip
BROKEN: dict[str, str | None] = {
    "no_file": None,
    "raises": "raise RuntimeError('boom')\n",
    "missing_import": "import not_a_real_module_for_task_data_reference\n",
    "syntax_error": "x = (1,\n",
    "no_export": "X = 1\n",
    "export_none": "TaskData = None\n",
    "not_adaptable": "class Plain:\n    pass\n\nTaskData = Plain\n",
    "not_a_type": "TaskData = 5\n",
}
TASK_ID = {"taskset": "demo", "task_id": "t1"}
ROWS: list[dict[str, Any]] = [
    {"question": "q", "expected_answer": 3},
    {"responses_create_params": {"input": "hi"}, "agent_ref": {"name": "a"}, "task_source": "s", "_ng_task_index": 0, "_ng_rollout_index": 1, "question": "q"},
    {"verifier_metadata": {"answer": "a", "question": "q"}},
    {"question": "q", "answer": "a", "rubric": ["r"]},
    {"question": "q", "answer": "a", "verifier_metadata": {"answer": "a"}},
    {"question": "q", "answer": "a", "verifier_metadata": {"answer": "b", "rubric": ["r"]}},
    {"task_data": {"question": "q", "answer": "a"}},
    {"question": "x", "answer": "a", "task_data": {"question": "q"}},
    {"question": "q", "verifier_metadata": "oops"},
    {"task_data": [1, 2]},
    {"verifier_metadata": {"answer": "a"}, "task_data": {"answer": "b", "question": "q"}},
    {"verifier_metadata": None, "question": "q", "answer": "a"},
    {"question": "q", "rubric": ["r"], "verifier_metadata": {"rubric": ["r"]}, "task_data": {"rubric": ["r"], "label": "l"}},
    {"task_id": TASK_ID, "task_input": {"task_data": {"question": "q", "rubric": ["r"]}, "rubric": ["r"]}},
    {"task_id": TASK_ID, "task_input": {"task_data": {"question": "q", "answer": "a"}, "seed": 1}},
    {"task_id": TASK_ID, "task_input": {"question": "q", "answer": "a"}},
    {"task_id": TASK_ID, "task_input": {"task_data": {"question": "q"}, "question": "other", "answer": "a"}},
    {"task_id": TASK_ID, "task_input": {"task_data": {"question": "q"}, "question": "q"}},
    {"task_id": TASK_ID, "task_input": "not an object"},
    {"task_id": TASK_ID, "task_input": None},
    {"task_id": TASK_ID, "task_input": {"task_data": None}},
    {"task_id": TASK_ID, "task_input": {"task_data": ["x"]}},
    {"task_id": "flat id", "task_input": {"question": "q"}, "question": "q"},
    {"task_id": TASK_ID, "question": "q"},
    {"kind": "math", "answer": 4, "extra_field": True},
    {"kind": "math", "verifier_metadata": {"answer": "4"}},
    {"kind": "code", "tests": ["t1"], "question": "q"},
    {"kind": "code", "tests": ["t1"], "stray": 1},
    {"kind": "nope"},
    {"answer": "a", "kind": "code", "verifier_metadata": {"tests": ["t"]}},
    {},
    {"question": 5, "expected_answer": "three"},
    {"question": "q" * 600},
]  # fmt: skip
JSONL = ['{"question": "q"}\n', "\n", "   \n", '{"question": 1}\n', '  {"verifier_metadata": {"question": "q", "answer": "a"}}  \n', '{"task_data": {"question": "q"}}']


def _scrub(value: Any, tmp: Path) -> Any:
    """The value as JSON, with the temporary folder written as `<tmp>`."""
    text = json.dumps(value, default=str).replace(str(tmp), "<tmp>")
    return json.loads(text)


def _report(report: Any) -> dict[str, Any]:
    return {"fields": dataclasses.asdict(report), "summary": report.summary(), "clean": report.clean}


def _public(module: types.ModuleType) -> dict[str, Any]:
    """The names the module itself defines without a leading underscore: callables by their
    parameters (names, kinds, defaults), constants by their values."""
    found: dict[str, Any] = {}
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if callable(value) and getattr(value, "__module__", None) == module.__name__:
            if isinstance(value, type):
                members = {key: _member(item) for key, item in vars(value).items() if not key.startswith("_")}
                init = "an exception" if issubclass(value, BaseException) else _params(value)  # inspect reads these differently per Python
                found[name] = {"init": init, "members": members, "bases": [base.__name__ for base in value.__bases__]}
            else:
                found[name] = _params(value)
        elif isinstance(value, (str, int, frozenset)):
            found[name] = sorted(value) if isinstance(value, frozenset) else value
    return found


def _member(item: Any) -> Any:
    if isinstance(item, property):
        return "property"
    return _params(item) if callable(item) else repr(item)


def _params(fn: Callable[..., Any]) -> list[list[str]]:
    return [[p.name, p.kind.name, repr(p.default)] for p in inspect.signature(fn).parameters.values()]


def _load(td: Any, folder: Path) -> dict[str, Any]:
    try:
        adapter = td.load_task_data_schema(folder)
    except Exception as exc:
        cause = exc.__cause__
        return {"raised": type(exc).__name__, "message": str(exc), "cause": None if cause is None else type(cause).__name__, "registered": f"nemo_gym_task_data.{folder.name}" in sys.modules}
    return {"adapter": None if adapter is None else type(adapter).__name__, "registered": f"nemo_gym_task_data.{folder.name}" in sys.modules}


def _server_dirs(td: Any, tmp: Path) -> dict[str, Any]:
    """find_server_dir with $NEMO_GYM_EXTRA_ROOTS and the working directory both holding
    folders (and a file where a folder is looked for)."""
    cwd, extra = tmp / "cwd", tmp / "extra"
    for root, names in ((cwd, ["in_cwd", "in_both", "dir_in_cwd_only"]), (extra, ["in_extra", "in_both"])):
        for name in names:
            (root / "resources_servers" / name).mkdir(parents=True)
    (extra / "resources_servers" / "dir_in_cwd_only").write_text("a file\n")
    (cwd / "responses_api_agents" / "agent").mkdir(parents=True)
    (tmp / "absolute" / "in_abs").mkdir(parents=True)
    calls: list[tuple[str, dict[str, str]]] = [
        (name, {}) for name in ("in_cwd", "in_extra", "in_both", "dir_in_cwd_only", "missing_server_for_reference")
    ] + [("agent", {"base_folder": "responses_api_agents"}), ("in_cwd", {"base_folder": "responses_api_agents"}), ("in_abs", {"base_folder": str(tmp / "absolute")}), ("nope", {"base_folder": str(tmp / "absolute")})]
    before_cwd, before_env = os.getcwd(), os.environ.get("NEMO_GYM_EXTRA_ROOTS")
    os.chdir(cwd)
    os.environ["NEMO_GYM_EXTRA_ROOTS"] = str(extra)
    try:
        found = {f"{name} {kwargs}": _scrub(td.find_server_dir(name, **kwargs), tmp) for name, kwargs in calls}
    finally:
        os.chdir(before_cwd)
        if before_env is None:
            os.environ.pop("NEMO_GYM_EXTRA_ROOTS", None)
        else:
            os.environ["NEMO_GYM_EXTRA_ROOTS"] = before_env
    return found


def record(td: Any, is_materialized_task_row: Callable[[Any], bool], tmp: Path) -> dict[str, Any]:
    """Everything the cases give through `td` (a task_data module), paths under `tmp` scrubbed."""
    tmp = tmp.resolve()
    loads: dict[str, Any] = {}
    for name, source in BROKEN.items():
        folder = tmp / "broken" / name
        folder.mkdir(parents=True)
        if source is not None:
            (folder / "task_data.py").write_text(source)
        loads[name] = _load(td, folder)
    (tmp / "broken" / "folder_named_like_the_module" / "task_data.py").mkdir(parents=True)
    loads["folder_named_like_the_module"] = _load(td, tmp / "broken" / "folder_named_like_the_module")
    schemas: dict[str, Any] = {}
    for name, source in SCHEMAS.items():
        folder = tmp / "servers" / name
        folder.mkdir(parents=True)
        (folder / "task_data.py").write_text(source)
        loads[name] = _load(td, folder)
        adapter = td.load_task_data_schema(folder)
        together = td.TaskDataValidator(name, adapter, f"{name}.jsonl")
        alone = []
        for index, row in enumerate(ROWS):
            together.validate_row(index, copy.deepcopy(row))
            validator = td.TaskDataValidator(name, adapter, "one.jsonl")
            validator.validate_row(index, copy.deepcopy(row))
            alone.append(_report(validator.report))
        schemas[name] = {
            "legacy_fields": sorted(td.legacy_metadata_fields(adapter)),
            "alone": alone,
            "together": _report(together.report),
            "jsonl": _report(td.validate_jsonl_rows(name, adapter, "lines.jsonl", JSONL)),
        }
    return _scrub(
        {
            "public": _public(td),
            "loads": loads,
            "schemas": schemas,
            "normalized": [list(td.normalize_task_fields(copy.deepcopy(row))) for row in ROWS],
            "materialized": [is_materialized_task_row(row) for row in ROWS],
            "server_dirs": _server_dirs(td, tmp / "roots"),
        },
        tmp,
    )


def main() -> int:
    import nemo_gym.task_data as td
    from nemo_gym.episode_types import is_materialized_task_row

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = {"nemo_gym": "0.7.0", **record(td, is_materialized_task_row, Path(tmp))}
    return write_or_check(OUT, json.dumps(data, indent=1, sort_keys=True) + "\n", args.check)


if __name__ == "__main__":
    sys.exit(main())
