"""Partials and their merge (issue 15 item 1): for any split of a rollouts file into shards (by
task, by line range, uneven, empty shards, shards merged in any order) the merged metrics file
is byte-identical to the one a single process writes; partials of another format version are
refused."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from gym_metrics.aggregate import AggregateOptions, aggregate_file, aggregate_partials, aggregate_rollouts, partial_rows, write_partial
from gym_metrics.rollouts import read_rollouts
from gym_metrics.errors import GymMetricsError, InvalidInputError

DATA = Path(__file__).parents[1] / "data"
CASES = sorted(p for d in ("nemo_gym", "nemo_gym_extra") for p in (DATA / d).glob("*.jsonl"))


def generated(rng: random.Random) -> list[bytes]:
    """Rows of 2-3 agents over tasks of uneven sizes, interleaved as a collector writes them:
    ints, floats, bools, missing and non-numeric values, masked and failed rows."""
    lines = []
    for agent in ("a", "b", "c")[: rng.randint(2, 3)]:
        for task in rng.sample(range(40), rng.randint(5, 25)):
            for rollout in range(rng.randint(1, 6)):
                row: dict[str, Any] = {"agent_ref": {"name": agent}, "_ng_task_index": task, "_ng_rollout_index": rollout}
                row["reward"] = rng.choice([0.0, 1.0, 0.5, 1, True, 0.25 * rng.randint(0, 4)])
                if rng.random() < 0.8:
                    row["latency_s"] = round(rng.uniform(0, 5), rng.randint(0, 6))
                if rng.random() < 0.3:
                    row["tokens"] = rng.randint(0, 10**6) if rng.random() < 0.9 else "many"
                if rng.random() < 0.05:
                    row["mask_sample"] = True
                if rng.random() < 0.05:
                    row["_gm_error"] = {"kind": "verify", "message": "boom"}
                row["answer"] = f"text {rng.random()}"
                lines.append(json.dumps(row).encode() + b"\n")
    rng.shuffle(lines)
    return lines


def splits(lines: list[bytes], rng: random.Random) -> list[list[bytes]]:
    """Three shardings: by line range (with an empty shard), by task, and rows dealt at random."""
    cut = sorted(rng.randint(0, len(lines)) for _ in range(3))
    by_range = [lines[a:b] for a, b in zip([0, *cut], [*cut, len(lines)])] + [[]]
    def task_of(line: bytes) -> Any:
        try:
            row = json.loads(line)
            return row.get("_ng_task_index", row.get("task_index")) if isinstance(row, dict) else None
        except ValueError:
            return None
    by_task: list[list[bytes]] = [[], [], []]
    for line in lines:
        by_task[hash(str(task_of(line))) % 3].append(line)
    dealt: list[list[bytes]] = [[], []]
    for line in lines:
        dealt[rng.randint(0, 1)].append(line)
    return [by_range, by_task, dealt]


def merged_equals_single(tmp_path: Path, lines: list[bytes], shards: list[list[bytes]], **kwargs: Any) -> bool | None:
    """True when the merged file equals the single-process one, None when the input is refused
    both ways (then both must refuse)."""
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(b"".join(lines))
    try:
        single, _, _ = aggregate_file(whole, tmp_path / "single.json", keep_rows=False, **kwargs)
    except GymMetricsError:
        single = None
    partials = []
    try:
        for i, shard in enumerate(shards):
            path = tmp_path / f"shard{i}.jsonl"
            path.write_bytes(b"".join(shard))
            on_bad = kwargs.get("on_bad_line", "fail")
            partials.append(write_partial(tmp_path / f"shard{i}.parquet", read_rollouts(path, on_bad_line=on_bad, keep_rows=False)))
        options = {k: v for k, v in kwargs.items() if k != "on_bad_line"}
        merged, _, _ = aggregate_partials(partials, tmp_path / "merged.json", **options)
    except GymMetricsError:
        assert single is None, "the merge refused what one process accepted"
        return None
    assert single is not None, "the merge accepted what one process refused"
    return single.read_bytes() == merged.read_bytes()


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_conformance_case_merges_to_the_same_bytes(case: Path, tmp_path: Path) -> None:
    rng = random.Random(case.stem)
    lines = case.read_bytes().splitlines(keepends=True)
    for shards in splits(lines, rng):
        rng.shuffle(shards)
        assert merged_equals_single(tmp_path, lines, shards, on_bad_line="skip") in (True, None)


@pytest.mark.parametrize("seed", range(12))
def test_random_files_and_splits_merge_to_the_same_bytes(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    lines = generated(rng)
    options = AggregateOptions(
        include_rollout_infos=rng.random() < 0.7, expected_rollouts_per_task=rng.choice([0, 4]),
        count_errors_as_zero=rng.random() < 0.5,
    )  # fmt: skip
    for shards in splits(lines, rng):
        rng.shuffle(shards)
        assert merged_equals_single(tmp_path, lines, shards, options=options) is True


def test_economics_and_several_inputs_do_not_depend_on_row_order(tmp_path: Path) -> None:
    from gym_metrics.reducers import economics

    rng = random.Random(7)
    lines = [
        json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": rng.random(),
                    "response": {"usage": {"input_tokens": rng.randint(1, 9999), "output_tokens": rng.randint(1, 999)}},
                    "cost_usd": rng.random() / 7}).encode() + b"\n"  # fmt: skip
        for t in range(50) for r in range(4)
    ]
    rng.shuffle(lines)
    extra = lambda name, cols: {"economics": economics(cols)}  # noqa: E731
    for shards in splits(lines, rng):
        assert merged_equals_single(tmp_path, lines, shards, extra=extra) is True


def test_a_partial_keeps_sample_rows_only_unless_asked(tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"".join(generated(random.Random(1))))
    write_partial(tmp_path / "p.parquet", read_rollouts(src, keep_rows=False))
    assert set(partial_rows(tmp_path / "p.parquet").values()) == {"samples"}
    write_partial(tmp_path / "all.parquet", read_rollouts(src, keep_rows=True))
    assert set(partial_rows(tmp_path / "all.parquet").values()) == {"all"}
    assert (tmp_path / "p.parquet").stat().st_size < (tmp_path / "all.parquet").stat().st_size


def test_partials_of_another_version_or_no_partial_are_refused(tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"".join(generated(random.Random(2))))
    path = write_partial(tmp_path / "p.parquet", read_rollouts(src, keep_rows=False))
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"gym_metrics.partial"])
    meta["version"] = 99
    pq.write_table(table.replace_schema_metadata({b"gym_metrics.partial": json.dumps(meta).encode()}), tmp_path / "old.parquet")
    with pytest.raises(InvalidInputError, match="partial format version 99, this gym-metrics reads version 2"):
        aggregate_partials([path, tmp_path / "old.parquet"], tmp_path / "out.json")
    pq.write_table(pq.read_table(path).replace_schema_metadata({}), tmp_path / "plain.parquet")
    with pytest.raises(InvalidInputError, match="not a gym-metrics partial"):
        aggregate_partials([tmp_path / "plain.parquet"], tmp_path / "out.json")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(InvalidInputError, match="not a readable partial"):
        aggregate_partials([tmp_path / "junk.parquet"], tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()


def test_duplicate_keys_across_shards_are_refused(tmp_path: Path) -> None:
    row = json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}).encode() + b"\n"
    assert merged_equals_single(tmp_path, [row, row], [[row], [row]]) is None  # both refuse


def _partial_of(tmp_path: Path, name: str, keys: list[tuple[str, int, int]]) -> Path:
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps({"agent_ref": {"name": a}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": 1.0}) + "\n" for a, t, r in keys))
    return write_partial(tmp_path / f"{name}.parquet", read_rollouts(src, keep_rows=False))


@pytest.mark.parametrize("hooked", [False, True], ids=["ranged", "row_hook"])
def test_keys_repeated_across_partials_are_named_by_file_agent_and_row(tmp_path: Path, hooked: bool) -> None:
    """The merged columns keep no file names: the refusal reads the partials' keys again to say
    which files and rows hold each repeated key (it named only the key)."""
    p1 = _partial_of(tmp_path, "p1", [("a", 0, 0), ("a", 1, 0), ("b", 0, 0)])
    p2 = _partial_of(tmp_path, "p2", [("b", 0, 1), ("a", 2, 0), ("a", 1, 0)])  # rows count within the agent: (a, 1, 0) is row 1 in both
    hooks = {"compute_metrics": lambda tasks: {}} if hooked else {}
    with pytest.raises(InvalidInputError) as caught:
        aggregate_partials([p1, p2], tmp_path / "out.json", **hooks)
    assert caught.value.message == "1 duplicate (task, rollout) keys across the partial files"
    [v] = caught.value.violations
    assert (v.row_name, v.row) == (f"{p2} row", 1)
    assert v.description == f"duplicate key (task 1, rollout 0) of agent 'a', also at {p1} row 1"
    assert not (tmp_path / "out.json").exists()


def test_a_partial_repeating_its_own_key_is_named(tmp_path: Path) -> None:
    p1 = _partial_of(tmp_path, "p1", [("a", 0, 0), ("a", 0, 0)])  # --partial-out checks no keys
    p2 = _partial_of(tmp_path, "p2", [("a", 1, 0)])
    with pytest.raises(InvalidInputError, match=f"^{p1}: agent 'a': 1 duplicate"):
        aggregate_partials([p2, p1], tmp_path / "out.json")


def test_a_file_given_twice_is_refused_before_it_is_read(tmp_path: Path) -> None:
    p1 = _partial_of(tmp_path, "p1", [("a", 0, 0)])
    (tmp_path / "link.parquet").symlink_to(p1)
    with pytest.raises(InvalidInputError, match="a file is given twice") as caught:
        aggregate_partials([p1, tmp_path / "link.parquet"], tmp_path / "out.json")
    assert [(v.field, v.description) for v in caught.value.violations] == [
        ("partials[1]", f"{tmp_path / 'link.parquet'} is the same file as partials[0] ({p1})")
    ]


@pytest.mark.parametrize("pieces", [1, 3, 7, 50])
def test_byte_ranges_read_apart_are_the_file(tmp_path: Path, pieces: int) -> None:
    """Whole-line byte ranges read on their own (as Ray tasks do), numbered from their first
    line, make the file's rows and bad lines exactly."""
    from gym_metrics.rollouts import byte_ranges, count_lines
    from gym_metrics.aggregate import combine

    lines = generated(random.Random(pieces))
    lines.insert(5, b"{not json\n")
    lines.append(b'{"agent_ref": {"name": "a"}, "_ng_task_index": 999, "_ng_rollout_index": 0, "reward": 1}')  # no newline
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"".join(lines))
    ranges = byte_ranges(src, pieces)
    assert ranges[0][0] == 0 and ranges[-1][1] == src.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    counts = [count_lines(src, r) for r in ranges]
    assert sum(counts) == len(lines)
    starts = np.cumsum([1, *counts[:-1]])
    parts = [read_rollouts(src, on_bad_line="skip", keep_rows=False, span=r, first_line=int(s)) for r, s in zip(ranges, starts)]
    whole = read_rollouts(src, on_bad_line="skip", keep_rows=False)
    assert [str(b) for p in parts for b in p.bad_lines] == [str(b) for b in whole.bad_lines] == ["line 6: json: " + whole.bad_lines[0].reason]
    aggregate_rollouts(combine(parts), tmp_path / "parts.json")
    aggregate_file(src, tmp_path / "whole.json", on_bad_line="skip")
    assert (tmp_path / "parts.json").read_bytes() == (tmp_path / "whole.json").read_bytes()


