"""Every rollouts file under tests/data aggregates to the bytes recorded in
scripts/outputs.sha256.json (`python scripts/check_outputs.py --write` records a deliberate
change of output)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_outputs.py"


def test_outputs_match_the_recorded_manifest() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " outputs identical" in done.stdout
