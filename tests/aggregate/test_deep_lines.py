"""A rollout line nested deeper than pyarrow's reader can recurse (some 10,000 levels of valid
JSON) ended `aggregate`, `collect` and the viewer with a segmentation fault. Such a chunk is
read line by line instead, where the line is a bad line named by its number (orjson refuses
more than 1,024 levels). The check (`too_deep`: C, or numpy without the build) counts brackets
outside strings; it must never miss a deep line, whatever its strings hold."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import _ci

from gym_metrics.rollouts import _arrow
from gym_metrics.rollouts._arrow import too_deep

pytestmark = pytest.mark.every_python  # (see pyproject: what differs between CPython versions)


def reference_depth(line: bytes) -> int:
    """The deepest nesting of arrays and objects outside strings, written out plainly."""
    depth = deepest = 0
    in_string = escaped = False
    for c in line.decode("latin-1"):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def random_value(rng: random.Random, depth: int) -> object:
    kind = rng.random()
    if depth > 0 and kind < 0.35:
        return [random_value(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    if depth > 0 and kind < 0.7:
        return {rng.choice(["a", "b[", "c}\\\"", "]]"]): random_value(rng, depth - 1) for _ in range(rng.randint(0, 3))}
    return rng.choice(["[[[", "]]}}", "x\\\"[", "\\\\", '"{', 1, None, True, "plain text " * rng.randint(0, 5)])


def lines_of(rng: random.Random, n: int) -> list[bytes]:
    return [json.dumps({"i": i, "v": random_value(rng, rng.randint(0, 9))}).encode() for i in range(n)]


@pytest.mark.parametrize("native", [True, False], ids=["c", "numpy"])
def test_the_check_agrees_with_a_plain_reading(native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if native:
        _ci.need_native(_ci.imported("gym_metrics._util.jsonscan"), "gym_metrics._util.jsonscan")
    else:
        monkeypatch.setitem(sys.modules, "gym_metrics._util.jsonscan", None)  # the import fails: numpy's way
    rng = random.Random(7)
    for trial in range(300):
        lines = lines_of(rng, rng.randint(1, 6))
        limit = rng.randint(1, 8)
        monkeypatch.setattr(_arrow, "MAX_ARROW_DEPTH", limit)
        buf = b"\n".join(lines) + rng.choice([b"\n", b""])
        starts = np.array([0, *np.cumsum([len(x) + 1 for x in lines[:-1]])], dtype=np.int64)
        ends = starts + np.array([len(x) for x in lines], dtype=np.int64)
        deep = any(reference_depth(x) > limit for x in lines)
        found = too_deep(buf, starts, ends)
        if native:
            assert found == deep, (trial, limit, buf)
        else:  # numpy counts opening brackets, strings' too: it may say deep for a line that is not, never the reverse
            assert found or not deep, (trial, limit, buf)


def test_strings_full_of_brackets_hide_no_depth() -> None:
    """Closing brackets in a string must not cancel real ones: rounds of 1,000 opens, then a
    string of 1,000 closes, reach a depth of 5,000 that a count ignoring strings puts at 1,000."""
    _ci.need_native(_ci.imported("gym_metrics._util.jsonscan"), "gym_metrics._util.jsonscan")
    line = b'{"x": ' + (b"[" * 1000 + b'"' + b"]" * 1000 + b'",') * 5 + b"1" + b"]" * 5000 + b"}"
    assert reference_depth(line) == 5001
    assert too_deep(line, np.array([0]), np.array([len(line)]))
    fine = b'{"s": "' + b"[" * 5000 + b'", "t": "\\"' + b"{" * 3000 + b'"}'
    assert reference_depth(fine) == 1 and not too_deep(fine, np.array([0]), np.array([len(fine)]))


@pytest.mark.parametrize("depth", [100_000])
def test_aggregate_names_a_line_nested_past_the_readers_stack(tmp_path: Path, depth: int) -> None:
    rows = [json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": 0, "reward": 1.0}) for t in range(3)]
    rows[1] = rows[1][:-1] + ', "x": ' + "[" * depth + "]" * depth + "}"
    path = tmp_path / "deep.jsonl"
    path.write_text("\n".join(rows) + "\n")
    done = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "aggregate", str(path), "-o", str(tmp_path / "m.json")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])  # it was -11: SIGSEGV
    assert "line 2: json: not valid JSON (nested too deeply" in done.stderr
    skipped = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "aggregate", str(path), "-o", str(tmp_path / "m.json"), "--on-bad-line", "skip"],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert skipped.returncode == 0 and json.loads((tmp_path / "m.json").read_text())[0]["agent_metrics"]["num_repeats"] == 1
