"""Aggregation beyond one process: shards, partials and the exact merge; and `aggregate --ray`.

Usage: python scripts/bench_scale.py [--rollouts 10000000] [--shards 8] [--ray-rollouts 4000000]
                                      [--data-dir bench_data] [--no-ray]

(a) The bench file (`bench_aggregate.py`'s shape: tasks x 8 repeats, four numeric fields and a
    string) of --rollouts rows is cut into --shards whole-line shard files. Each shard is
    aggregated alone (`gym-metrics aggregate SHARD`, the single-process figure of that size)
    and turned into a partial (`gym-metrics aggregate SHARD --partial-out`), each in its own
    process, one after the other; then `gym-metrics merge` of all partials. Reported: wall,
    CPU and peak RSS of each step; total work (all partials + the merge) against --shards x the
    median single-shard aggregate (goal: within 1.3x), the merge's peak RSS (goal: under
    1 GB at 10M), and that the merged file is byte-identical to one `gym-metrics aggregate`
    of the whole file (run once, its figures reported too).
(b) `gym-metrics aggregate FILE --ray` on a local Ray instance with 2 CPUs against the same
    command without --ray, on --ray-rollouts rows (Ray's start-up included, as a user sees it).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_aggregate import make_rollouts  # noqa: E402

from gym_metrics.rollouts import byte_ranges  # noqa: E402

CLI = [sys.executable, "-m", "gym_metrics.cli"]


def run(args: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one CLI command in a fresh interpreter."""
    code = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter(); subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(time.perf_counter() - t, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *CLI, *args], check=True, capture_output=True, text=True)
    wall, cpu, rss = map(float, done.stdout.split())
    return wall, cpu, rss


def shard_ranges(path: Path, shards: int) -> list[tuple[int, int]]:
    """Exactly `shards` whole-line byte ranges (fewer only for a file of fewer lines).
    byte_ranges(path, n) gives *about* n: each range ends at the line end after its size, so a
    remainder can make n + 1 (9 partials were once summed under an "8 shards" label); the last
    two are joined here."""
    ranges = byte_ranges(path, shards)
    while len(ranges) > shards:
        (start, _), (_, end) = ranges[-2], ranges[-1]
        ranges[-2:] = [(start, end)]
    return ranges


def split(path: Path, shards: int) -> list[Path]:
    out = []
    with path.open("rb") as f:
        for i, (start, end) in enumerate(shard_ranges(path, shards)):
            shard = path.with_name(f"{path.stem}_shard{i}.jsonl")
            f.seek(start)
            shard.write_bytes(f.read(end - start))
            out.append(shard)
    return out


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def bench_shards(path: Path, shards: int) -> list[str]:
    parts = split(path, shards)
    shards = len(parts)  # the labels say how many were summed
    single_shard = [run(["aggregate", str(p), "-o", str(p.with_suffix(".json")), "-q"]) for p in parts]
    partials = [run(["aggregate", str(p), "--partial-out", str(p.with_suffix(".parquet")), "-q"]) for p in parts]
    merged_out = path.with_name(f"{path.stem}_merged.json")
    merge = run(["merge", *(str(p.with_suffix(".parquet")) for p in parts), "-o", str(merged_out), "-q"])
    whole_out = path.with_name(f"{path.stem}_whole.json")
    whole = run(["aggregate", str(path), "-o", str(whole_out), "-q"])
    identical = merged_out.read_bytes() == whole_out.read_bytes()
    shard_wall = statistics.median(w for w, _, _ in single_shard)
    work = sum(w for w, _, _ in partials) + merge[0]
    sizes = sum(p.with_suffix(".parquet").stat().st_size for p in parts) / 1e6
    for p in parts:
        for f in (p, p.with_suffix(".json"), p.with_suffix(".parquet")):
            f.unlink(missing_ok=True)
    merged_out.unlink(missing_ok=True)
    return [
        f"| one shard ({path.stat().st_size / shards / 1e6:.0f} MB), `aggregate`, median of {shards} | {shard_wall:.2f} s | "
        f"{statistics.median(c for _, c, _ in single_shard):.2f} s | {max(r for _, _, r in single_shard):.0f} MB |",
        f"| {shards} partials (`aggregate --partial-out`), one process each, in turn (sum; largest RSS) | "
        f"{sum(w for w, _, _ in partials):.2f} s | {sum(c for _, c, _ in partials):.2f} s | {max(r for _, _, r in partials):.0f} MB |",
        f"| `merge` of the {shards} partials ({sizes:.0f} MB of Parquet) | {merge[0]:.2f} s | {merge[1]:.2f} s | **{merge[2]:.0f} MB** |",
        f"| total work (partials + merge) / ({shards} x one shard) | **{work / (shards * shard_wall):.2f}x** | | |",
        f"| the whole file in one `aggregate` (merged file identical: {identical}) | {whole[0]:.2f} s | {whole[1]:.2f} s | {whole[2]:.0f} MB |",
    ]


def bench_ray(path: Path) -> list[str]:
    out = path.with_name(f"{path.stem}_ray.json")
    plain = run(["aggregate", str(path), "-o", str(path.with_name(f"{path.stem}_plain.json")), "-q"])
    started = time.perf_counter()
    subprocess.run([*CLI, "aggregate", str(path), "--ray", "-o", str(out), "-q"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)  # fmt: skip
    ray_wall = time.perf_counter() - started
    identical = out.read_bytes() == path.with_name(f"{path.stem}_plain.json").read_bytes()
    return [
        f"| `aggregate` (one process) | {plain[0]:.2f} s | {plain[1]:.2f} s | {plain[2]:.0f} MB |",
        f"| `aggregate --ray` (a local Ray on this machine's 2 CPUs, start-up included; identical: {identical}) | {ray_wall:.2f} s | | |",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--ray-rollouts", type=int, default=4_000_000)
    parser.add_argument("--data-dir", type=Path, default=Path("bench_data"))
    parser.add_argument("--no-ray", action="store_true")
    ns = parser.parse_args()
    ns.data_dir.mkdir(exist_ok=True)
    lines = ["| step | wall | CPU | peak RSS |", "|---|---:|---:|---:|"]
    path = ns.data_dir / f"rollouts_{ns.rollouts}.jsonl"
    if not path.exists():
        make_rollouts(path, ns.rollouts)
    print(f"{ns.rollouts:,} rollouts, {ns.shards} shards; load before {load()}", flush=True)
    lines += bench_shards(path, ns.shards)
    print(f"load after the shards {load()}", flush=True)
    if not ns.no_ray:
        ray_path = ns.data_dir / f"rollouts_{ns.ray_rollouts}.jsonl"
        if not ray_path.exists():
            make_rollouts(ray_path, ns.ray_rollouts)
        lines += bench_ray(ray_path)
        print(f"load after ray {load()}", flush=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
