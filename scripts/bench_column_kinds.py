"""What checking a batch's numeric columns against their kinds costs AggregateMetrics: one
RolloutBatch of N rows (a FLOAT reward, INT token counts, a BOOL flag, as collect sends them)
decoded by the server's `batch_to_columns`, with the check and with it replaced by a no-op,
alternately; medians. Usage: python scripts/bench_column_kinds.py [--rows 10000] [--rounds 7]"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gym_metrics._transport import _batches
from gym_metrics.v1 import resources_pb2 as pb


def batch(rows: int) -> pb.RolloutBatch:
    rng = np.random.default_rng(0)
    b = pb.RolloutBatch(batch_id="b0", task_index=np.arange(rows).tolist(), rollout_index=[0] * rows)
    b.columns["reward"].values.extend(rng.random(rows).tolist())
    for name in ("input_tokens", "output_tokens", "num_turns"):
        b.columns[name].values.extend(rng.integers(0, 10_000, rows).astype(float).tolist())
        b.columns[name].kind = pb.VALUE_KIND_INT
    b.columns["is_correct"].values.extend((rng.random(rows) < 0.5).astype(float).tolist())
    b.columns["is_correct"].kind = pb.VALUE_KIND_BOOL
    return b


def timed(b: pb.RolloutBatch, repeat: int = 20) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        _batches.batch_to_columns(b, "request[1].batch")
    return (time.perf_counter() - started) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    b = batch(args.rows)
    check = _batches._check_kinds
    with_check, without = [], []
    for _ in range(args.rounds):
        _batches._check_kinds = check
        with_check.append(timed(b))
        _batches._check_kinds = lambda fields, where: None
        without.append(timed(b))
    _batches._check_kinds = check
    a, z = statistics.median(with_check), statistics.median(without)
    print(f"{args.rows:,} rows, 5 columns: {z * 1e3:.2f} ms a batch without the kind check, {a * 1e3:.2f} ms with it "
          f"(+{(a - z) * 1e6 / args.rows:.2f} us a row, {a / z:.2f}x)")


if __name__ == "__main__":
    main()
