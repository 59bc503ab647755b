"""Samples without a parse (gym_metrics/aggregate/_canonical.py, _minify.c): every text the C
minifier vouches for is exactly orjson.dumps of the row parsed minus its index keys and its
recording (`ng_trajectory`, ...), and it vouches for the rows writers usually make."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from gym_metrics._util.jsonio import loads
from gym_metrics.aggregate import _canonical, aggregate_file
from gym_metrics.aggregate._canonical import sample_texts_of
from gym_metrics.rollouts import RECORDING_KEYS

from _ci import need_native

NATIVE = _canonical._minify
needs_native = pytest.mark.usefixtures("minifier_built")


@pytest.fixture
def minifier_built() -> None:
    need_native(NATIVE, "gym_metrics.aggregate._minify (the C minifier)")

WORDS = ["a", "x y", "é", "中文", "\U0001f600", 'q"uote', "back\\slash", "tab\tnl\n", "\x01ctl", "/", "\u2028", ""]
NUMBERS: list[Any] = [0, -1, 7, 2**53 + 1, -(2**62), 0.5, -0.0, 1.0, 1e16, 1e-7, 0.1 + 0.2, 5e-324, 1.5e300, 123.456]


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice(NUMBERS)
    if kind == 1:
        return rng.choice(WORDS)
    if kind == 2:
        return rng.choice([True, False, None])
    if kind == 3:
        return rng.uniform(-1e6, 1e6)
    if kind in (4, 5):
        keys = [rng.choice(WORDS + ["_ng_task_index", "k"]) + str(i) for i in range(rng.randrange(4))]
        return {k: value(rng, depth + 1) for k in keys}
    return [value(rng, depth + 1) for _ in range(rng.randrange(4))]


def row_text(rng: random.Random) -> bytes:
    row: dict[str, Any] = {"_ng_task_index": rng.randrange(100), "_ng_rollout_index": rng.randrange(8)}
    for i in range(rng.randrange(1, 6)):
        row[rng.choice(["reward", "k", "é", "agent_ref", "s"]) + str(i)] = value(rng)
    for key in RECORDING_KEYS:
        if rng.random() < 0.2:
            row[key] = value(rng, 1)
    keys = list(row)
    rng.shuffle(keys)
    row = {k: row[k] for k in keys}
    style = rng.randrange(5)
    if style == 0:
        return orjson.dumps(row)
    if style == 1:
        return json.dumps(row).encode()  # ", " and ": ", non-ASCII as \\u escapes
    if style == 2:
        return json.dumps(row, ensure_ascii=False, indent=rng.choice([None, 1])).encode()
    if style == 3:  # numbers written the long way, a repeated key, NaN, trailing bytes
        text = json.dumps(row, ensure_ascii=False)
        return rng.choice([
            text.replace("0.5", "0.50").replace("1e-07", "1E-7"),
            text[:-1] + ', "k0": 1}',
            text[:-1] + ', "n": NaN}',
            text + " x",
            text[: len(text) // 2],
            text.replace(": 7", ": -0"),
            text.replace(": 0,", ": 12345678901234567890,"),
        ]).encode()  # fmt: skip
    return b"  " + orjson.dumps(row).replace(b":", b" : ").replace(b",", b" ,\t") + b" \r"


def expected_sample(text: bytes) -> bytes | None:
    """What the Python path makes of the row: None where it refuses the row itself."""
    try:
        row = loads(text)
    except ValueError:
        return None
    if not isinstance(row, dict):
        return None
    for key in ("_ng_task_index", "_ng_rollout_index", "ng_trajectory", "ng_model_call_capture", "ng_agent_observations"):
        row.pop(key, None)
    try:
        return orjson.dumps(row)
    except TypeError:  # an integer beyond 64 bits
        return None


@needs_native
@pytest.mark.parametrize("seed", range(6))
def test_every_vouched_text_is_orjsons_own(seed: int) -> None:
    rng = random.Random(seed)
    rows = [row_text(rng) for _ in range(400)]
    made = sample_texts_of(rows)
    vouched = [(r, m) for r, m in zip(rows, made) if m is not None]
    assert len(vouched) > 100  # the usual writers' rows are taken
    for text, sample in vouched:
        assert sample == expected_sample(text), text


@needs_native
def test_canonical_rows_are_always_taken_and_refusals_are_the_ones_to_refuse() -> None:
    rows = [
        orjson.dumps({"_ng_task_index": 1, "reward": 0.25, "agent_ref": {"name": "a"}, "v": [1, -2.5e-9, "é"]}),
        b'{ "reward" : 1.0 , "_ng_rollout_index" : 3 , "nested" : { "_ng_task_index" : 4 } }',
        b'{"s": "caf\\u00e9"}',  # orjson writes the character itself
        b'{"s": "a\\/b"}',
        b'{"r": 2.50}',
        b'{"r": 1E5}',
        b'{"a": 1, "a": 2}',
        b'{"a": -0}',
        b'{"a": 1} {"b": 2}',
        b'[1, 2]',
        b'{"a": 1e999}',
        b'{"a": "\xff"}',
        b"",
    ]
    made = sample_texts_of(rows)
    assert made[0] == expected_sample(rows[0])
    assert made[1] == b'{"reward":1.0,"nested":{"_ng_task_index":4}}'
    assert made[2:] == [None] * (len(rows) - 2)


def test_without_the_c_minifier_every_row_is_left_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    if NATIVE is None and os.environ.get("CI") == "true":
        pytest.fail("gym_metrics.aggregate._minify was not built (no C compiler?)")
    monkeypatch.setattr(_canonical, "_minify", None)
    assert sample_texts_of([b'{"a": 1}', b'{"b": 2}']) == [None, None]


def test_a_file_of_mixed_rows_renders_the_same_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    lines = []
    for t in range(60):
        for r in range(3):
            row = {"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": rng.random(),
                   "extra": value(rng)}  # fmt: skip
            styles = [orjson.dumps(row), json.dumps(row).encode(), json.dumps(row, ensure_ascii=False).encode()]
            lines.append(rng.choice(styles))
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    fast, _, _ = aggregate_file(path, tmp_path / "fast.json")
    monkeypatch.setattr(_canonical, "_minify", None)
    slow, _, _ = aggregate_file(path, tmp_path / "slow.json")
    assert fast.read_bytes() == slow.read_bytes()


@pytest.mark.parametrize("path", ["minifier", "python"])
def test_a_sample_leaves_the_rollouts_recording_in_the_rollouts_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    if path == "minifier":
        need_native(NATIVE, "gym_metrics.aggregate._minify (the C minifier)")
    else:
        monkeypatch.setattr(_canonical, "_minify", None)
    recording = {"ng_trajectory": {"turns": [{"question": "x" * 1000}]}, "ng_model_call_capture": {"calls": []},
                 "ng_agent_observations": {"records": []}}  # fmt: skip
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": 0, "reward": 1.0, "id": t,
             "response": {"output": []}, **recording, "ng_perf": {"num_turns": 1}} for t in range(3)]  # fmt: skip
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    out, _, _ = aggregate_file(src, tmp_path / "m.json")
    samples = [g["sample"] for g in json.loads(out.read_text())[0]["group_level_metrics"]]
    assert samples == [{"agent_ref": {"name": "a"}, "reward": 1.0, "id": t, "response": {"output": []}, "ng_perf": {"num_turns": 1}}
                       for t in range(3)]  # fmt: skip
