"""Write nemo-gym 0.7.0's aggregate metrics for a rollouts JSONL (conformance reference data).

This is a tool for producing test data, not part of gym-metrics: it imports nemo-gym, which is
NOT a project dependency (it needs Python >= 3.13). Run it with a throwaway interpreter that has
nemo-gym installed, for example:

    python3.13 -m venv /tmp/ngvenv && /tmp/ngvenv/bin/pip install nemo-gym==0.7.0
    /tmp/ngvenv/bin/python scripts/make_nemo_reference.py tests/data/nemo_gym_extra/*.jsonl

For every `<dir>/<stem>.jsonl` given it writes `<dir>/<stem>_aggregate_metrics.json` (or, with
`--check`, compares against the file already there and writes nothing).

What it does, per file:
- reads the rows with Python's `json` (so the `NaN` literal that Python writers emit is read);
- groups the rows by `agent_ref.name`, agents sorted by name;
- strips each row the way nemo-gym's rollout collection does before it POSTs to
  `/aggregate_metrics` (drops `response` except its `usage` / `incomplete_details`, and a few
  heavyweight keys);
- sends each row through JSON the way that POST does (`nemo_gym.server_utils.request` encodes
  the body with `orjson.dumps`): NaN and +/-inf arrive at the route as null, so the route never
  sees them (`--no-wire` skips this step and calls the function on the rows as read);
- calls `nemo_gym.reward_profile.compute_aggregate_metrics(rows_of_that_agent)` (what the route
  does, with the default hooks: no custom metrics, default key metrics);
- writes a JSON array of `{agent_ref, agent_metrics, key_metrics, group_level_metrics,
  repeat_level_metrics}` from the returned `AggregateMetrics` fields, and its `perf_summary` when
  there is one (the shape collection writes, minus its `_ng_environment_server` bookkeeping).

With `--no-wire`, non-finite numbers nemo-gym returns (it copies a NaN field value into
`rollout_infos`) are written as the `NaN` literal (Python's `json`), so nothing is lost.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

# Keys rollout collection removes before calling /aggregate_metrics (nemo_gym/rollout_collection.py).
_STRIPPED_KEYS = (
    "response",
    "responses_create_params",
    "ng_agent_observations",
    "ng_model_call_capture",
    "ng_trajectory",
    "_ng_atif_provenance",
)


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    entry = {k: v for k, v in row.items() if k not in _STRIPPED_KEYS}
    response = row.get("response") or {}
    if isinstance(response, dict):
        kept = {}
        if response.get("usage") is not None:
            kept["usage"] = response["usage"]
        if response.get("incomplete_details") is not None:
            kept["incomplete_details"] = response["incomplete_details"]
        if kept:
            entry["response"] = kept
    return entry


def _plain(value: Any) -> Any:
    """numpy / pandas scalars -> Python scalars, recursively."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    return value


def read_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def _over_the_wire(row: dict[str, Any]) -> dict[str, Any]:
    """The row as the route parses it: encoded as nemo-gym's client encodes request bodies."""
    import orjson

    return orjson.loads(orjson.dumps(row))


def reference_for(path: Path, wire: bool = True) -> list[dict[str, Any]]:
    from nemo_gym.reward_profile import compute_aggregate_metrics

    by_agent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in read_rows(path):
        entry = _strip(row)
        by_agent[row["agent_ref"]["name"]].append(_over_the_wire(entry) if wire else entry)
    out = []
    for name in sorted(by_agent):
        result = compute_aggregate_metrics(by_agent[name])
        dumped = result.model_dump()
        out.append(
            _plain(
                {
                    "agent_ref": {"name": name},
                    "agent_metrics": dumped["agent_metrics"],
                    "key_metrics": dumped["key_metrics"],
                    "group_level_metrics": dumped["group_level_metrics"],
                    "repeat_level_metrics": dumped["repeat_level_metrics"],
                    **({"perf_summary": dumped["perf_summary"]} if dumped["perf_summary"] is not None else {}),
                }
            )
        )
    return out


def output_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}_aggregate_metrics.json")


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        ignore = {"sample", "_ng_environment_server"}
        ka, kb = set(a) - ignore, set(b) - ignore
        return ka == kb and all(_close(a[k], b[k]) for k in ka)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)
    return a == b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rollouts", nargs="+", type=Path, help="rollouts JSONL file(s)")
    parser.add_argument(
        "--check", action="store_true", help="compare with the existing *_aggregate_metrics.json instead of writing"
    )
    parser.add_argument(
        "--no-wire", action="store_true", help="call nemo-gym on the rows as read (NaN stays NaN), not as its route gets them"
    )
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # nemo-gym warns about unequal repeats and zero spreads: test data has them on purpose
    failed = 0
    for path in args.rollouts:
        try:
            ref = reference_for(path, wire=not args.no_wire)
        except Exception as exc:  # nemo-gym itself fails on this input: no reference for it
            failed += 1
            print(f"NEMO-GYM FAILED on {path}: {type(exc).__name__}: {exc}")
            continue
        out = output_path(path)
        if args.check:
            existing = json.loads(out.read_text(encoding="utf-8"))
            ok = _close(ref, existing)
            failed += not ok
            print(f"{'same' if ok else 'DIFFERENT'}: {out}")
        else:
            out.write_text(json.dumps(ref, indent=2, allow_nan=True) + "\n", encoding="utf-8")
            print(f"wrote {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
