"""Record what NeMo Gym 0.7.0's ATIF export (`nemo_gym.atif_export.gym_rollout_to_atif`, what
`gym eval export --format atif` runs per row) makes of each row of tests/data/atif/cases.jsonl
(scripts/make_atif_cases.py), for tests/recording/test_atif_export.py.

A tool for producing test data, run in a throwaway nemo-gym venv:

    /tmp/ngvenv/bin/python scripts/make_nemo_atif_reference.py            # write
    /tmp/ngvenv/bin/python scripts/make_nemo_atif_reference.py --check    # compare (exit 1 on a difference)

Per case, in the cases' order: {"case", "atif"} (the trajectory, `model_dump(mode="json",
exclude_none=True)`, its exporter block (name, version) replaced by "<exporter>"), or
{"case", "error"} (the AtifExportError's message). session_id "run-1", agent_version "0.1".
Written to tests/data/atif/reference.jsonl.

`--rows FILE` (scripts/fuzz_nemo_atif.py): each JSONL row of FILE converted, one outcome a line
on stdout: {"atif", "file"} (the file NeMo Gym writes, its exporter block made gym-metrics
"test"'s so the bytes compare), or {"error", "raised"} for whatever the converter raised.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reference_file import write_or_check  # scripts/

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "atif"


def fuzz_outcomes(rows: Path) -> int:
    """Per row of `rows`: the trajectory and its file, or what NeMo Gym raised (any exception)."""
    from nemo_gym.atif_export import _encoded_trajectory, gym_rollout_to_atif

    for line in rows.read_text(encoding="utf-8").splitlines():
        try:
            trajectory = gym_rollout_to_atif(json.loads(line), session_id="run-1", agent_version="0.1")
            atif = trajectory.model_dump(mode="json", exclude_none=True)
            atif["extra"]["nemo_gym"]["exporter"] = "<exporter>"
            assert trajectory.extra is not None
            trajectory.extra["nemo_gym"]["exporter"] = {"name": "gym-metrics", "version": "test"}
            out = {"atif": atif, "file": _encoded_trajectory(trajectory).decode("utf-8")}
        except Exception as exc:  # noqa: BLE001  (a refusal, a validation error or a crash: the fuzzer tells them apart)
            out = {"error": str(exc), "raised": type(exc).__name__}
        print(json.dumps(out), flush=False)
    return 0


def main() -> int:
    from nemo_gym.atif_export import AtifExportError, gym_rollout_to_atif

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    parser.add_argument("--rows", type=Path, help="print NeMo Gym's outcome for each row of this JSONL file instead")
    args = parser.parse_args()
    if args.rows:
        return fuzz_outcomes(args.rows)
    out = []
    for line in (DATA / "cases.jsonl").read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        try:
            atif = gym_rollout_to_atif(case["row"], session_id="run-1", agent_version="0.1").model_dump(mode="json", exclude_none=True)
        except AtifExportError as exc:
            out.append({"case": case["case"], "error": str(exc)})
            continue
        atif["extra"]["nemo_gym"]["exporter"] = "<exporter>"
        out.append({"case": case["case"], "atif": atif})
    return write_or_check(DATA / "reference.jsonl", "".join(json.dumps(o) + "\n" for o in out), args.check)


if __name__ == "__main__":
    sys.exit(main())
