"""A partial's header is input (issue 23 item 7): `merge` checks every header field against its
type and against the file before sizing anything by it. Each field of a real partial's header
is edited in turn (wrong type, missing, negative, huge, a string version, rows that disagree
with the file), and so is the data (negative task and rollout indices, error codes out of
range, missing values, a column of the wrong type): each is exit 2, one line naming the file
and the field, never "internal error"; the 400M-rows header fails before allocating."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from gym_metrics import cli
from gym_metrics.rollouts import read_rollouts
from gym_metrics.aggregate import write_partial
from test_partials import generated

KEY = b"gym_metrics.partial"
Edit = Callable[[dict[str, Any], pa.Table], pa.Table | None]
"""Edits the header in place, and returns a new table when it edits the data too."""


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], pa.Table]:
    """A partial written by the writer: two agents, errors, non-numeric keys, shown text."""
    tmp = tmp_path_factory.mktemp("real")
    (tmp / "r.jsonl").write_bytes(b"".join(generated(random.Random(2))))
    path = write_partial(tmp / "p.parquet", read_rollouts(tmp / "r.jsonl", keep_rows=False))
    table = pq.read_table(path)
    header = json.loads(table.schema.metadata[KEY])
    first = header["agents"][0]
    assert first["errors"] and first["non_numeric"] and True in first["shown"].values() and first["row_text"] == "samples"
    return header, table


def setting(where: str, value: Any) -> Edit:
    """Sets (or, given `...`, removes) the header field at `where` ("agents.0.rows")."""

    def edit(header: dict[str, Any], table: pa.Table) -> None:
        *parents, last = [int(k) if k.isdigit() else k for k in where.split(".")]
        obj: Any = header
        for key in parents:
            obj = obj[key]
        if value is ...:
            del obj[last]
        else:
            obj[last] = value

    return edit


def changing(column: str, change: Callable[[pa.ChunkedArray], pa.Array | pa.ChunkedArray]) -> Edit:
    """Replaces a data column (the header stays as written)."""

    def edit(header: dict[str, Any], table: pa.Table) -> pa.Table:
        at = table.schema.get_field_index(column)
        return table.set_column(at, table.schema.field(at).with_type(change(table.column(column)).type), change(table.column(column)))

    return edit


def _huge_rows(header: dict[str, Any], table: pa.Table) -> None:
    header["agents"][0]["rows"] = 400_000_000


def _one_more_row(header: dict[str, Any], table: pa.Table) -> None:
    header["agents"][0]["rows"] += 1


def _first_agent_twice(header: dict[str, Any], table: pa.Table) -> None:
    header["agents"].append(dict(header["agents"][0], rows=0))


def _rows_moved(header: dict[str, Any], table: pa.Table) -> None:
    header["agents"][0]["rows"] -= 1
    header["agents"][1]["rows"] -= 1  # both fit the file, their sum does not


# (case, edit, what the one error line must name besides the file)
CASES: list[tuple[str, Edit, str]] = [
    ("format-wrong-type", setting("format", 3), "not a gym-metrics partial"),
    ("format-missing", setting("format", ...), "not a gym-metrics partial"),
    ("version-string", setting("version", "1"), 'version "1" (not an integer)'),
    ("version-float", setting("version", 1.0), "version 1.0 (not an integer)"),
    ("version-bool", setting("version", True), "version true (not an integer)"),
    ("version-missing", setting("version", ...), "version missing"),
    ("version-negative", setting("version", -1), "version -1"),
    ("version-huge", setting("version", 2**70), "(not an integer)"),  # orjson reads it as a float
    ("version-past-double", setting("version", 10**400), "version 1000000000"),
    ("agents-wrong-type", setting("agents", {"a": 1}), "agents: must be a list"),
    ("agents-missing", setting("agents", ...), "agents: missing"),
    ("agent-wrong-type", setting("agents.0", "a"), "agents[0]: must be an object"),
    ("name-wrong-type", setting("agents.0.name", 7), "agents[0].name: must be a string"),
    ("name-missing", setting("agents.0.name", ...), "agents[0].name: missing"),
    ("name-empty", setting("agents.0.name", ""), "agents[0].name: empty"),
    ("name-twice", _first_agent_twice, "agents[2].name: agent 'a' listed twice"),
    ("rows-wrong-type", setting("agents.0.rows", "5"), "agents[0].rows: must be an integer"),
    ("rows-float", setting("agents.0.rows", 5.0), "agents[0].rows: must be an integer"),
    ("rows-missing", setting("agents.0.rows", ...), "agents[0].rows: missing"),
    ("rows-negative", setting("agents.0.rows", -5), "agents[0].rows: must be >= 0"),
    ("rows-huge", _huge_rows, "agents[0].rows: 400000000 rows, more than the file's"),
    ("rows-past-64-bits", setting("agents.0.rows", 2**70), "agents[0].rows: must be an integer"),  # a float, to orjson
    ("rows-past-double", setting("agents.0.rows", 10**400), "agents[0].rows: 1000000000"),
    ("rows-one-more", _one_more_row, "agents[].rows: the agents' rows add up to"),
    ("rows-fewer", _rows_moved, "agents[].rows: the agents' rows add up to"),
    ("fields-wrong-type", setting("agents.0.fields", "reward"), "agents[0].fields: must be a list"),
    ("fields-missing", setting("agents.0.fields", ...), "agents[0].fields: missing"),
    ("field-kind", setting("agents.0.fields.0", ["reward", "complex"]), "agents[0].fields[0]: must be [name, one of"),
    ("field-no-column", setting("agents.0.fields.0", ["nope", "float"]), "agents[0].fields[0]: names column 'value:nope'"),
    ("non-numeric-wrong-type", setting("agents.0.non_numeric", 3), "agents[0].non_numeric: must be a list"),
    ("non-numeric-missing", setting("agents.0.non_numeric", ...), "agents[0].non_numeric: missing"),
    ("non-numeric-item", setting("agents.0.non_numeric.0", 1), "agents[0].non_numeric[0]: must be a string"),
    ("non-numeric-no-column", setting("agents.0.non_numeric.0", "nope"), "agents[0].non_numeric[0]: names column"),
    ("shown-wrong-type", setting("agents.0.shown", ["reward"]), "agents[0].shown: must be an object"),
    ("shown-missing", setting("agents.0.shown", ...), "agents[0].shown: missing"),
    ("shown-value", setting("agents.0.shown.reward", "yes"), "agents[0].shown.reward: must be true or false"),
    ("shown-no-column", setting("agents.0.shown.nope", False), "agents[0].shown.nope: names column 'shown_values:nope'"),
    ("row-text-wrong", setting("agents.0.row_text", "some"), "agents[0].row_text: must be one of all/samples/none"),
    ("row-text-missing", setting("agents.0.row_text", ...), "agents[0].row_text: must be one of"),
    ("row-text-all-but-samples", setting("agents.0.row_text", "all"), "agents[0]: agent 'a': row_text is \"all\""),
    ("errors-wrong-type", setting("agents.0.errors", 1), "agents[0].errors: must be true or false"),
    ("errors-missing", setting("agents.0.errors", ...), "agents[0].errors: missing"),
    ("rows-read-wrong-type", setting("rows_read", "64"), "rows_read: must be an integer"),
    ("rows-read-missing", setting("rows_read", ...), "rows_read: missing"),
    ("rows-read-negative", setting("rows_read", -1), "rows_read: must be >= 0"),
    ("bad-lines-wrong-type", setting("bad_lines", "none"), "bad_lines: must be a list"),
    ("bad-lines-missing", setting("bad_lines", ...), "bad_lines: missing"),
    ("bad-line-item", setting("bad_lines", [[1, "reward"]]), "bad_lines[0]: must be [line, field, reason, source file]"),
    ("bad-line-negative", setting("bad_lines", [[-1, "reward", "x", "r.jsonl"]]), "bad_lines[0]: must be [line, field, reason, source file]"),
    ("bad-line-no-source", setting("bad_lines", [[1, "reward", "x"]]), "bad_lines[0]: must be [line, field, reason, source file]"),
    ("bad-line-source-type", setting("bad_lines", [[1, "reward", "x", 7]]), "bad_lines[0]: must be [line, field, reason, source file]"),
    ("sources-wrong-type", setting("sources", "r.jsonl"), "sources: must be a list"),
    ("sources-missing", setting("sources", ...), "sources: missing"),
    ("source-item", setting("sources", [1]), "sources[0]: must be a string"),
    # the data, under a header as written
    ("negative-task-index", changing("task_index", lambda c: pc.subtract(c, 5)), "agents[0]: agent 'a': column 'task_index' holds values -"),
    ("negative-rollout-index", changing("rollout_index", lambda c: pc.negate(c)), "column 'rollout_index' holds values -"),
    ("error-code-negative", changing("error", lambda c: pc.subtract(c, pa.scalar(1, pa.int8()))), "column 'error' holds values -1"),
    ("error-code-unknown", changing("error", lambda c: pc.add(c, pa.scalar(9, pa.int8()))), "they must be within 0..4"),
    ("missing-masks", changing("masked", lambda c: pa.nulls(len(c), pa.bool_())), "column 'masked' has 18 missing values"),
    ("value-column-as-text", changing("value:reward", lambda c: pc.cast(c, pa.string())),
     "agents[0].fields[0]: names column 'value:reward' of agent 'a': the file's column is string, not double"),
    ("key-column-as-float", changing("task_index", lambda c: pc.cast(c, pa.float64())), "agents[0]: names column 'task_index'"),
]  # fmt: skip


def edited(real: tuple[dict[str, Any], pa.Table], edit: Edit, path: Path) -> Path:
    header, table = json.loads(json.dumps(real[0])), real[1]
    table = edit(header, table) or table
    pq.write_table(table.replace_schema_metadata({KEY: json.dumps(header).encode()}), path)
    return path


@pytest.mark.parametrize(("case", "edit", "named"), CASES, ids=[c[0] for c in CASES])
def test_each_edited_header_field_is_bad_input_naming_the_file_and_field(
    case: str, edit: Edit, named: str, real: tuple[dict[str, Any], pa.Table], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.parquet"
    pq.write_table(real[1], good)  # a valid partial beside it: the error names the bad one
    bad = edited(real, edit, tmp_path / f"{case}.parquet")
    started = time.perf_counter()
    code = cli.main(["merge", str(good), str(bad), "-o", str(tmp_path / "out.json"), "-q"])
    err = capsys.readouterr().err
    assert (code, err.count("\n")) == (2, 1), err
    assert err.startswith(f"error: {bad}: ") and named in err and "internal error" not in err, err
    assert time.perf_counter() - started < 10
    assert not (tmp_path / "out.json").exists()


def test_the_unedited_partial_merges(real: tuple[dict[str, Any], pa.Table], tmp_path: Path) -> None:
    """The edits above start from a partial the merge accepts."""
    path = edited(real, lambda header, table: None, tmp_path / "same.parquet")
    assert cli.main(["merge", str(path), "-o", str(tmp_path / "out.json"), "-q"]) == 0


def test_a_400m_rows_header_fails_before_allocating(real: tuple[dict[str, Any], pa.Table], tmp_path: Path) -> None:
    """The 12 KB partial declaring 400,000,000 rows (3.1 GB before failing): refused in a fresh
    process in seconds, its peak RSS far below the 3.2 GB one column of that size takes."""
    bad = edited(real, _huge_rows, tmp_path / "huge.parquet")
    probe = (
        "import re, sys\nfrom gym_metrics import cli\n"
        f"code = cli.main(['merge', {str(bad)!r}, '-o', {str(tmp_path / 'out.json')!r}])\n"
        # VmHWM, not ru_maxrss: ru_maxrss keeps the peak of the forked parent (pytest) across exec
        "hwm = int(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1))\n"
        "print(code, hwm // 1024, file=sys.stdout)\n"
    )
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))"  # old code: MemoryError, not 3 GB
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", f"{limit}\n{probe}"], capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    code, peak_mb = map(int, done.stdout.split())
    assert code == 2 and f"error: {bad}: invalid partial: agents[0].rows: 400000000 rows" in done.stderr, done.stderr
    assert elapsed < 30 and peak_mb < 600, (elapsed, peak_mb)
