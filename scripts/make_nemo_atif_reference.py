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
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reference_file import write_or_check  # scripts/

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "atif"


def main() -> int:
    from nemo_gym.atif_export import AtifExportError, gym_rollout_to_atif

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    args = parser.parse_args()
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