@pytest.fixture
def tiny_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge's ranges, slices and the writer's chunks a few rows long, and render workers
    forked for any size, so every carry and range boundary of the ranged merge is crossed."""
    from gym_metrics.aggregate.render import _forked, _output
    from gym_metrics.aggregate.shards import _ranged_render, _ranged_stats

    monkeypatch.setattr(_ranged_render, "RANGE_ROWS", 3)
    monkeypatch.setattr(_ranged_stats, "SLICE_ROWS", 2)
    monkeypatch.setattr(_output, "CHUNK", 2)
    monkeypatch.setattr(_forked, "MIN_ROLLOUTS_PER_WORKER", 1)


@pytest.mark.parametrize("seed", range(10))
def test_the_ranged_merge_in_tiny_ranges_is_the_single_process_file(seed: int, tmp_path: Path, tiny_ranges: None) -> None:
    rng = random.Random(100 + seed)
    lines = generated(rng)
    options = AggregateOptions(
        include_rollout_infos=rng.random() < 0.7, expected_rollouts_per_task=rng.choice([0, 4]),
        count_errors_as_zero=rng.random() < 0.5, include_samples=rng.random() < 0.8,
        expected_task_indices=rng.sample(range(60), rng.randint(0, 8)),
    )  # fmt: skip
    for shards in splits(lines, rng):
        rng.shuffle(shards)
        assert merged_equals_single(tmp_path, lines, shards, options=options) is True


@pytest.mark.parametrize("case", CASES[::3], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_conformance_cases_merge_in_tiny_ranges(case: Path, tmp_path: Path, tiny_ranges: None) -> None:
    rng = random.Random(case.stem)
    lines = case.read_bytes().splitlines(keepends=True)
    shards = splits(lines, rng)[2]
    assert merged_equals_single(tmp_path, lines, shards, on_bad_line="skip") in (True, None)


def test_sums_past_the_float_limit_merge_to_the_same_bytes(tmp_path: Path, tiny_ranges: None) -> None:
    """A sum that overflows makes the engine rescale every group of its call: the ranged merge
    then computes that field over all rows, as the engine does."""
    rng = random.Random(3)
    lines = []
    for task in range(12):
        for rollout in range(3):
            big = 1.7e308 * rng.choice([1, -1]) if task in (4, 9) else rng.uniform(-1e3, 1e3)
            row = {"agent_ref": {"name": "a"}, "_ng_task_index": task, "_ng_rollout_index": rollout, "reward": big,
                   "score": 1e200 * rng.random(), "latency_s": rng.random()}  # fmt: skip
            lines.append(json.dumps(row).encode() + b"\n")
    rng.shuffle(lines)
    for shards in splits(lines, rng):
        assert merged_equals_single(tmp_path, lines, shards) is True


def test_hooks_the_ranged_merge_takes_and_those_it_leaves_to_the_engine(tmp_path: Path, tiny_ranges: None) -> None:
    from gym_metrics.reducers import economics

    rng = random.Random(5)
    lines = generated(rng)
    hooks: dict[str, Any] = {
        "get_key_metrics": lambda m: {k: v for k, v in m.items() if k.startswith(("mean/", "std/"))},
        "column_metrics": lambda cols: {"rows_seen": len(cols), "tasks_seen": len(set(cols.task_index.tolist()))},
        "extra": lambda name, cols: {"economics": economics(cols)},
    }
    for shards in splits(lines, rng):
        assert merged_equals_single(tmp_path, lines, shards, **hooks) is True
    columnar = lambda m: {"fields": sorted(m.values)}  # noqa: E731  (left to the one-process engine)
    assert merged_equals_single(tmp_path, lines, splits(lines, rng)[0], compute_metrics_columns=columnar) is True


def test_the_ranged_merge_consumes_the_rows(tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"".join(generated(random.Random(4))))
    path = write_partial(tmp_path / "p.parquet", read_rollouts(src, keep_rows=False))
    out, results, rollouts = aggregate_partials([path], tmp_path / "out.json")
    assert rollouts.agents == {} and rollouts.rows_read == len(src.read_bytes().splitlines())
    assert [r.agent_name for r in results] == sorted({json.loads(x)["agent_ref"]["name"] for x in src.read_bytes().splitlines()})
    assert all(len(r.groups) and not r.groups.stats for r in results)


@pytest.mark.parametrize("task_base, repeats", [(0, 3), (40_000, 200), (3_000_000_000, 2)])
def test_the_ranged_merge_with_wide_keys(task_base: int, repeats: int, tmp_path: Path, tiny_ranges: None) -> None:
    """Keys read into int8, int16, int32 or int64 (narrow_keys) render as the int64 keys do."""
    rng = random.Random(task_base)
    lines = []
    for task in rng.sample(range(task_base, task_base + 500), 6):
        for rollout in rng.sample(range(repeats), min(repeats, 4)):
            row = {"agent_ref": {"name": "a"}, "_ng_task_index": task, "_ng_rollout_index": rollout, "reward": rng.random()}
            lines.append(json.dumps(row).encode() + b"\n")
    rng.shuffle(lines)
    for shards in splits(lines, rng):
        assert merged_equals_single(tmp_path, lines, shards, options=AggregateOptions(expected_task_indices=[task_base + 777])) is True


def test_agents_with_nothing_measured_merge_to_the_same_bytes(tmp_path: Path, tiny_ranges: None) -> None:
    """An agent every rollout of which is masked or failed: no stats, only counts and the
    expected and failed tasks' empty groups."""
    lines = []
    for task in range(7):
        for rollout in range(3):
            row: dict[str, Any] = {"agent_ref": {"name": "m"}, "_ng_task_index": task, "_ng_rollout_index": rollout, "reward": 1.0}
            row["mask_sample" if task % 2 else "_gm_error"] = True if task % 2 else {"kind": "verify", "message": "x"}
            lines.append(json.dumps(row).encode() + b"\n")
    lines.append(json.dumps({"agent_ref": {"name": "n"}, "_ng_task_index": 3, "_ng_rollout_index": 0, "reward": 0.5}).encode() + b"\n")
    rng = random.Random(9)
    rng.shuffle(lines)
    for as_zero in (False, True):
        options = AggregateOptions(expected_rollouts_per_task=3, expected_task_indices=[1, 20], count_errors_as_zero=as_zero)
        for shards in splits(lines, rng):
            assert merged_equals_single(tmp_path, lines, shards, options=options) is True


