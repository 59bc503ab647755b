"""Record NeMo Gym 0.7.0's two one-call agents, plain and observed, for
tests/nemo_gym/test_one_call_agents.py to hold `collect` to.

- `tool_simulation_agent`: the wheel's single_step_tool_use_with_argument_comparison config, its
  rows and scripted policy those of tests/data/nemo_gym_agent (one policy call, the answer
  verified; no session).
- `non_executing_simple_agent`: NeMo Gym's agent in front of example_session_state_mgmt (a config
  written here, `CONFIGS`: the wheel has none pairing the agent with a stateful server), whose
  verify reads what `/seed_session` stored: this agent seeds a session, then makes its one policy
  call (a string `input` sent as a user message) and verifies, running none of its tool calls.
  The example's rows and one more whose expected count is its initial one (reward 1 only where
  the session was seeded).

Each row is POSTed to its agent's `/run` by check-env's NeMo Gym side
(gym_metrics/nemo_gym/_nemo_side.py --episodes: every server its real FastAPI app under
uvicorn), then once more observed (`--observe`: NeMo Gym's `observability_enabled`, the calls
captured by its openai_model server, `ng_trajectory` projected by its collection's functions).

    .venv/bin/python scripts/make_nemo_one_call_reference.py --nemo-python /tmp/ngvenv/bin/python \\
        --wheel /tmp/ng --out tests/data/nemo_gym_one_call.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer

ROOT = Path(__file__).resolve().parents[1]
STATEFUL = "example_session_state_mgmt"
CONFIGS = {
    "non_executing_session_state": f"""\
{STATEFUL}_resources_server:
  resources_servers:
    {STATEFUL}:
      entrypoint: app.py
      domain: agent
      verified: false
      description: Session state management (in-memory)
{STATEFUL}_non_executing_agent:
  responses_api_agents:
    non_executing_simple_agent:
      entrypoint: app.py
      resources_server:
        type: resources_servers
        name: {STATEFUL}_resources_server
      model_server:
        type: responses_api_models
        name: policy_model
""",
}
"""Configs written into the environment's `configs/` (the test writes the same into its port)."""


def tool_simulation_case() -> dict[str, Any]:
    env = "single_step_tool_use_with_argument_comparison"
    folder = ROOT / "tests" / "data" / "nemo_gym_agent" / env
    rows = [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines()][:6]  # (rewards 1 and 0 both; its prompts are long)
    return {"env": env, "config": env, "agent_folder": "tool_simulation_agent", "rows": rows,
            "policy": json.loads((folder / "policy.json").read_text())}  # fmt: skip


def non_executing_case(wheel: Path) -> dict[str, Any]:
    agent = f"{STATEFUL}_non_executing_agent"
    lines = (wheel / "resources_servers" / STATEFUL / "data" / "example.jsonl").read_text().splitlines()
    tasks = [json.loads(line) for line in lines]
    tools = tasks[0]["responses_create_params"]["tools"]
    tasks.append({"responses_create_params": {"input": "get the count", "tools": tools}, "expected_count": 3, "initial_count": 3})
    rows = [task | {"agent_ref": {"name": agent}, "_ng_task_index": i, "_ng_rollout_index": 0} for i, task in enumerate(tasks)]
    policy: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        given = task["responses_create_params"]["input"]
        prompt = given if isinstance(given, str) else given[-1]["content"]
        step = {"tool_calls": [{"name": "increment_counter", "arguments": {"count": 1}}]} if "add" in prompt else {"text": "The count is 3."}
        policy[prompt] = [step]
    return {"env": STATEFUL, "config": "non_executing_session_state", "agent_folder": "non_executing_simple_agent", "rows": rows, "policy": policy}


def run(args: argparse.Namespace, case: dict[str, Any], observe: bool) -> dict[str, Any]:
    """NeMo Gym's answers to the case's rows (observed: through its capturing model server) and
    the rows as posted (`tasks`: their requests' null fields left out, as NeMo Gym dumps them)."""
    with tempfile.TemporaryDirectory(prefix="one-call-") as tmp:
        tree = Path(tmp) / "tree"
        for folder in (f"resources_servers/{case['env']}", f"responses_api_agents/{case['agent_folder']}"):
            shutil.copytree(args.wheel / folder, tree / folder)
        if case["config"] in CONFIGS:
            (tree / "resources_servers" / case["env"] / "configs" / f"{case['config']}.yaml").write_text(CONFIGS[case["config"]])
        (Path(tmp) / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in case["rows"]))
        policy = ScriptedPolicyServer({prompt: [PolicyAnswer(**step) for step in steps] for prompt, steps in case["policy"].items()})
        with policy:
            command = [
                args.nemo_python, str(ROOT / "gym_metrics" / "nemo_gym" / "_nemo_side.py"), "--root", str(tree), "--env", case["env"],
                "--config", case["config"], "--rows", str(Path(tmp) / "rows.jsonl"), "--out", str(Path(tmp) / "nemo.json"),
                "--episodes", "--policy-port", str(policy.port), *(["--observe", str(Path(tmp) / "capture")] if observe else []),
            ]  # fmt: skip
            subprocess.run(command, check=True, timeout=600)
        out: dict[str, Any] = json.loads((Path(tmp) / "nemo.json").read_text())
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo-python", required=True)
    parser.add_argument("--wheel", type=Path, required=True, help="the unzipped nemo-gym 0.7.0 wheel")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    record: dict[str, Any] = {"configs": CONFIGS}
    for name, case in (("tool_simulation_agent", tool_simulation_case()), ("non_executing_simple_agent", non_executing_case(args.wheel))):
        plain, observed = run(args, case, observe=False), run(args, case, observe=True)
        record[name] = case | {"rows": plain["tasks"], "responses": plain["responses"], "observed": observed["responses"]}
        rewards = [r.get("reward") for r in record[name]["responses"]]
        print(f"{name}: {len(rewards)} answers, rewards {rewards}")
    args.out.write_text(json.dumps(record) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
