"""`collect` against NeMo Gym 0.7.0's own collection of its `string_match`, `mcqa` and `xlam_fc`
environments (issue 24, item 4): the same rows and the same metrics file (every key and value
but NeMo Gym's placeholder `sample`, as tests/aggregate/test_nemo_conformance.py compares).

tests/data/nemo_gym_collect/<case>/ was recorded by scripts/make_nemo_collection_reference.py
with nemo-gym installed (it also runs those environments live inside gym-metrics and compares
per-row rewards). Here the environment's answers are replayed: a server whose `verify` returns,
for each input line, what NeMo Gym's agent returned for it, so what is tested is what `collect`
makes of them: which fields a row holds, and so what is aggregated and sampled.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics._transport.client import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.environments import SimpleResourcesServer

sys.path.insert(0, str(Path(__file__).parents[1] / "aggregate"))
from test_nemo_conformance import compare_files  # noqa: E402

DATA = Path(__file__).parents[1] / "data" / "nemo_gym_collect"
CASES = sorted(p.name for p in DATA.iterdir() if (p / "input.jsonl").is_file())


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


class Replay(SimpleResourcesServer):
    """Answers each rollout with what NeMo Gym's agent answered for it (by task index)."""

    def __init__(self, answers: dict[int, dict[str, Any]]) -> None:
        self.answers = answers

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        task = (body.model_extra or {})["_ng_task_index"]
        return BaseVerifyResponse.model_validate(self.answers[task])


async def _collect(case: str, tmp_path: Path, **options: Any) -> tuple[list[dict[str, Any]], Any]:
    folder = DATA / case
    rows = _read(folder / "input.jsonl")
    answers = {row["_ng_task_index"]: answer for row, answer in zip(rows, _read(folder / "verify_responses.jsonl"))}
    server = await start_server(Replay(answers), ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            result = await collect_async(client, folder / "input.jsonl", tmp_path / "out.jsonl", CollectOptions(**options))
    finally:
        await server.stop(0)
    return _read(tmp_path / "out.jsonl"), json.loads(result.metrics_path.read_text())


def test_the_cases_are_there() -> None:
    assert CASES == ["mcqa", "string_match", "xlam_fc", "xlam_fc_rescore"]


@pytest.mark.parametrize("case", CASES)
async def test_collect_writes_and_aggregates_what_nemo_gym_does(case: str, tmp_path: Path) -> None:
    rows, metrics = await _collect(case, tmp_path)
    assert rows == _read(DATA / case / "rollouts.jsonl")
    assert compare_files(json.loads((DATA / case / "aggregate_metrics.json").read_text()), metrics) is None


@pytest.mark.parametrize("case", ["string_match", "xlam_fc"])
async def test_keep_input_fields_aggregates_the_dataset_columns_nemo_gym_does_not(case: str, tmp_path: Path) -> None:
    """What collect wrote before (the whole input row): `case_sensitive` and `id` were
    aggregated, and the metrics file was not NeMo Gym's."""
    rows, metrics = await _collect(case, tmp_path, keep_input_fields=True)
    column = {"string_match": "case_sensitive", "xlam_fc": "id"}[case]
    assert all(column in r for r in rows) and f"mean/{column}" in metrics[0]["agent_metrics"]
    assert compare_files(json.loads((DATA / case / "aggregate_metrics.json").read_text()), metrics) is not None
