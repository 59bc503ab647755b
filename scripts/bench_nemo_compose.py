"""Time composing NeMo Gym configs: every benchmark and resources server config of an unzipped
nemo-gym 0.7.0 wheel, each composed (`config_paths`, `_inherit_from`, ...) and every top-level
block resolved, by gym-metrics (`--side ours`) or by NeMo Gym's own parser (`--side nemo`, run in
a venv with nemo-gym), as scripts/make_nemo_config_reference.py composes them. Prints the
median milliseconds a config over the rounds (each round composes every config once).

    .venv/bin/python scripts/bench_nemo_compose.py --root /tmp/ng --side ours --rounds 5
    cd /tmp/ng && /tmp/ngvenv/bin/python /work/main/scripts/bench_nemo_compose.py --root /tmp/ng --side nemo --rounds 5
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def recorder() -> Any:
    spec = importlib.util.spec_from_file_location("make_nemo_config_reference", HERE / "make_nemo_config_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--side", choices=("ours", "nemo"), required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    root = args.root.resolve()
    os.chdir(root)
    configs = sorted(root.glob("benchmarks/*/config.yaml")) + sorted(root.glob("resources_servers/*/configs/*.yaml"))
    reference = recorder()
    blocks = reference.resolved_blocks
    if args.side == "ours":
        from gym_metrics.nemo_gym._compose import parse, search_roots
        from gym_metrics.nemo_gym.global_config import GlobalConfigDictParserConfig

        roots = search_roots(root)

        def compose(path: Path) -> Any:
            return blocks(parse({**GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, "config_paths": [str(path)]}, roots, None, root))
    else:
        compose = reference.composed

    per_config = []
    refused = 0
    for _ in range(args.rounds):
        refused = 0
        started = time.perf_counter()
        for path in configs:
            try:
                found = compose(path)
            except Exception:  # noqa: BLE001 - counted: a config this side refuses
                found = {"error": True}
            refused += "error" in found
        per_config.append((time.perf_counter() - started) * 1000 / len(configs))
    shown = ", ".join(f"{ms:.2f}" for ms in per_config)
    print(f"{args.side}: {len(configs)} configs ({refused} refused), median {statistics.median(per_config):.2f} ms a config (rounds: {shown})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