def test_signed_zeros_merge_to_the_same_bytes(tmp_path: Path, tiny_ranges: None) -> None:
    """-0.0 and 0.0 compare equal: min, max and medians of a range must pick the one the whole
    column's computation picks."""
    rng = random.Random(1)
    lines = []
    for task in range(30):
        for rollout in range(rng.randint(1, 9)):
            row = {"agent_ref": {"name": "a"}, "_ng_task_index": task, "_ng_rollout_index": rollout,
                   "reward": rng.choice([0.0, -0.0, 1.0, -1.0]), "x": rng.choice([-0.0, 0.0])}  # fmt: skip
            lines.append(json.dumps(row).encode() + b"\n")
    for shards in splits(lines, rng):
        assert merged_equals_single(tmp_path, lines, shards) is True


def test_a_partial_damaged_in_its_data_is_refused_naming_it_never_merged(tmp_path: Path) -> None:
    """Partials carry page checksums: one bit flipped in any data page is refused naming the
    file (exit 2), where about one flip in five merged into other numbers (exit 0) and others
    were internal errors or messages naming no file."""
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"".join(generated(random.Random(3))))
    path = write_partial(tmp_path / "p.parquet", read_rollouts(src, keep_rows=False))
    good = pq.ParquetFile(path).metadata
    pages = [good.row_group(g).column(c) for g in range(good.num_row_groups) for c in range(good.num_columns)]
    data = bytearray(path.read_bytes())
    outcomes = []
    for k, column in enumerate(pages[:12]):  # a byte inside each of the first columns' data
        flipped = bytearray(data)
        at = column.data_page_offset + column.total_compressed_size - 2
        flipped[at] ^= 1 << (k % 8)
        damaged = tmp_path / f"d{k}.parquet"
        damaged.write_bytes(bytes(flipped))
        try:
            aggregate_partials([damaged], tmp_path / f"out{k}.json")
            outcomes.append("merged")
        except InvalidInputError as exc:
            assert str(damaged) in str(exc) + " ".join(v.description for v in exc.violations), exc
            outcomes.append("refused")
    assert outcomes == ["refused"] * len(outcomes), outcomes
