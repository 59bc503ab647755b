"""NeMo Gym's dataset blocks and task materialization, ported: `config_types.DatasetConfig`
and `task_materialization.materialize_task` give what NeMo Gym 0.7.0 gave for the same blocks
and rows (the dump, the warnings, the refusals; tests/data/nemo_gym_datasets/cases.json,
recorded by scripts/make_nemo_dataset_reference.py). And `ServerClient.load_head_server_config`
reads the config's head server, as osworld's worker discovery asks it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gym_metrics.nemo_gym.config_types import DatasetConfig
from gym_metrics.nemo_gym.global_config import get_global_config_dict, set_global_config_dict
from gym_metrics.nemo_gym.server_utils import ServerClient
from gym_metrics.nemo_gym.task_materialization import materialize_task

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import make_nemo_dataset_reference as reference  # noqa: E402

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "data" / "nemo_gym_datasets" / "cases.json").read_text())
OURS = reference.record(DatasetConfig, materialize_task)


@pytest.mark.parametrize("name", sorted(reference.BLOCKS))
def test_a_dataset_block_is_read_as_nemo_gym_reads_it(name: str) -> None:
    assert OURS["blocks"][name] == RECORDED["blocks"][name]


@pytest.mark.parametrize("name", sorted(reference.ROWS))
def test_a_row_is_materialized_as_nemo_gym_materializes_it(name: str) -> None:
    assert OURS["rows"][name] == RECORDED["rows"][name]


def test_the_head_server_comes_from_the_config_and_its_absence_is_said() -> None:
    before = dict(get_global_config_dict())
    try:
        set_global_config_dict({"head_server": {"host": "head.example", "port": 11000}})
        head = ServerClient.load_head_server_config()
        assert (head.host, head.port) == ("head.example", 11000)
        set_global_config_dict({})
        with pytest.raises(KeyError, match="names no head server"):
            ServerClient.load_head_server_config()
    finally:
        set_global_config_dict(before)
