"""Record NeMo Gym 0.7.0's rollout health checks (`nemo_gym.rollout_health.run_health_checks`,
what `gym eval health-check` runs) over each rollouts file of tests/data/health
(scripts/make_health_cases.py), for the tests of `gym-metrics health` (issue 40).

A tool for producing test data, run in the throwaway nemo-gym venv:

    /tmp/ngvenv/bin/python scripts/make_nemo_health_reference.py            # write
    /tmp/ngvenv/bin/python scripts/make_nemo_health_reference.py --check    # compare (exit 1 on a difference)

Per file <case>.jsonl, serially (`workers=1`: NeMo Gym's process pool gives the same results,
in more time) into a temporary directory: its two reports, copied as written to
tests/data/health/<case>.nemo/quality_summary.json and rollout_verdicts.jsonl (the temporary
directory's path, where a report names it, replaced by "<dir>"), and format_health_report's
one line (its path the same) in report.txt. Then once more for faults.jsonl with
`ignored_checks=["model_call_failed", "rollout_ended_on_failed_model_call"]`, into
faults.ignored.nemo/.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from reference_file import write_or_check  # scripts/

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "health"
IGNORED = ["model_call_failed", "rollout_ended_on_failed_model_call"]


def nemo_reports(paths: Path | list[Path], output_dir: Path, ignored: Sequence[str] = ()) -> dict[str, str]:
    """NeMo Gym's two reports over `paths` (written into `output_dir`) and its one-line report,
    as written (paths unreplaced); raises what `run_health_checks` raises. Also
    scripts/fuzz_nemo_health.py's NeMo Gym side."""
    from nemo_gym.rollout_health import format_health_report, run_health_checks

    result = run_health_checks(paths, output_dir=output_dir, workers=1, ignored_checks=list(ignored))
    return {
        "quality_summary.json": result.summary_path.read_text(),
        "rollout_verdicts.jsonl": result.verdicts_path.read_text(),
        "report.txt": format_health_report(result) + "\n",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files instead of writing them")
    args = parser.parse_args()
    code = 0
    runs = [(p, p.stem, ()) for p in sorted(DATA.glob("*.jsonl"))] + [(DATA / "faults.jsonl", "faults.ignored", IGNORED)]
    for path, name, ignored in runs:
        with tempfile.TemporaryDirectory() as tmp:
            texts = nemo_reports(path, Path(tmp), ignored)
            for file, text in texts.items():
                code |= write_or_check(DATA / f"{name}.nemo" / file, text.replace(tmp, "<dir>").replace(str(DATA), "<data>"), args.check)
    return code


if __name__ == "__main__":
    sys.exit(main())
