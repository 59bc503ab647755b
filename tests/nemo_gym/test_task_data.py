"""NeMo Gym's task-data schemas, ported: gym_metrics.nemo_gym.task_data loads real `task_data.py`
files, validates, normalizes and reports rows, refuses broken schema modules and finds server
folders exactly as NeMo Gym 0.7.0's `nemo_gym.task_data` did for the same cases
(tests/data/nemo_gym_task_data/cases.json, recorded by scripts/make_nemo_task_data_reference.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.nemo_gym import task_data
from gym_metrics.nemo_gym.episode_types import is_materialized_task_row

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import make_nemo_task_data_reference as reference  # noqa: E402

RECORDED: dict[str, Any] = json.loads((Path(__file__).resolve().parents[1] / "data" / "nemo_gym_task_data" / "cases.json").read_text())


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return reference.record(task_data, is_materialized_task_row, tmp_path_factory.mktemp("task_data"))


def test_the_public_names_signatures_and_constants_are_nemo_gym_s(ours: dict[str, Any]) -> None:
    assert ours["public"] == RECORDED["public"]


@pytest.mark.parametrize("name", sorted(RECORDED["loads"]))
def test_loading_a_schema_module_answers_or_raises_as_nemo_gym(ours: dict[str, Any], name: str) -> None:
    assert ours["loads"][name] == RECORDED["loads"][name]


@pytest.mark.parametrize("name", sorted(RECORDED["schemas"]))
def test_legacy_location_fields_are_nemo_gym_s(ours: dict[str, Any], name: str) -> None:
    assert ours["schemas"][name]["legacy_fields"] == RECORDED["schemas"][name]["legacy_fields"]


@pytest.mark.parametrize("name", sorted(RECORDED["schemas"]))
@pytest.mark.parametrize("row", range(len(reference.ROWS)))
def test_each_row_s_report_is_nemo_gym_s(ours: dict[str, Any], name: str, row: int) -> None:
    assert ours["schemas"][name]["alone"][row] == RECORDED["schemas"][name]["alone"][row]


@pytest.mark.parametrize("name", sorted(RECORDED["schemas"]))
def test_a_whole_file_s_report_is_nemo_gym_s(ours: dict[str, Any], name: str) -> None:
    assert ours["schemas"][name]["together"] == RECORDED["schemas"][name]["together"]
    assert ours["schemas"][name]["jsonl"] == RECORDED["schemas"][name]["jsonl"]


def test_normalized_fields_and_materialized_rows_are_nemo_gym_s(ours: dict[str, Any]) -> None:
    assert ours["normalized"] == RECORDED["normalized"]
    assert ours["materialized"] == RECORDED["materialized"]


def test_server_folders_are_found_where_nemo_gym_finds_them(ours: dict[str, Any]) -> None:
    assert ours["server_dirs"] == RECORDED["server_dirs"]
