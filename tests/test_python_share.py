"""`--python-share K/N` (tests/conftest.py), how .ci/run shares the not-slow test files out
between its extra Pythons: the shares together are the whole selection, each file in exactly
one of them, and the tests marked `every_python` in every one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # (about CI's configuration: the same on every Python)

ROOT = Path(__file__).parents[1]
PATHS = ["tests/aggregate", "tests/transport/test_eager.py", "tests/scorers/test_judge_reply_parsing.py"]


def collected(*extra: str) -> set[str]:
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *extra, *PATHS],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return {line for line in run.stdout.splitlines() if "::" in line}


def test_the_shares_are_the_whole_and_every_python_tests_are_in_each() -> None:
    whole = collected()
    first, second = collected("--python-share", "0/2"), collected("--python-share", "1/2")
    everywhere = collected("-m", "every_python")
    assert first | second == whole and first and second
    assert first & second == everywhere and {t.split("::")[0] for t in everywhere} == {
        "tests/aggregate/test_deep_lines.py", "tests/transport/test_eager.py", "tests/scorers/test_judge_reply_parsing.py"}
    for one, other in ((first, second), (second, first)):  # a file not marked is in one share only, whole
        files = {t.split("::")[0] for t in one - everywhere}
        assert not any(t.split("::")[0] in files for t in other)
    bad = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--python-share", "2/2", PATHS[1]],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert bad.returncode == 4 and "--python-share '2/2': expected K/N with 0 <= K < N" in bad.stderr, bad.stderr
