#!/usr/bin/env bash
# Line and branch coverage of gym_metrics by the README's test command (`-m "not alone"`, two
# workers), the processes the tests start included (the CLI's serve/collect subprocesses: coverage's
# `patch = subprocess`; a process killed by a signal loses its share). Needs pytest-cov (not in
# the dev extra: `pip install pytest-cov`). The data stays in a temporary folder, printed at the
# end, for `coverage report -m --include=PATH` on the modules you look at; its COVERAGE_RCFILE is
# printed with it. Usage: scripts/coverage.sh [pytest args...] (about 18 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
python="$PWD/.venv/bin/python"
"$python" -c "import pytest_cov" 2>/dev/null || { echo "pytest-cov is not installed: $python -m pip install pytest-cov" >&2; exit 2; }
out="$(mktemp -d)"
cat > "$out/rc" <<EOF
[run]
branch = True
source = gym_metrics
parallel = True
patch = subprocess
data_file = $out/.coverage
concurrency = thread,multiprocessing
EOF
if [ $# -eq 0 ]; then set -- -q -n 2 -m "not alone" -p no:randomly; fi
COVERAGE_RCFILE="$out/rc" "$python" -m pytest "$@" --cov --cov-config="$out/rc" --cov-report= || echo "(some tests failed: the figures count what ran)" >&2
COVERAGE_RCFILE="$out/rc" "$python" -m coverage report --sort=miss --skip-covered | tail -40
echo "data: $out/.coverage; more with: COVERAGE_RCFILE=$out/rc $python -m coverage report -m --include=gym_metrics/PATH"
