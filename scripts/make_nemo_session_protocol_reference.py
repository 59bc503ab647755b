"""Record NeMo Gym 0.7.0 running its own example of the session protocol
(`resources_servers/example_single_tool_call/configs/example_single_tool_call_single_agent_turn.yaml`:
simple_agent's agent sessions behind the `single_agent_turn_legacy` environment server), for
tests/nemo_gym/test_session_protocol.py to hold `collect` to.

The rows are the environment's `data/example.jsonl`, indexed and named for the config's session
agent; a scripted policy answers each prompt with a `get_weather` call and then a text (one prompt
it has no answer for: that episode fails at the agent's step). Each row is POSTed to the
environment server's `/run` by check-env's NeMo Gym side (gym_metrics/nemo_gym/_nemo_side.py
--episodes: the resources server, the agent, the environment server and NeMo Gym's openai_model
server in front of the policy, each its real FastAPI app under uvicorn), the kept answers then to
the environment server's `/aggregate_metrics`. Then once more observed (`observed`: `--observe`,
NeMo Gym's `observability_enabled`: the agent's session evidence comes back at its close as
`ng_agent_observations`, its model calls captured by the openai_model server, `ng_trajectory`
projected by the collection's own functions). And the same environment's flat config observed
(`flat_observed`: simple_agent's own `/run` behind the legacy_agent relay, its own trajectory).
And a stateful server behind the same environment server (`stateful`: example_session_state_mgmt,
whose `seed_session` takes the flat row's `initial_count`: the environment server seeds with a
ResourcesSeedSessionRequest, which it refuses, so every episode fails at its seed, terminal).

    .venv/bin/python scripts/make_nemo_session_protocol_reference.py --nemo-python /tmp/ngvenv/bin/python \\
        --wheel /tmp/ng --out tests/data/nemo_gym_session_protocol.json
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
ENV = "example_single_tool_call"
CONFIG = "example_single_tool_call_single_agent_turn"
AGENT = "example_single_tool_call_session_agent"
FLAT_CONFIG, FLAT_AGENT = "example_single_tool_call", "example_single_tool_call_simple_agent"
"""The same environment's flat config: simple_agent's own `/run` behind the legacy_agent relay."""
FAILING = "humidity in sf"
"""The prompt the policy has no answer for."""
STATEFUL_ENV, STATEFUL_CONFIG, STATEFUL_AGENT = "example_session_state_mgmt", "session_state_single_agent_turn", "state_session_agent"
STATEFUL_YAML = f"""config_paths:
  - environment_servers/single_agent_turn_legacy/configs/single_agent_turn_legacy.yaml
{STATEFUL_ENV}:
  resources_servers:
    {STATEFUL_ENV}:
      entrypoint: app.py
      domain: agent
      verified: false
      description: Session state management (in-memory)
{STATEFUL_AGENT}:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      resources_server:
        type: resources_servers
        name: {STATEFUL_ENV}
      model_server:
        type: responses_api_models
        name: policy_model
state_single_agent_turn:
  _inherit_from: single_agent_turn_legacy
  environment_servers:
    single_agent_turn_legacy:
      resources_server:
        type: resources_servers
        name: {STATEFUL_ENV}
      agent_server:
        type: responses_api_agents
        name: {STATEFUL_AGENT}
      resources_tool_transports:
      - direct_http
"""
"""The stateful case's config (the test writes the same into its port)."""
FOLDERS = (f"resources_servers/{ENV}", f"resources_servers/{STATEFUL_ENV}", "environment_servers/single_agent_turn_legacy", "environment_servers/single_agent_turn",
           "responses_api_agents/simple_agent")  # fmt: skip


def script(prompt: str) -> list[dict[str, Any]]:
    """The policy's turns for `prompt` (PolicyAnswer fields)."""
    city = "San Francisco" if "sf" in prompt else "Paris"
    return [{"tool_calls": [{"name": "get_weather", "arguments": {"city": city}}]}, {"text": f"About {prompt}: it is cold in {city}."}]


