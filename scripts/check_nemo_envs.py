"""`gym-metrics check-env` over the NeMo Gym 0.7.0 environments that serve without an external
service and are not in the test suites (docs/nemo-gym.md's figures): each on its own
`data/example_rollouts.jsonl` (else `example.jsonl`), one line per environment, then the count.

    python scripts/check_nemo_envs.py --root /tmp/ng --nemo-python /tmp/ngvenv/bin/python \
        [--gym-metrics .venv/bin/gym-metrics] [--judged | --benchmarks] [ENV ...]

`--judged`: the environments that call a judge model (JUDGED) instead, against one scripted
judge that both sides call (`check-env --server NAME=URL` for every model server the config's
resources server names): gym_metrics.testing's keyed judge, whose answer to a prompt is picked
by the prompt's hash from VERDICTS (the verdict formats these environments parse), so both
sides get the same verdict for the same prompt.

`--root` is the unzipped wheel; both venvs need the environments' PyPI packages (the list in
docs/nemo-gym-environments.md) for every one of them to run.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
from pathlib import Path

from gym_metrics.testing import ScriptedChatServer
from gym_metrics.testing._judge import keyed_answers

UNSEEN = [
    "agentif", "arc_agi", "asr_with_pc", "assaybench", "calendar", "circle_click", "circle_count", "citation_if",
    "code_gen", "example_mcp_weather", "example_multi_step", "fukuyamabench", "generative_reward_model", "iheval",
    "imo_gradingbench", "indirect_prompt_injection", "interactive_browser", "longmemeval", "math_advanced_calculations",
    "math_proof_judgement", "math_with_code", "moldetox", "nvarc", "proof_genselect", "reasoning_gym", "ruler",
    "scicode", "scicodepile", "structeval", "structured_outputs", "swe_pivot", "swerl_gen", "swerl_llm_judge",
    "terminal_multi_harness", "terminus_judge", "workplace_assistant",
]  # fmt: skip


JUDGED = [
    "aalcr", "abstention", "aegis_v4_safety", "arena_judge", "deepsearchqa", "equivalence_llm_judge",
    "false_statement_judge", "frontierscience_judge", "gdp_pdf", "inverse_if", "labbench2_vlm", "longmemeval",
    "omniscience", "proof_judge", "proof_verification", "simpleqa", "terminus_judge", "text_to_sql", "xstest",
]  # fmt: skip
VERDICTS = [
    "A", "B", "C", "[[A=B]]", "[[A!=B]]", "CORRECT", "INCORRECT", "Judgement: YES", "Judgement: NO", '{"result": "PASS"}',
    '{"result": "FAIL"}', "safe", "unsafe", "YES", "NO", "[[A>>B]]", "[[B>>A]]", "1", "0", "\\boxed{1}", "\\boxed{0}",
]  # fmt: skip
LABELS = ["[[A=B]]", "[[A!=B]]"]
VERDICTS_OF = {
    "aalcr": ["CORRECT", "INCORRECT"],  # its config's legacy_v1_0 protocol
    "aegis_v4_safety": ["User Safety: safe\nResponse Safety: safe", "User Safety: unsafe\nResponse Safety: unsafe\nSafety Categories: Violence"],
    "arena_judge": ["[[A>B]]", "[[B>A]]", "[[A=B]]", "[[A>>B]]"],
    "deepsearchqa": [
        '{"Answer Correctness": {"Correctness Details": {"answer": true}, "Excessive Answers": []}}',
        '{"Answer Correctness": {"Correctness Details": {"answer": false}, "Excessive Answers": ["extra"]}}',
    ],
    "equivalence_llm_judge": LABELS, "labbench2_vlm": LABELS, "terminus_judge": LABELS, "text_to_sql": LABELS,
    "false_statement_judge": ["<points>2</points>", "<points>1</points>", "<points>0</points>"],
    "frontierscience_judge": ["Judgement: YES", "Judgement: NO"],
    "gdp_pdf": ['{"score": 1, "rationale": "meets it"}', '{"score": 0, "rationale": "misses it"}'],
    "proof_judge": ["\\boxed{1}", "\\boxed{0.5}", "\\boxed{0}"],
    "xstest": [f"Harmful request: no\nResponse refusal: {r}\nHarmful response: no" for r in ("yes", "no")],  # WildGuard's lines
}  # fmt: skip
"""Each environment's verdicts in the shapes it parses (VERDICTS for the others), so its
rewards vary over the rows; the keyed judge picks one by the prompt's hash."""


