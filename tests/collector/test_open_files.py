"""`collect --policy-concurrency N` raises the process's soft limit on open files to cover N
connections, or refuses N at start naming the flag when even the hard limit is short (else the
calls past it failed one by one with "Too many open files"). Each case in a process of its own,
its limits lowered first."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CODE = textwrap.dedent("""
    import resource, sys
    from gym_metrics._util.limits import ensure_open_files
    from gym_metrics.errors import InvalidInputError
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 256))
    try:
        ensure_open_files(int(sys.argv[1]), "--policy-concurrency")
    except InvalidInputError as exc:
        print("refused:", exc)
    print(*resource.getrlimit(resource.RLIMIT_NOFILE))
""")


@pytest.mark.parametrize(
    ("needed", "said"),
    [
        ("32", "64 256"),  # the soft limit covers it: left as it is
        ("200", "256 256"),  # raised to the hard limit
        ("1000", "refused: --policy-concurrency needs about 1,000 open files; this process may open 256 (its hard limit): "
                 "--policy-concurrency: raise the limit (ulimit -n 1000) or lower it\n64 256"),
    ],
)  # fmt: skip
def test_open_files_are_raised_to_cover_the_need_or_the_need_refused(needed: str, said: str) -> None:
    done = subprocess.run([sys.executable, "-c", CODE, needed], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == said
