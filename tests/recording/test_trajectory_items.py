"""A trajectory's conversation items as NeMo Gym 0.7.0's `TrajectoryRecord` dumps them
(tests/data/nemo_gym_items/items.jsonl, recorded with its models by
scripts/make_nemo_items_reference.py): every field of the item's model present, null where the
item has none, in the model's order; an item NeMo Gym would refuse or drop a field of is kept as
it is, whole, as is one whose model is the openai SDK's where the SDK is not installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.recording._items import as_dumped
from gym_metrics.recording._sdk_items import SDK_MODELS, sdk_model

CASES = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "nemo_gym_items" / "items.jsonl").read_text().splitlines()]


def _dropped_or_refused(case: dict[str, Any]) -> bool:
    """NeMo Gym refused the item, or its dump lacks a field of the item or of one of its parts."""
    item, dumped = case["item"], case["dumped"]
    if dumped is None or not item.keys() <= dumped.keys():
        return True
    lists = [(item[k], dumped[k]) for k in ("content", "summary", "output") if isinstance(item.get(k), list)]
    return any(isinstance(p, dict) and not p.keys() <= d.keys() for given, kept in lists for p, d in zip(given, kept))


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_an_item_is_what_nemo_gyms_model_dumps(case: dict[str, Any]) -> None:
    ours = as_dumped(case["item"])
    kind = case["item"].get("type")
    if kind in SDK_MODELS and sdk_model(kind) is None:  # its model is the openai SDK's, not installed here
        assert ours == case["item"]
    elif _dropped_or_refused(case):
        assert ours == case["item"]  # kept whole: NeMo Gym would refuse it or lose a field
    else:
        assert json.dumps(ours) == json.dumps(case["dumped"])  # keys in the model's order too


def test_the_reference_reaches_every_rule() -> None:
    kept = [c for c in CASES if not _dropped_or_refused(c)]
    assert len(kept) >= 20 and len(CASES) - len(kept) >= 5
    added = {k for c in kept for k, v in c["dumped"].items() if v is None and k not in c["item"]}
    assert {"phase", "id", "status", "namespace", "encrypted_content", "content", "routed_experts"} <= added
    assert any(c["dumped"] is None for c in CASES)  # one NeMo Gym refuses
