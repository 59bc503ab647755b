"""`aggregate --ray` and `aggregate_on_ray` on a local Ray instance (2 CPUs): byte ranges read
as Ray tasks, partials merged into exactly the bytes one process writes; bad lines named with
their file line numbers; several inputs; the CLI path (merge in a fresh process)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gym_metrics.aggregate import AggregateOptions, aggregate_file
from gym_metrics.rollouts import byte_ranges
from gym_metrics.errors import InvalidInputError
from gym_metrics.ray import aggregate_on_ray, ray_partials

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def rollouts(path: Path, n_tasks: int = 300, seed: int = 0, bad: bool = False) -> Path:
    rng = random.Random(seed)
    lines = [
        json.dumps({"agent_ref": {"name": agent}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float(rng.random() < 0.4),
                    "latency_s": round(rng.uniform(0, 4), 5), "tokens": rng.randint(1, 5000)}) + "\n"
        for agent in ("a", "b") for t in range(n_tasks) for r in range(4)
    ]  # fmt: skip
    rng.shuffle(lines)
    if bad:
        lines[777] = "{not json\n"
    path.write_text("".join(lines))
    return path


def test_ranges_on_ray_merge_to_one_process_bytes(ray_cluster: ModuleType, tmp_path: Path) -> None:
    src = rollouts(tmp_path / "r.jsonl")
    options = AggregateOptions(expected_rollouts_per_task=5)
    single, _, _ = aggregate_file(src, tmp_path / "single.json", options=options)
    partials = ray_partials([src], tmp_path, ranges_per_cpu=3)
    assert len(partials) == len(byte_ranges(src, 6)) > 1
    out, _, rollouts_read = aggregate_on_ray([src], tmp_path / "ray.json", options=options)
    assert out.read_bytes() == single.read_bytes()
    assert rollouts_read.rows_read == 2400


def test_bad_lines_keep_their_file_line_numbers(ray_cluster: ModuleType, tmp_path: Path) -> None:
    src = rollouts(tmp_path / "r.jsonl", bad=True)
    with pytest.raises(InvalidInputError) as err:
        aggregate_on_ray([src], tmp_path / "out.json")
    assert [v.row for v in err.value.violations] == [778] and str(src) in str(err.value)
    out, _, read = aggregate_on_ray([src], tmp_path / "skip.json", on_bad_line="skip")
    single, _, _ = aggregate_file(src, tmp_path / "single.json", on_bad_line="skip")
    assert out.read_bytes() == single.read_bytes() and [b.line for b in read.bad_lines] == [778]


def test_the_cli_with_several_inputs(ray_cluster: ModuleType, tmp_path: Path) -> None:
    one, two = rollouts(tmp_path / "one.jsonl", seed=1), rollouts(tmp_path / "two.jsonl", n_tasks=50, seed=2)
    two.write_text(two.read_text().replace('"name": "a"', '"name": "c"').replace('"name": "b"', '"name": "d"'))
    cli = [sys.executable, "-m", "gym_metrics.cli"]
    address = ray_cluster.get_runtime_context().gcs_address
    done = subprocess.run([*cli, "aggregate", str(one), str(two), "--ray", address, "-o", str(tmp_path / "ray.json"), "-q", "--report"],
                          capture_output=True, text=True, timeout=200)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "ray.json")
    assert (tmp_path / "ray_report.html").is_file()  # --report goes through to the merge
    plain = subprocess.run([*cli, "aggregate", str(one), str(two), "-o", str(tmp_path / "one.json"), "-q"], capture_output=True, timeout=100)
    assert plain.returncode == 0
    assert (tmp_path / "ray.json").read_bytes() == (tmp_path / "one.json").read_bytes()
