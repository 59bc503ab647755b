"""Record NeMo Gym 0.7.0 running a benchmark whose agent is its own code (the test tree's
benchmarks/demo_agent: responses_api_agents/demo_two_turn_agent, two turns through its own
/v1/responses, a tool of its resources server probed, a row that makes it raise), for
tests/nemo_gym/test_agent_code.py to hold `collect --benchmark` to.

The rows are the ones NeMo Gym's own `gym eval run` dispatches for that benchmark (read from
tests/data/nemo_gym_configs/benchmarks.json, which scripts/make_nemo_benchmark_reference.py
records); each is POSTed to the agent's `/run` by check-env's NeMo Gym side
(gym_metrics/nemo_gym/_nemo_side.py --episodes: every server its real FastAPI app under uvicorn,
one row at a time), against gym-metrics' scripted policy answering POLICY, then the kept answers
to the agent's `/aggregate_metrics`, as NeMo Gym's collection posts them.

Run with gym-metrics' Python (the policy is served from here), NeMo Gym's given:

    .venv/bin/python scripts/make_nemo_agent_code_reference.py --nemo-python /tmp/ngvenv/bin/python \\
        --out tests/data/nemo_gym_configs/agent_code.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from gym_metrics.testing import ScriptedPolicyServer

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "tests" / "data" / "nemo_gym_configs" / "tree"
BENCHMARKS = ROOT / "tests" / "data" / "nemo_gym_configs" / "benchmarks.json"
CONFIG = "benchmarks/demo_agent/config.yaml"
POLICY = {
    "What is 2+2?\n(Reply with the answer only.)": "4",
    "You said: 4. Your final answer, in one word?": "4",
    "Name a primary colour.\n(Reply with the answer only.)": "Blue",
    "You said: Blue. Your final answer, in one word?": "blue",
    "Capital of France?\n(Reply with the answer only.)": "Paris",
    "You said: Paris. Your final answer, in one word?": "Paris",
    "What is 3+3?\n(Reply with the answer only.)": "6",
}


def dispatched_rows() -> list[dict]:
    """The rows NeMo Gym's rollout collection dispatched for the benchmark (recorded)."""
    cases = json.loads(BENCHMARKS.read_text())["cases"]
    return cases[CONFIG]["rows"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo-python", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = dispatched_rows()
    with tempfile.TemporaryDirectory(prefix="agent-code-ref-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(TREE, tree)
        (Path(tmp) / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        with ScriptedPolicyServer(POLICY) as policy:
            command = [
                args.nemo_python, str(ROOT / "gym_metrics" / "nemo_gym" / "_nemo_side.py"), "--root", str(tree), "--env", "demo_env",
                "--config", CONFIG, "--rows", str(Path(tmp) / "rows.jsonl"), "--out", str(Path(tmp) / "nemo.json"),
                "--episodes", "--policy-port", str(policy.port),
            ]  # fmt: skip
            subprocess.run(command, check=True, timeout=600)
        nemo = json.loads((Path(tmp) / "nemo.json").read_text())
    args.out.write_text(json.dumps({"config": CONFIG, "policy": POLICY, "rows": rows, **nemo}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(nemo['responses'])} answers, {len(nemo['metrics'])} agents' metrics")


if __name__ == "__main__":
    main()
