"""Record NeMo Gym 0.7.0 running a benchmark whose agent is its own code (the test tree's
benchmarks/demo_agent: responses_api_agents/demo_two_turn_agent, two turns through its own
/v1/responses, a tool of its resources server probed, a row that makes it raise), for
tests/nemo_gym/test_agent_code.py to hold `collect --benchmark` to.

The rows are the ones NeMo Gym's own `gym eval run` dispatches for that benchmark (read from
tests/data/nemo_gym_configs/benchmarks.json, which scripts/make_nemo_benchmark_reference.py
records); each is POSTed to the agent's `/run` by check-env's NeMo Gym side
(gym_metrics/nemo_gym/_nemo_side.py --episodes: every server its real FastAPI app under uvicorn,
one row at a time), against gym-metrics' scripted policy answering POLICY, then the kept answers
to the agent's `/aggregate_metrics`, as NeMo Gym's collection posts them. Then once more observed
(`observed`: `--observe`, NeMo Gym's `observability_enabled` with its openai_model server and
its model-call capture in front of the policy): each answer with what NeMo Gym's collection adds
(`ng_model_call_capture`, the agent's `ng_agent_observations` joined, `ng_trajectory`, `ng_perf`).

`wheel`: agents of the wheel itself, as check-env --episodes runs them (WHEEL_AGENTS): the
environment and its agent copied from the unzipped wheel (--wheel), each env's
`data/example_rollouts.jsonl` indexed as the collector indexes it and replayed by a scripted
policy (`wheel_policy`), NeMo Gym's answers, the tasks it ran and its
metrics recorded. speed_bench's `vllm_base_url` is pointed at a static `/metrics` page without
speculative-decoding counters (METRICS_PAGE: the environment then records none, on both sides).

Run with gym-metrics' Python (the policy is served from here), NeMo Gym's given:

    .venv/bin/python scripts/make_nemo_agent_code_reference.py --nemo-python /tmp/ngvenv/bin/python \\
        --wheel /tmp/ng --out tests/data/nemo_gym_configs/agent_code.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

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


WHEEL_AGENTS = {"speed_bench": "speed_bench_agent"}
METRICS_PAGE = b"# no speculative decoding here\n"


def wheel_root(wheel: Path, env: str, agent: str, target: Path, metrics_url: str) -> Path:
    """`target` holding the wheel's environment and agent as NeMo Gym has them, speed_bench's
    metrics page pointed at `metrics_url`."""
    shutil.copytree(wheel / "resources_servers" / env, target / "resources_servers" / env)
    shutil.copytree(wheel / "responses_api_agents" / agent, target / "responses_api_agents" / agent)
    for config in (target / "resources_servers" / env / "configs").glob("*.yaml"):
        config.write_text(config.read_text().replace("vllm_base_url: ${policy_base_url}", f"vllm_base_url: {metrics_url}"))
    return target


def metrics_page() -> Any:
    """A static `/metrics` page on loopback (a context manager; its `.url`)."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(len(METRICS_PAGE)))
            self.end_headers()
            self.wfile.write(METRICS_PAGE)

        def log_message(self, *args: Any) -> None:
            pass

    class Served(contextlib.AbstractContextManager):  # type: ignore[type-arg]
        def __enter__(self) -> Any:
            self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
            self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
            threading.Thread(target=self.server.serve_forever, daemon=True).start()
            return self

        def __exit__(self, *exc: Any) -> None:
            self.server.shutdown()
            self.server.server_close()

    return Served()


def wheel_policy(rows: list[dict[str, Any]]) -> Any:
    """The rollouts' recorded model turns replayed (replayed_script), and for a prompt they do not
    hold (speed_bench_agent's earlier user turns, each a call of its own) a reply made from it."""
    from gym_metrics.testing._replay import replayed_script

    script = replayed_script(rows)
    return lambda prompt: script.get(prompt) or f"Noted: {prompt[:40]}"


def record_wheel_agent(wheel: Path, env: str, nemo_python: str) -> dict[str, Any]:
    import orjson

    from gym_metrics.testing._nemo_check import _indexed, _nemo
    with tempfile.TemporaryDirectory(prefix="agent-code-wheel-") as tmp, metrics_page() as page:
        root = wheel_root(wheel, env, WHEEL_AGENTS[env], Path(tmp) / "root", page.url)
        agent = f"{env}_simple_agent"
        indexed = _indexed(root / "resources_servers" / env / "data" / "example_rollouts.jsonl", agent, Path(tmp) / "rows.jsonl")
        rows = [orjson.loads(line) for line in indexed.read_bytes().splitlines() if line.strip()]
        with ScriptedPolicyServer(wheel_policy(rows)) as policy:
            nemo = _nemo(root, env, indexed, nemo_python, None, Path(tmp) / "nemo.json", 600, ["--episodes", "--policy-port", str(policy.port)])
    return {"rows": rows, **nemo}


def run_tree(nemo_python: str, rows: list[dict[str, Any]], observe: bool = False) -> dict[str, Any]:
    """NeMo Gym's side on the test tree's benchmark (observed: through its capturing model server)."""
    with tempfile.TemporaryDirectory(prefix="agent-code-ref-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(TREE, tree)
        (Path(tmp) / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        (Path(tmp) / "capture").mkdir()
        with ScriptedPolicyServer(POLICY) as policy:
            command = [
                nemo_python, str(ROOT / "gym_metrics" / "nemo_gym" / "_nemo_side.py"), "--root", str(tree), "--env", "demo_env",
                "--config", CONFIG, "--rows", str(Path(tmp) / "rows.jsonl"), "--out", str(Path(tmp) / "nemo.json"),
                "--episodes", "--policy-port", str(policy.port), *(["--observe", str(Path(tmp) / "capture")] if observe else []),
            ]  # fmt: skip
            subprocess.run(command, check=True, timeout=600)
        return json.loads((Path(tmp) / "nemo.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nemo-python", required=True)
    parser.add_argument("--wheel", type=Path, required=True, help="the unzipped nemo-gym 0.7.0 wheel")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    wheel = {env: record_wheel_agent(args.wheel, env, args.nemo_python) for env in WHEEL_AGENTS}
    rows = dispatched_rows()
    nemo = run_tree(args.nemo_python, rows)
    observed = run_tree(args.nemo_python, rows, observe=True)
    record = {"config": CONFIG, "policy": POLICY, "rows": rows, **nemo, "wheel": wheel, "observed": {"responses": observed["responses"]}}
    args.out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(nemo['responses'])} answers, {len(nemo['metrics'])} agents' metrics")


if __name__ == "__main__":
    main()
