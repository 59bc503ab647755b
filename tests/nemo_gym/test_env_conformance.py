"""NeMo Gym 0.7.0's own environments, ported by rewriting their imports and nothing else, served by
gym-metrics from their config YAML and collected: every row's verify answer and every key of the
metrics file equal NeMo Gym's (tests/data/nemo_gym_envs/, recorded in a nemo-gym venv by
scripts/make_nemo_env_reference.py; the echoed request and response are compared by their use,
not their bytes: see its README)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gym_metrics._transport.client import ResourcesClient
from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import load_config_server

sys.path.insert(0, str(Path(__file__).parents[1] / "aggregate"))
from test_nemo_conformance import compare_files  # noqa: E402

DATA = Path(__file__).parents[1] / "data" / "nemo_gym_envs"
ENVS = sorted(p.name for p in DATA.iterdir() if (p / "meta.json").is_file())
ECHOED = ("responses_create_params", "response")

pytestmark = pytest.mark.slow


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_at_least_ten_environments_are_recorded() -> None:
    assert len(ENVS) >= 10, ENVS


@pytest.mark.parametrize("env", ENVS)
async def test_serve_config_and_collect_equal_nemo_gym(env: str, ported: Any, tmp_path: Path) -> None:
    meta = json.loads((DATA / env / "meta.json").read_text())
    folder = ported.folder(meta["env"])
    config = folder / "configs" / Path(meta["config_file"]).name
    server = await start_server(load_config_server(config, name=meta["server_instance"]), ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            result = await collect_async(client, DATA / env / "rollouts.jsonl", tmp_path / "out.jsonl", CollectOptions())
    finally:
        await server.stop(0)
    written, expected = _read(tmp_path / "out.jsonl"), _read(DATA / env / "verify.jsonl")
    assert len(written) == len(expected)
    by_key = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in written}  # written as they complete; paired by key
    rows = [by_key[(r["_ng_task_index"], r["_ng_rollout_index"])] for r in _read(DATA / env / "rollouts.jsonl")]
    for i, (ours, theirs) in enumerate(zip(rows, expected)):
        assert ours["reward"] == pytest.approx(theirs["reward"], rel=1e-12, abs=0), (i, ours, theirs)
        for key, value in theirs.items():
            if key != "_echo_sha256":
                assert ours.get(key) == value, (i, key, ours.get(key), value)
        assert all(key in ours for key in ECHOED if key in theirs.get("_echo_sha256", {}))
    reference = json.loads((DATA / env / "aggregate_metrics.json").read_text())
    assert compare_files(reference, json.loads(result.metrics_path.read_text())) is None


async def test_an_environments_layout_config_serves_as_gym_env_start_does(ported: Any, tmp_path: Path) -> None:
    """`environments/<name>/config.yaml` (NeMo Gym 0.7.0's `gym env start --environment NAME`
    layout: the config beside its data, the server's code in resources_servers/<impl>/) serves as
    its resources_servers config does: arc_agi's recorded example rollouts verify to the rewards
    NeMo Gym recorded in them."""
    import zipfile

    ported.folder("arc_agi")
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(ported.root, [m for m in wheel.namelist() if m.startswith("environments/arc_agi/")])
    recorded = ported.root / "environments" / "arc_agi" / "data" / "example_rollouts.jsonl"
    server = await start_server(load_config_server(ported.root / "environments" / "arc_agi" / "config.yaml"), ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            options = CollectOptions(reverify=True, default_agent="arc_agi_simple_agent")  # (`gym eval run --agent`)
            await collect_async(client, recorded, tmp_path / "out.jsonl", options)
    finally:
        await server.stop(0)
    expected = [row["reward"] for row in _read(recorded)]
    assert [row["reward"] for row in _read(tmp_path / "out.jsonl")] == expected and len(expected) == 5
