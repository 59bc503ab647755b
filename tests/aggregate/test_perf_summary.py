"""Where `perf_summary`'s blocks come from (docs/metrics.md#perf-summary; its numbers against
NeMo Gym's are in test_nemo_conformance.py): the rows of the file as aggregation reads them, a
bad line's left out, the same from byte ranges read apart (Ray's partials), from several files,
and through partials."""

from __future__ import annotations

import json
from pathlib import Path

from gym_metrics.aggregate import aggregate_partials, write_partial
from gym_metrics.cli import main
from gym_metrics.rollouts import add_perf_blocks, byte_ranges, perf_blocks, read_rollouts

CASE = Path(__file__).parents[1] / "data" / "nemo_gym_extra" / "perf_blocks.jsonl"


def summaries(metrics: Path) -> dict[str, object]:
    return {e["agent_ref"]["name"]: e.get("perf_summary") for e in json.loads(metrics.read_text())}


def test_a_bad_lines_block_is_left_out_and_byte_ranges_read_apart_add_up(tmp_path: Path) -> None:
    lines = CASE.read_bytes().splitlines(keepends=True)
    bad = json.loads(lines[3]) | {"_ng_task_index": -1}  # a rollout line aggregation leaves out, holding a block
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join([*lines[:3], json.dumps(bad).encode() + b"\n", *lines[3:]]))
    whole = read_rollouts(src, on_bad_line="skip")
    assert [b.line for b in whole.bad_lines] == [4]
    blocks = perf_blocks(whole)
    assert blocks == perf_blocks(read_rollouts(CASE))  # the bad line's block is not among them
    apart: dict[str, list[object]] = {}
    first = 1
    for span in byte_ranges(src, 3):
        part = read_rollouts(src, on_bad_line="skip", span=span, first_line=first)
        for agent, found in perf_blocks(part).items():
            apart.setdefault(agent, []).extend(found)
        first += part.rows_read
    assert apart == blocks


def test_several_files_and_partials_give_one_files_summary(tmp_path: Path) -> None:
    lines = CASE.read_bytes().splitlines(keepends=True)
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    one.write_bytes(b"".join(lines[::2]))
    two.write_bytes(b"".join(lines[1::2]))
    assert main(["aggregate", str(CASE), "-o", str(tmp_path / "whole.json"), "-q"]) == 0
    assert main(["aggregate", str(one), str(two), "-o", str(tmp_path / "both.json"), "-q"]) == 0
    partials = [write_partial(tmp_path / f"{p.stem}.parquet", read_rollouts(p, keep_rows=False)) for p in (one, two)]
    merged, _, _ = aggregate_partials(partials, tmp_path / "merged.json")
    want = summaries(tmp_path / "whole.json")
    assert want["all_observed"] and summaries(tmp_path / "both.json") == want == summaries(merged)


def test_blocks_of_every_shape_are_read_as_json_reads_them(tmp_path: Path) -> None:
    """A flat block alone, a nested one, one holding a brace in a string or NaN, the key named
    twice in a line (nested too), text or a list under the key (no block): as json.loads reads
    each line."""
    shapes = [{"num_turns": 2, "prompt_tokens": 9}, {"num_turns": 1, "extra": {"a": 1}}, {"note": "a}b{", "num_turns": 3},
              {"num_turns": float("nan")}, "text", [1, 2], {"num_turns": 4}]  # fmt: skip
    rows = [{"agent_ref": {"name": f"a{i % 2}"}, "_ng_task_index": i, "_ng_rollout_index": 0, "reward": 1.0, "ng_perf": shape} for i, shape in enumerate(shapes)]
    rows[-1]["response"] = {"metadata": {"ng_perf": {"num_turns": 99}}}  # the key nested before the top-level one
    rows.append({"agent_ref": {"name": "a0"}, "_ng_task_index": 9, "_ng_rollout_index": 0, "reward": 0.0})
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    want: dict[str, list[object]] = {}
    for line in src.read_text().splitlines():
        row = json.loads(line)
        if isinstance(row.get("ng_perf"), dict):
            want.setdefault(row["agent_ref"]["name"], []).append(row["ng_perf"])
    got = perf_blocks(read_rollouts(src))
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True) and sum(map(len, got.values())) == 5


def test_blocks_read_without_the_readers_rows_skip_bad_lines_and_other_rows(tmp_path: Path) -> None:
    """`add_perf_blocks` without the reader's row list (collect's rows passed through): an empty
    file adds nothing; a line in `bad_lines`, a row that is not a rollout (no index) and a row of
    no agent without a default are left out, as aggregation leaves them out."""
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    found: dict[str, list[dict[str, object]]] = {}
    add_perf_blocks(found, empty, None)
    assert found == {}
    rows = [
        {"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "ng_perf": {"num_turns": 1}},
        {"agent_ref": {"name": "a"}, "_ng_task_index": 1, "_ng_rollout_index": 0, "ng_perf": {"num_turns": 2}},  # line 2: bad
        {"agent_ref": {"name": "a"}, "ng_perf": {"num_turns": 3}},  # no indices: not a rollout
        {"_ng_task_index": 2, "_ng_rollout_index": 0, "ng_perf": {"num_turns": 4}},  # no agent
        {"agent_ref": {"name": "b"}, "_ng_task_index": 3, "_ng_rollout_index": 0, "ng_perf": {"num_turns": 5}},
    ]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    add_perf_blocks(found, path, None, bad_lines={2})
    assert found == {"a": [{"num_turns": 1}], "b": [{"num_turns": 5}]}
    again: dict[str, list[dict[str, object]]] = {}
    add_perf_blocks(again, path, "dflt", bad_lines={2})
    assert again == {"a": [{"num_turns": 1}], "dflt": [{"num_turns": 4}], "b": [{"num_turns": 5}]}
