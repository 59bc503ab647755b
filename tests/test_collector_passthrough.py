"""Input rows that already carry a reward: copied byte for byte, aggregated from the columns
read on the way in, with the same bytes as the offline aggregate of the output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gym_metrics._transport import ServerConfig, start_server
from gym_metrics._transport._client import ResourcesClient
from gym_metrics.aggregate import AggregateOptions, Aggregator, aggregate_file, read_rollouts, write_aggregate_metrics
from gym_metrics.collector import collect_async
from gym_metrics.errors import InvalidInputError
from gym_metrics.server import SimpleResourcesServer

DATA = Path(__file__).parent / "data"
SCORED = sorted((DATA / "nemo_gym").glob("*.jsonl")) + sorted((DATA / "nemo_gym_extra").glob("*.jsonl"))


async def collect_file(src: Path, out: Path):  # type: ignore[no-untyped-def]
    server = await start_server(SimpleResourcesServer(), ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            return await collect_async(client, src, out)
    finally:
        await server.stop(0)


@pytest.mark.parametrize("src", SCORED, ids=lambda p: p.stem)
async def test_scored_input_aggregates_like_the_offline_command(src: Path, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in src.read_bytes().splitlines() if line.strip()]
    if not all(isinstance(r.get("reward"), (int, float)) and "_ng_task_index" in r for r in rows):
        pytest.skip("some rows have no reward (they would be verified) or use alias indices")
    out = tmp_path / "out.jsonl"
    result = await collect_file(src, out)
    assert result.verified == 0 and result.passed_through == len([x for x in src.read_bytes().splitlines() if x.strip()])
    # the collector expects every task the input names, per agent (fully masked ones too)
    rollouts = read_rollouts(out)
    offline = []
    for name, cols in rollouts.agents.items():
        agg = Aggregator(name, AggregateOptions(expected_task_indices=sorted(set(cols.task_index.tolist()))))
        agg.add(cols)
        offline.append(agg.finalize())
    expected = write_aggregate_metrics(tmp_path / "offline.json", offline)
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
    assert (v.row_name, v.row) == ("input line", 21) and "first at input line 3" in v.description


async def test_copied_lines_are_the_input_bytes(tmp_path: Path) -> None:
    src = shutil.copy(DATA / "nemo_gym" / "usage.jsonl", tmp_path / "in.jsonl")
    await collect_file(Path(src), tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == Path(src).read_bytes()
