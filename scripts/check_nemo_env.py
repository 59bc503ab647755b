"""Check a NeMo Gym environment of your own on gym-metrics against NeMo Gym itself: the same
rollouts verified and aggregated by NeMo Gym (in a venv where nemo-gym is installed) and by
gym-metrics (the environment ported by its imports, served from its config over gRPC and
collected); every per-row reward and field, and every metrics key, compared.

    python scripts/check_nemo_env.py --root path/to/Gym --env my_env --rollouts rollouts.jsonl \\
        --nemo-python path/to/nemo-venv/bin/python

`--root` holds `resources_servers/<env>/` (a NeMo Gym checkout, or an unzipped wheel); the rows
of `--rollouts` are verify request bodies (`responses_create_params`, `response` and the task's
fields), with `_ng_task_index` / `_ng_rollout_index` (a row without them is numbered as NeMo
Gym's collection numbers it). Exit 0 when everything is equal, 1 with the differences listed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ECHOED = ("responses_create_params", "response")


def nemo_side(root: Path, env: str, rollouts: Path, out: Path) -> None:
    """Run inside the nemo-gym venv: NeMo Gym's verify answers and aggregate metrics."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import nemo_gym  # noqa: F401  (the venv's nemo_gym first; then the root's resources_servers)

    sys.path.insert(1, str(root.resolve()))
    from make_nemo_env_reference import Env, run_env

    rows = [json.loads(line) for line in rollouts.read_text().splitlines() if line.strip()]
    responses, metrics, _ = run_env(Env(root, env), rows)
    out.write_text(json.dumps({"responses": responses, "metrics": metrics}))


async def ours(root: Path, env: str, rollouts: Path, work: Path) -> tuple[list[dict[str, Any]], Any]:
    """gym-metrics: the environment ported into `work`, served from its config, collected."""
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics._transport.server import ServerConfig, start_server
    from gym_metrics.collector import CollectOptions, collect_async
    from gym_metrics.nemo_gym import load_config_server
    from gym_metrics.nemo_gym.port import port_folder

    tree = work / "resources_servers"
    port_folder(root / "resources_servers", tree)
    configs = sorted((tree / env / "configs").glob("*.yaml"))
    config = next((c for c in configs if c.stem == env), configs[0])
    server = await start_server(load_config_server(config), ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            result = await collect_async(client, rollouts, work / "run.jsonl", CollectOptions())
    finally:
        await server.stop(0)
    rows = [json.loads(line) for line in (work / "run.jsonl").read_text().splitlines() if line.strip()]
    return rows, json.loads(result.metrics_path.read_text())


def _added(key: str) -> bool:
    """A key gym-metrics adds beside NeMo Gym's, documented (docs/statistics.md, docs/metrics.md)."""
    from gym_metrics.aggregate import ADDED_AGENT_METRICS

    return key.split("/", 1)[0] in ADDED_AGENT_METRICS or key.startswith("coverage/") or key in ("non_numeric_counts", "non_finite_counts")


def differences(theirs: Any, mine: Any, where: str = "") -> list[str]:
    """Where two JSON values differ (numbers to relative 1e-9; NeMo Gym's placeholder `sample`
    of a group is not compared, nor the keys gym-metrics adds beside NeMo Gym's)."""
    if isinstance(theirs, dict) and isinstance(mine, dict):
        found = [f"{where}.{k}: missing" for k in theirs if k not in mine and k != "sample"]
        found += [f"{where}.{k}: not in NeMo Gym's" for k in mine if k not in theirs and not _added(k)]
        for key in theirs.keys() & mine.keys() - {"sample"}:
            found += differences(theirs[key], mine[key], f"{where}.{key}")
        return found
    if isinstance(theirs, list) and isinstance(mine, list):
        if len(theirs) != len(mine):
            return [f"{where}: {len(mine)} items, NeMo Gym {len(theirs)}"]
        return [d for i, (a, b) in enumerate(zip(theirs, mine)) for d in differences(a, b, f"{where}[{i}]")]
    if isinstance(theirs, bool) or isinstance(mine, bool):  # true is not 1 in JSON
        return [] if type(theirs) is type(mine) and theirs == mine else [f"{where}: {mine!r} != NeMo Gym's {theirs!r}"]
    if isinstance(theirs, (int, float)) and isinstance(mine, (int, float)):
        same = (math.isnan(theirs) and math.isnan(mine)) or math.isclose(theirs, mine, rel_tol=1e-9, abs_tol=0.0)
        return [] if same else [f"{where}: {mine} != NeMo Gym's {theirs}"]
    return [] if theirs == mine else [f"{where}: {mine!r} != NeMo Gym's {theirs!r}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="the folder holding resources_servers/<env>/")
    parser.add_argument("--env", required=True, help="the environment's folder name")
    parser.add_argument("--rollouts", type=Path, required=True, help="JSONL of verify request bodies")
    parser.add_argument("--nemo-python", help="python of a venv with nemo-gym installed")
    parser.add_argument("--_nemo_out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._nemo_out is not None:
        nemo_side(args.root, args.env, args.rollouts, args._nemo_out)
        return 0
    if not args.nemo_python:
        parser.error("--nemo-python is required")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        reference = work / "nemo.json"
        subprocess.run(
            [args.nemo_python, __file__, "--root", str(args.root), "--env", args.env, "--rollouts", str(args.rollouts),
             "--_nemo_out", str(reference)], check=True, timeout=3600,
        )  # fmt: skip
        theirs = json.loads(reference.read_text())
        rows, metrics = asyncio.run(ours(args.root, args.env, args.rollouts, work))
    found = differences([{k: v for k, v in r.items() if k not in ECHOED} for r in theirs["responses"]],
                        [{k: v for k, v in r.items() if k not in ECHOED and not k.startswith("_ng_") and k != "agent_ref"} for r in rows], "rows")  # fmt: skip
    found += differences(theirs["metrics"], metrics, "metrics")
    for line in found[:50]:
        print(line)
    print(f"{args.env}: {len(rows)} rows, " + ("equal to NeMo Gym's" if not found else f"{len(found)} differences"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
