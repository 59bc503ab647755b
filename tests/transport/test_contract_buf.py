"""The contract under buf: lint clean with STANDARD and COMMENTS (every element documented, one
response message per RPC), and no breaking change against the last release but the ones
buf.yaml lists, each with its reason and CHANGELOG line. Both checks are shown to fail on a
contract that breaks them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from _buf import buf_binary

ROOT = Path(__file__).resolve().parents[2]
RELEASED = "0.1.0"
RELEASE_COMMIT = "c7d3034dab9694b5f20daf5e1213d0a9addcd51f"  # before 0.1.0's changelog split (80e5c26): the contract 0.1.0 shipped
pytestmark = pytest.mark.timeout(300)


def buf(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([buf_binary(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_lint_is_clean() -> None:
    done = buf("lint")
    assert done.returncode == 0, done.stdout + done.stderr


def test_lint_fails_on_an_undocumented_field(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    shutil.copy(ROOT / "buf.yaml", tmp_path)
    proto = tmp_path / "protos" / "gym_metrics" / "v1" / "jobs.proto"
    proto.write_text(proto.read_text().replace("  // The id SubmitJob answered.\n", "", 1))
    done = buf("lint", cwd=tmp_path)
    assert done.returncode != 0 and "should have a non-empty comment" in done.stdout, done.stdout + done.stderr


def test_nothing_breaks_the_last_release_but_what_buf_yaml_lists() -> None:
    if not (ROOT / ".git").exists():
        pytest.fail("the breaking-change check needs the git history (a clone, not an archive)")
    done = buf("breaking", "--against", f".git#ref={RELEASE_COMMIT},subdir=protos")
    assert done.returncode == 0, f"against {RELEASED}: " + done.stdout + done.stderr


def test_breaking_fails_on_a_removed_field(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    shutil.copy(ROOT / "buf.yaml", tmp_path)
    against = tmp_path / "now.binpb"
    assert buf("build", "-o", str(against), cwd=tmp_path).returncode == 0
    proto = tmp_path / "protos" / "gym_metrics" / "v1" / "jobs.proto"
    proto.write_text(proto.read_text().replace("  int64 rows_failed = 5;\n", "", 1))
    done = buf("breaking", "--against", str(against), cwd=tmp_path)
    assert done.returncode != 0 and "rows_failed" in done.stdout, done.stdout + done.stderr