def rows(wheel: Path, agent: str = AGENT) -> list[dict[str, Any]]:
    lines = (wheel / "resources_servers" / ENV / "data" / "example.jsonl").read_text().splitlines()
    return [json.loads(line) | {"agent_ref": {"name": agent}, "_ng_task_index": i, "_ng_rollout_index": 0} for i, line in enumerate(lines)]


def policy_script(tasks: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    prompts = [task["responses_create_params"]["input"][-1]["content"] for task in tasks]
    return {prompt: script(prompt) for prompt in prompts if prompt != FAILING}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo-python", required=True)
    parser.add_argument("--wheel", type=Path, required=True, help="the unzipped nemo-gym 0.7.0 wheel")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    tasks = rows(args.wheel)
    answers = policy_script(tasks)
    nemo = run(args, tasks, answers)
    observed = run(args, tasks, answers, observe=True)
    flat_tasks = rows(args.wheel, FLAT_AGENT)
    flat = run(args, flat_tasks, answers, observe=True, config=FLAT_CONFIG)
    lines = (args.wheel / "resources_servers" / STATEFUL_ENV / "data" / "example.jsonl").read_text().splitlines()[:3]
    stateful_tasks = [json.loads(line) | {"agent_ref": {"name": STATEFUL_AGENT}, "_ng_task_index": i, "_ng_rollout_index": 0} for i, line in enumerate(lines)]
    stateful_policy = {t["responses_create_params"]["input"][-1]["content"]: [{"text": "done"}] for t in stateful_tasks}
    stateful = run(args, stateful_tasks, stateful_policy, env=STATEFUL_ENV, config=STATEFUL_CONFIG)
    record = {"config": CONFIG, "policy": answers, "rows": tasks, "responses": nemo["responses"], "metrics": nemo["metrics"],
              "stateful": {"config": STATEFUL_CONFIG, "yaml": STATEFUL_YAML, "policy": stateful_policy, "rows": stateful_tasks, "responses": stateful["responses"]},
              "observed": {"responses": observed["responses"]},
              "flat_observed": {"config": FLAT_CONFIG, "rows": flat_tasks, "responses": flat["responses"]}}  # fmt: skip
    args.out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(nemo['responses'])} answers, {len(nemo['metrics'])} metrics entries, observed too")


def run(args: argparse.Namespace, tasks: list[dict[str, Any]], answers: dict[str, list[dict[str, Any]]], observe: bool = False,
        config: str = CONFIG, env: str = ENV) -> dict[str, Any]:
    """NeMo Gym's side on the example (observed: `observability_enabled`, through its capturing model server)."""
    with tempfile.TemporaryDirectory(prefix="session-protocol-") as tmp:
        tree = Path(tmp) / "tree"
        for folder in FOLDERS:
            shutil.copytree(args.wheel / folder, tree / folder)
        (tree / "resources_servers" / STATEFUL_ENV / "configs" / f"{STATEFUL_CONFIG}.yaml").write_text(STATEFUL_YAML)
        (Path(tmp) / "rows.jsonl").write_text("".join(json.dumps(task) + "\n" for task in tasks))
        policy = ScriptedPolicyServer({prompt: [PolicyAnswer(**step) for step in steps] for prompt, steps in answers.items()})
        with policy:
            command = [
                args.nemo_python, str(ROOT / "gym_metrics" / "nemo_gym" / "_nemo_side.py"), "--root", str(tree), "--env", env,
                "--config", config, "--rows", str(Path(tmp) / "rows.jsonl"), "--out", str(Path(tmp) / "nemo.json"),
                "--episodes", "--policy-port", str(policy.port), *(["--observe", str(Path(tmp) / "capture")] if observe else []),
            ]  # fmt: skip
            subprocess.run(command, check=True, timeout=600)
        out: dict[str, Any] = json.loads((Path(tmp) / "nemo.json").read_text())
        return out


if __name__ == "__main__":
    main()
