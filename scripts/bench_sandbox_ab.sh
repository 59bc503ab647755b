#!/usr/bin/env bash
# The sandbox's warm runs, this checkout against an earlier commit, side by side: each round
# runs scripts/bench_sandbox.py of the earlier commit (in a worktree of it, with this venv) and
# this checkout's, one after the other, who goes first alternating, so both see the same machine; then the medians of the rounds per
# configuration. Usage: scripts/bench_sandbox_ab.sh OLD_COMMIT [ROUNDS] [bench_sandbox.py args...]
# (BENCHMARKS.md, "The sandbox fails closed": OLD_COMMIT 1797b0a, 3 rounds, --runs 300 --concurrency 1
# or 4; and --verifies 2000 --rounds 1, whose rounds are printed as they are).
set -euo pipefail
cd "$(dirname "$0")/.."
old="$1"; rounds="${2:-3}"; shift $(( $# >= 2 ? 2 : 1 ))
if [ $# -gt 0 ]; then args=("$@"); else args=(--runs 300 --rounds 1 --concurrency 1 4); fi
python="$PWD/.venv/bin/python"
tree="$(mktemp -d)/old"
git worktree add -q --detach "$tree" "$old"
trap 'git worktree remove --force "$tree"' EXIT
out="$(mktemp)"
run_old() {
    echo "=== old round $1" | tee -a "$out"
    (cd "$tree" && PYTHONPATH="$tree" "$python" scripts/bench_sandbox.py "${args[@]}") 2>/dev/null | tee -a "$out" >/dev/null
}
run_new() {
    echo "=== new round $1" | tee -a "$out"
    "$python" scripts/bench_sandbox.py "${args[@]}" 2>/dev/null | tee -a "$out" >/dev/null
}
for r in $(seq "$rounds"); do  # who goes first alternates: the second side of a round ran slower by 10-15%
    if [ $((r % 2)) -eq 1 ]; then run_old "$r"; run_new "$r"; else run_new "$r"; run_old "$r"; fi
done
grep -E "^=== |verifies at once" "$out" | grep -B1 "verifies at once" || true  # --verifies: one line a round
python3 - "$out" <<'PY'
import collections, re, statistics, sys
text = open(sys.argv[1]).read()
parts = re.split(r"=== (old|new) round \d+\n", text)[1:]
rows = collections.defaultdict(list)
for who, body in zip(parts[::2], parts[1::2]):
    for m in re.finditer(r"\| (\w+) \| ([\w+]+) \| (\d+) \| ([\d,]+) \| ([\d.]+) \| ([\d.]+) \|", body):
        kind, name, at_once, rate, p50, p99 = m.groups()
        rows[(int(at_once), kind, name, who)].append((float(rate.replace(",", "")), float(p50), float(p99)))
print("| at once | program | configuration | commit | runs/s | p50 ms | p99 ms |")
print("|---:|---|---|---|---:|---:|---:|")
for (at_once, kind, name, who), values in sorted(rows.items()):
    rate, p50, p99 = (statistics.median(v[i] for v in values) for i in range(3))
    print(f"| {at_once} | {kind} | {name} | {who} | {rate:,.0f} | {p50:.1f} | {p99:.1f} |")
PY
