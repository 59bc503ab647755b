"""`gym-metrics check-env` over the NeMo Gym 0.7.0 environments that serve without an external
service and are not in the test suites (docs/nemo-gym.md's "35 of 36" figure): each on its own
`data/example_rollouts.jsonl` (else `example.jsonl`), one line per environment, then the count.

    python scripts/check_nemo_envs.py --root /tmp/ng --nemo-python /tmp/ngvenv/bin/python \
        [--gym-metrics .venv/bin/gym-metrics] [ENV ...]

`--root` is the unzipped wheel; both venvs need the environments' PyPI packages (the list in
docs/nemo-gym-environments.md) for every one of them to run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

UNSEEN = [
    "agentif", "arc_agi", "asr_with_pc", "assaybench", "calendar", "circle_click", "circle_count", "citation_if",
    "code_gen", "example_mcp_weather", "example_multi_step", "fukuyamabench", "generative_reward_model", "iheval",
    "imo_gradingbench", "indirect_prompt_injection", "interactive_browser", "longmemeval", "math_advanced_calculations",
    "math_proof_judgement", "math_with_code", "moldetox", "nvarc", "proof_genselect", "reasoning_gym", "ruler",
    "scicode", "scicodepile", "structeval", "structured_outputs", "swe_pivot", "swerl_gen", "swerl_llm_judge",
    "terminal_multi_harness", "terminus_judge", "workplace_assistant",
]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--nemo-python", required=True)
    parser.add_argument("--gym-metrics", default=str(Path(sys.executable).with_name("gym-metrics")))
    parser.add_argument("envs", nargs="*", default=UNSEEN)
    args = parser.parse_args()
    equal = 0
    for env in args.envs:
        data = args.root / "resources_servers" / env / "data"
        rows = data / "example_rollouts.jsonl" if (data / "example_rollouts.jsonl").exists() else data / "example.jsonl"
        command = [args.gym_metrics, "check-env", "--root", str(args.root), "--env", env, "--rollouts", str(rows), "--nemo-python", args.nemo_python]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        last = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or ["(no output)"])[-1]
        equal += done.returncode == 0
        print(f"{env}: {last[:200]}", flush=True)
    print(f"{equal} of {len(args.envs)} equal to NeMo Gym")
    return 0


if __name__ == "__main__":
    sys.exit(main())
