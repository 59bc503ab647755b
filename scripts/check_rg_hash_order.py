"""Which reasoning-gym datasets' entries follow PYTHONHASHSEED: each dataset's first --size
entries (each generated with Python's and numpy's global generators seeded by its own seed, as
`gym-metrics dataset reasoning-gym` generates them) hashed in a child per hash seed given; the
datasets whose digests differ are printed (docs/environments.md names them; codeio, which also
reads the temporary folder, is left out).

    .venv/bin/python scripts/check_rg_hash_order.py --hash-seeds 0 5 7
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import hashlib, json, random, sys
import numpy as np
import reasoning_gym as rg
from reasoning_gym.factory import DATASETS
size, seed, out = int(sys.argv[1]), int(sys.argv[2]), {}
for name in sorted(set(DATASETS) - {"composite", "codeio"}):
    try:
        dataset, entries = rg.create_dataset(name, size=size, seed=seed), []
        for i in range(size):
            random.seed(seed + i); np.random.seed((seed + i) % 2**32)
            entries.append(dataset[i])
        out[name] = hashlib.md5(json.dumps(entries, sort_keys=True, default=str).encode()).hexdigest()
    except Exception as exc:
        out[name] = f"error {type(exc).__name__}"
print("\\nDIGESTS", json.dumps(out))  # (some datasets print as they build)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hash-seeds", nargs="+", default=["0", "5", "7"])
    parser.add_argument("--size", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1234)
    ns = parser.parse_args()
    digests = []
    for hash_seed in ns.hash_seeds:
        done = subprocess.run([sys.executable, "-c", CHILD, str(ns.size), str(ns.seed)], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": hash_seed}, timeout=1800)  # fmt: skip
        digests.append(json.loads(done.stdout.rsplit("\nDIGESTS ", 1)[1]))
    names = sorted(digests[0])
    differing = [n for n in names if len({d.get(n) for d in digests}) > 1]
    print(f"{len(names)} datasets, hash seeds {' '.join(ns.hash_seeds)}: entries follow the hash seed in {', '.join(differing) or 'none'}")


if __name__ == "__main__":
    main()
