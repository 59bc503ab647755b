"""Record what NeMo Gym 0.7.0's collection helpers that environments import give (gdpval's
multistage orchestrator imports them: `nemo_gym.rollout_collection`'s attempt cap, elapsed time,
terminal failures, latency tracker and invalid-judge migration; `nemo_gym.path_utils`,
`nemo_gym.deliverables`, `observability_enabled_from_config`), for
tests/nemo_gym/test_collection_helpers.py, which runs `record` with gym_metrics.nemo_gym's and
compares.

    /tmp/ngvenv/bin/python scripts/make_nemo_collection_helpers_reference.py            # write
    /tmp/ngvenv/bin/python scripts/make_nemo_collection_helpers_reference.py --check    # compare

Written to tests/data/nemo_gym_collection/helpers.json (what they print included).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from reference_file import write_or_check  # scripts/

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_collection" / "helpers.json"


def record(api: Any) -> dict[str, Any]:
    """Every probe's answer, `api` holding the helpers by their NeMo Gym names."""
    DispatchLatencyTracker, get_max_rollout_attempts, is_terminal_failure = api.DispatchLatencyTracker, api.get_max_rollout_attempts, api.is_terminal_failure
    migrate_invalid_judge_main_rows, observed_elapsed, is_deliverable = api.migrate_invalid_judge_main_rows, api.observed_elapsed, api.is_deliverable
    failures_path_for, materialized_path_for, aggregate_metrics_path_for = api.failures_path_for, api.materialized_path_for, api.aggregate_metrics_path_for
    observability_enabled_from_config = api.observability_enabled_from_config
    out: dict[str, Any] = {}
    printed = io.StringIO()
    saved = os.environ.get("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS")
    with contextlib.redirect_stdout(printed):
        for v in [None, "", "5", "0", "x", "-2"]:
            if v is None:
                os.environ.pop("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", None)
            else:
                os.environ["NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"] = v
            out[f"attempts {v}"] = get_max_rollout_attempts()
        recs = [{}, {"elapsed_seconds": 3}, {"elapsed_seconds": "x", "response": {"metadata": {"elapsed_seconds": "2.5"}}}, {"elapsed_seconds": -1}, {"response": None}]
        out["elapsed"] = [observed_elapsed(r) for r in recs]
        fails = [{"_ng_failure_terminal": True, "_ng_failure_class": c} for c in ["timeout_exceeded", "skipped", "eval_missing", "other", None]] + [{"_ng_failure_class": "skipped"}]
        out["terminal"] = [[is_terminal_failure(f), is_terminal_failure(f, retry_terminal_timeouts=True)] for f in fails]
        t = DispatchLatencyTracker()
        out["q0"] = [t.quantile(0.5), t.drain_margin(None), t.drain_margin(7.0), t.summary()]
        for s in [5, 1, 0, 9, 60, 300, 120, -3]: t.record(s)
        t.record_drained()
        out["q"] = [t.quantile(q) for q in (0, 0.25, 0.5, 0.75, 0.9, 1)] + [t.drain_margin(None), t.drained, t.summary()]
        p = Path("/tmp/x/rollouts.jsonl")
        out["paths"] = [str(failures_path_for(p)), str(materialized_path_for(p)), str(aggregate_metrics_path_for(p)), str(materialized_path_for(Path("a/b.json")))]
        out["obs"] = [observability_enabled_from_config(c) for c in [{}, {"observability_enabled": False}, {"observability_enabled": "false"}, {"observability_enabled": True, "model_call_capture_dir": "/tmp/c"}]]
        d = Path(tempfile.mkdtemp())
        for folder, name in (("deliv", "out.pdf"), ("empty", "log.txt")):
            (d / folder).mkdir()
            (d / folder / name).write_text("x")
        out["deliverable"] = [is_deliverable(d / "deliv" / "out.pdf"), is_deliverable(d / "empty" / "log.txt"), is_deliverable(d / "deliv")]
        main = d / "r.jsonl"
        rows = [{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0, "a":  1},
                {"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 0.0, "invalid_judge_response": True, "_ng_failure_terminal": True, "reuse_cached_deliverable": False, "deliverables_dir": str(d / "deliv")},
                {"_ng_task_index": 2, "_ng_rollout_index": 0, "reward": 0.0, "invalid_judge_response": True, "_ng_failure_class": "x", "deliverables_dir": str(d / "empty"), "stage_index": 1}]
        main.write_text('{"_ng_task_index": 0,  "_ng_rollout_index": 0, "reward": 1.0}\n\n' + "".join(json.dumps(r) + "\n" for r in rows[1:]))
        out["migrate1"] = migrate_invalid_judge_main_rows(main)
        out["main"] = main.read_text()
        out["side"] = (d / "r_failures.jsonl").read_text().replace(str(d), "<d>")
        main.write_text(main.read_text() + json.dumps(rows[1]) + "\n")
        out["migrate2"] = migrate_invalid_judge_main_rows(main)
        out["main2"] = main.read_text()
        out["side2"] = (d / "r_failures.jsonl").read_text().replace(str(d), "<d>")
        out["migrate_none"] = migrate_invalid_judge_main_rows(d / "nothing.jsonl")
    if saved is None:
        os.environ.pop("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", None)
    else:
        os.environ["NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"] = saved
    out["printed"] = printed.getvalue()
    return out


def main() -> int:
    from nemo_gym import base_responses_api_model, deliverables, path_utils, rollout_collection

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    api = SimpleNamespace(**{name: getattr(module, name) for module, names in (
        (rollout_collection, ("DispatchLatencyTracker", "get_max_rollout_attempts", "is_terminal_failure", "migrate_invalid_judge_main_rows", "observed_elapsed")),
        (path_utils, ("failures_path_for", "materialized_path_for", "aggregate_metrics_path_for")),
        (deliverables, ("is_deliverable",)), (base_responses_api_model, ("observability_enabled_from_config",))) for name in names})  # fmt: skip
    return write_or_check(OUT, json.dumps({"nemo_gym": "0.7.0", **record(api)}, indent=1) + "\n", args.check)


if __name__ == "__main__":
    sys.exit(main())