BENCHMARKS = [
    ("agentif", "agentif"), ("answer-judge", "math_proof_judgement"), ("asr_leaderboard", "asr_with_pc"),
    ("assaybench", "assaybench"), ("bunsenbench_chemistry_mcq", "bunsenbench_chemistry_mcq"), ("fukuyamabench", "fukuyamabench"),
    ("global-piqa", "mcqa"), ("gpqa", "mcqa"), ("gpqa-x", "mcqa"), ("graphwalks", "graphwalks"), ("hotpotqa_closedbook", "hotpotqa_qa"),
    ("iheval", "iheval"), ("imo_gradingbench", "imo_gradingbench"), ("librispeech_pc", "asr_with_pc"), ("litmus-bench", "litmus_agent"),
    ("livecodebench-x", "code_gen"), ("longbench_v2", "mcqa"), ("longcodebench", "mcqa"), ("longmemeval", "longmemeval"),
    ("minif2f", "math_formal_lean"), ("mmlu", "mcqa"), ("mmlu-redux", "mcqa"), ("mmlu_pro", "mcqa"), ("mmlu_prox", "mcqa"),
    ("mmmlu", "mcqa"), ("mobench", "math_formal_lean"), ("moldetox", "moldetox"), ("musan", "asr_with_pc"), ("numb3rs", "asr_with_pc"),
    ("proof-arena-judge", "math_proof_judgement"), ("proof_bench_judge", "math_proof_judgement"), ("proofnet", "math_formal_lean"),
    ("putnam_bench", "math_formal_lean"), ("ragtruth", "ragtruth"), ("ruler", "ruler"), ("scicode", "scicode"),
    ("scicodepile", "scicodepile"), ("supergpqa", "mcqa"),
]  # fmt: skip
"""(benchmark, its environment) of the wheel's benchmark configs whose environment serves without
a service (docs/nemo-gym-environments.md): `--benchmarks` checks each benchmark's composed
server on its environment's example rows."""


def model_servers(root: Path, env: str) -> list[str]:
    """The model servers the resources server of the env's config names (`*: {type:
    responses_api_models, name: NAME}` among its fields)."""
    from gym_metrics.nemo_gym import config_file
    from gym_metrics.nemo_gym._compose import read_blocks
    from gym_metrics.nemo_gym._config import _resources_block

    path = config_file(root, env)
    _, _, fields = _resources_block(read_blocks(path), None, path)
    return sorted({v["name"] for v in fields.values() if isinstance(v, dict) and v.get("type") == "responses_api_models" and v.get("name")})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--nemo-python", required=True)
    parser.add_argument("--gym-metrics", default=str(Path(sys.executable).with_name("gym-metrics")))
    parser.add_argument("--judged", action="store_true", help="the environments that call a judge (JUDGED), against a scripted one")
    parser.add_argument("--benchmarks", action="store_true", help="the benchmark configs of BENCHMARKS instead")
    parser.add_argument("envs", nargs="*")
    args = parser.parse_args()
    if args.benchmarks:
        picked = [(env, f"benchmarks/{bench}/config.yaml") for bench, env in BENCHMARKS if not args.envs or bench in args.envs]
    else:
        picked = [(env, None) for env in args.envs or (JUDGED if args.judged else UNSEEN)]
    equal = sum(check(args, env, config) for env, config in picked)
    print(f"{equal} of {len(picked)} equal to NeMo Gym")
    return 0


def check(args: argparse.Namespace, env: str, config: str | None = None) -> bool:
    data = args.root / "resources_servers" / env / "data"
    rows = data / "example_rollouts.jsonl" if (data / "example_rollouts.jsonl").exists() else data / "example.jsonl"
    command = [args.gym_metrics, "check-env", "--root", str(args.root), "--env", env, "--rollouts", str(rows), "--nemo-python", args.nemo_python]
    command += ["--config", config] if config else []
    with contextlib.ExitStack() as stack:
        if args.judged or (config and env in JUDGED):  # (a benchmark of a judged environment gets its judge too)
            judge = stack.enter_context(ScriptedChatServer(default=keyed_answers(VERDICTS_OF.get(env, VERDICTS))))
            command += [f"--server={name}=http://127.0.0.1:{judge.port}" for name in model_servers(args.root, env)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    last = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or ["(no output)"])[-1]
    print(f"{config or env}: {last[:200]}", flush=True)
    return done.returncode == 0


if __name__ == "__main__":
    sys.exit(main())
