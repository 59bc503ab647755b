"""Input rows that already carry a reward: copied byte for byte, aggregated from the columns
read on the way in, with the same bytes as the offline aggregate of the output. And `collect`
and `aggregate` write the same metrics file for the same rollouts."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics._transport.client import ResourcesClient
from gym_metrics.aggregate import AggregateOptions, Aggregator, aggregate_file, perf_sections, write_aggregate_metrics
from gym_metrics.rollouts import perf_blocks, read_rollouts
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.errors import InvalidInputError
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.environments import SimpleResourcesServer

DATA = Path(__file__).parents[1] / "data"
SCORED = sorted((DATA / "nemo_gym").glob("*.jsonl")) + sorted((DATA / "nemo_gym_extra").glob("*.jsonl"))
ROLLOUT_FILES = sorted(p for p in DATA.rglob("*.jsonl") if p.with_name(f"{p.stem}_aggregate_metrics.json").exists())


class PassThroughRequest(BaseVerifyRequest):
    responses_create_params: Any = None  # any JSON value: the rows are returned as they came
    response: Any = None


class PassThroughResponse(BaseVerifyResponse):
    reward: float = math.nan
    row_json: str = Field(default="", exclude=True)

    def model_dump_json(self, **kwargs: Any) -> str:  # the wire form: the row's own fields
        return self.row_json


class PassThroughEnv(SimpleResourcesServer):
    """verify returns the row's own fields, whatever they are: a row without a numeric reward
    comes back unchanged (a reward of any JSON type, or none)."""

    async def verify(self, body: PassThroughRequest) -> PassThroughResponse:
        row = body.model_dump(exclude_unset=True)
        if row.get("fail"):
            raise ValueError("a rollout that failed")
        reward = row.get("reward")
        number = isinstance(reward, (int, float)) and not isinstance(reward, bool)
        return PassThroughResponse(reward=float(reward) if number else math.nan, row_json=json.dumps(row))


async def collect_file(src: Path, out: Path, env: SimpleResourcesServer | None = None, **options: Any):  # type: ignore[no-untyped-def]
    server = await start_server(env or SimpleResourcesServer(), ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            return await collect_async(client, src, out, CollectOptions(**options) if options else None)
    finally:
        await server.stop(0)


@pytest.mark.parametrize("src", ROLLOUT_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_collect_and_aggregate_write_the_same_file(src: Path, tmp_path: Path) -> None:
    """Every rollout file of tests/data, through both commands' paths: `aggregate` in-process,
    `collect` through a server (rows without a numeric reward verified by a pass-through
    environment, so they do not change, written whole with --keep-input-fields: by default the
    echoed fields would come in the request model's order): the same metrics file, byte for byte."""
    offline, _, _ = aggregate_file(shutil.copyfile(src, tmp_path / src.name), tmp_path / "offline.json")
    result = await collect_file(src, tmp_path / "out.jsonl", PassThroughEnv(), keep_input_fields=True)
    lines = [x for x in src.read_bytes().splitlines() if x.strip()]
    assert result.verified + result.passed_through == len(lines) and not result.bad_lines
    assert result.metrics_path.read_bytes() == offline.read_bytes()


async def test_the_pass_through_environment_leaves_rows_as_they_are(tmp_path: Path) -> None:
    src = DATA / "nemo_gym_extra" / "reward_types.jsonl"
    result = await collect_file(src, tmp_path / "out.jsonl", PassThroughEnv(), keep_input_fields=True)
    assert result.verified == 2  # null and no reward ("1.0", an object, a list, "pass" are scored rows: data)
    written = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    given = [json.loads(x) for x in src.read_text().splitlines()]
    assert all(written[(r["_ng_task_index"], r["_ng_rollout_index"])] == r for r in given if r.get("reward") == r.get("reward"))


async def test_a_fully_masked_task_is_dropped_by_collect_too(tmp_path: Path) -> None:
    """The input names the task, every rollout of it is masked: no group for it (as in NeMo Gym
    and `aggregate`); a task whose rollouts all failed stays."""
    src = tmp_path / "in.jsonl"
    rows = [
        {"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": 1.0, "mask_sample": t == 1}
        for t in range(3)
        for r in range(2)
    ]
    rows[4] = {**rows[4], "fail": True}  # its verify raises
    rows[5] = {**rows[5], "fail": True}
    for r in rows[4:]:
        del r["reward"]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = await collect_file(src, tmp_path / "out.jsonl", PassThroughEnv())
    groups = json.loads(result.metrics_path.read_text())[0]["group_level_metrics"]
    assert [(g["_ng_task_index"], g["num_rollouts"], g["expected_num_rollouts"]) for g in groups] == [(0, 2, 2), (2, 0, 2)]


@pytest.mark.parametrize("src", SCORED, ids=lambda p: p.stem)
async def test_scored_input_aggregates_like_the_offline_command(src: Path, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in src.read_bytes().splitlines() if line.strip()]
    numeric = all(isinstance(r.get("reward"), (int, float)) for r in rows)
    out = tmp_path / "out.jsonl"
    result = await collect_file(src, out, PassThroughEnv())
    assert result.passed_through + result.verified == len(rows)
    assert result.verified == 0 or not numeric
    # the collector expects every task the input names, per agent (a fully masked one is dropped all the same)
    rollouts = read_rollouts(out)
    offline = []
    for name, cols in rollouts.agents.items():
        agg = Aggregator(name, AggregateOptions(expected_task_indices=sorted(set(cols.task_index.tolist()))))
        agg.add(cols)
        offline.append(agg.finalize())
    perf = perf_sections(perf_blocks(rollouts), {name: len(cols) for name, cols in rollouts.agents.items()})  # (ng_perf blocks: perf_blocks)
    expected = write_aggregate_metrics(tmp_path / "offline.json", offline, perf)
    assert result.metrics_path.read_bytes() == expected.read_bytes()


async def test_mixed_input_reads_the_output_back_and_agrees(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    lines = (DATA / "nemo_gym" / "basic.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace('"reward": 0.0, ', "")  # one rollout to verify: reward from the server
    src.write_text("\n".join(lines) + "\n")
    result = await collect_file(src, tmp_path / "out.jsonl")
    assert result.verified == 1
    offline, _, _ = aggregate_file(tmp_path / "out.jsonl", tmp_path / "offline.json")
    assert result.metrics_path.read_bytes() == offline.read_bytes()


async def test_a_repeated_scored_rollout_names_its_input_lines(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    lines = (DATA / "nemo_gym" / "basic.jsonl").read_text().splitlines()
    src.write_text("\n".join([*lines, lines[2]]) + "\n")
    with pytest.raises(InvalidInputError) as exc:
        await collect_file(src, tmp_path / "out.jsonl")
    v = exc.value.violations[0]
    assert (v.row_name, v.row) == ("line", 21) and "first at line 3" in v.description
    assert not (tmp_path / "out.jsonl").exists()  # found before anything was written


async def test_copied_lines_are_the_input_bytes(tmp_path: Path) -> None:
    src = shutil.copy(DATA / "nemo_gym" / "usage.jsonl", tmp_path / "in.jsonl")
    await collect_file(Path(src), tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == Path(src).read_bytes()


async def test_scored_rows_with_perf_blocks_summarise_them_as_the_offline_command(tmp_path: Path) -> None:
    """Every row passed through (its columns kept in memory, the output not read back): the
    rows' `ng_perf` blocks are read from the output for the perf summary, as `aggregate` reads them."""
    rows = [json.loads(line) for line in (DATA / "nemo_gym" / "basic.jsonl").read_text().splitlines() if line.strip()]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({**r, "ng_perf": {"num_turns": i % 3 + 1, "prompt_tokens": 10 + i}}) + "\n" for i, r in enumerate(rows)))
    result = await collect_file(src, tmp_path / "out.jsonl")
    assert result.passed_through == len(rows) and result.verified == 0
    offline, _, _ = aggregate_file(tmp_path / "out.jsonl", tmp_path / "offline.json")
    assert "perf_summary" in json.loads(offline.read_text())[0]
    assert result.metrics_path.read_bytes() == offline.read_bytes()
