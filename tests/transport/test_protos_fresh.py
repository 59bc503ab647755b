"""The checked-in stubs under gym_metrics/v1/ must be what scripts/gen_protos.py makes now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    generated = sorted(p.relative_to(tmp_path) for p in (tmp_path / "gym_metrics" / "v1").glob("*_pb2*.py*"))
    committed = sorted(p.relative_to(ROOT) for p in (ROOT / "gym_metrics" / "v1").glob("*_pb2*.py*"))
    assert generated == committed and generated, f"generated {generated}, committed {committed}"
    stale = [str(p) for p in generated if (tmp_path / p).read_bytes() != (ROOT / p).read_bytes()]
    assert not stale, f"stale stubs (run python scripts/gen_protos.py): {stale}"


def test_stubs_match_the_contract_on_a_sample_message() -> None:
    from gym_metrics.v1 import resources_pb2 as pb

    header = pb.AggregateMetricsHeader(agent_ref=pb.AgentRef(name="a"), expected_rollouts_per_task=4)
    assert pb.AggregateMetricsHeader.FromString(header.SerializeToString()) == header
    assert not pb.AggregateOptions().omit_rollout_infos  # default: full output
