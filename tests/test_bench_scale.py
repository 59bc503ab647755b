"""scripts/bench_scale.py sums exactly --shards partials (issue 24.13: it summed 9 byte-range
partials under an "8 shards" label, since byte_ranges(path, 8) can give 9)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from gym_metrics.rollouts import byte_ranges

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_scale  # noqa: E402


def test_split_makes_exactly_the_shards_asked_for_and_loses_no_byte(tmp_path: Path) -> None:
    rng = random.Random(0)
    src = tmp_path / "rollouts.jsonl"
    src.write_bytes(b"".join(b'{"x": "%s"}\n' % (b"a" * rng.randrange(1, 200)) for _ in range(1000)))
    assert len(byte_ranges(src, 8)) == 9  # the case that was mislabelled
    parts = bench_scale.split(src, 8)
    assert len(parts) == 8
    assert b"".join(p.read_bytes() for p in parts) == src.read_bytes()
    assert all(p.read_bytes().endswith(b"\n") for p in parts)
    small = tmp_path / "small.jsonl"
    small.write_bytes(b"{}\n{}\n{}\n")
    assert len(bench_scale.split(small, 8)) == 3  # fewer lines than shards: one line each
