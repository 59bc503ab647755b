"""Prove a change left every output byte-identical: aggregate every rollouts file under
tests/data (with and without rollout_infos) and compare the files' SHA-256 with a manifest
written before the change.

    python scripts/check_outputs.py --write   # before the change: record the manifest
    python scripts/check_outputs.py           # after it: exit 1 and list what differs

A file that is refused is recorded by its error message, so errors must stay the same too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
MANIFEST = ROOT / "scripts" / "outputs.sha256.json"


def _rollout_files() -> list[Path]:
    """JSONL files whose lines look like rollouts (an agent_ref on the first line)."""
    out = []
    for path in sorted(DATA.rglob("*.jsonl")):
        first = path.read_bytes().split(b"\n", 1)[0]
        if b'"agent_ref"' in first:
            out.append(path)
    return out


def _digest(path: Path, infos: bool) -> str:
    from gym_metrics import AggregateOptions, aggregate_file
    from gym_metrics.errors import GymMetricsError

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        try:
            # keep_rows=False: the path `gym-metrics aggregate` takes (only sample rows kept)
            aggregate_file(path, out, options=AggregateOptions(include_rollout_infos=infos), on_bad_line="skip", keep_rows=False)
        except GymMetricsError as exc:
            return "error: " + str(exc)
        return hashlib.sha256(out.read_bytes()).hexdigest()


def outputs() -> dict[str, str]:
    result = {}
    for path in _rollout_files():
        rel = str(path.relative_to(ROOT))
        for infos in (True, False):
            result[f"{rel}{'' if infos else ' --no-rollout-infos'}"] = _digest(path, infos)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="record the manifest instead of checking it")
    args = parser.parse_args()
    now = outputs()
    if args.write:
        MANIFEST.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"{len(now)} outputs recorded in {MANIFEST.relative_to(ROOT)}")
        return 0
    before = json.loads(MANIFEST.read_text())
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for key in differ:
        print(f"differs: {key}\n  before {before.get(key)}\n  now    {now.get(key)}", file=sys.stderr)
    print(f"{len(now) - len(differ)} of {len(before | now)} outputs identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
