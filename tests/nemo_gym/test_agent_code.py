"""NeMo Gym's own agents run by their ported code (docs/nemo-gym.md#agents): the test tree's
benchmarks/demo_agent, whose agent (responses_api_agents/demo_two_turn_agent) makes two model
turns through its own /v1/responses, probes a tool its resources server lacks, and raises on one
row, collected with `collect --benchmark` and held to what NeMo Gym 0.7.0 answered for the same
rows and policy (tests/data/nemo_gym_configs/agent_code.json, scripts/make_nemo_agent_code_reference.py);
a row of an agent whose code is not given stops the run instead of running simple_agent's loop."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.cli import main as cli_main
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.nemo_gym.port import port_folder
from gym_metrics.testing import ScriptedPolicyServer, serve_environment
from gym_metrics.testing._nemo_check import differences

DATA = Path(__file__).parents[1] / "data" / "nemo_gym_configs"
REFERENCE = json.loads((DATA / "agent_code.json").read_text())
CONFIG = REFERENCE["config"]
AGENT = "demo_agent_two_turn_agent"
STAMPS = ("_ng_environment_server", "_ng_result_type")
"""What NeMo Gym's collection adds to each row besides the agent's answer (check-env's NeMo side posts /run directly)."""


@pytest.fixture
def agent_tree(config_tree: Path) -> Path:
    port_folder(DATA / "tree" / "responses_api_agents" / "demo_two_turn_agent", config_tree / "responses_api_agents" / "demo_two_turn_agent")
    return config_tree


def _collect(tree: Path, *flags: str) -> int:
    with ScriptedPolicyServer(REFERENCE["policy"]) as policy:
        args = ["collect", "--benchmark", CONFIG, "--output", str(tree / "out.jsonl"), "--policy-url", policy.url,
                "--policy-model", "scripted", "--policy-api", "responses", *flags]  # fmt: skip
        return cli_main(args)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _key(row: dict[str, Any]) -> tuple[int, int]:
    return row["_ng_task_index"], row["_ng_rollout_index"]


def test_a_custom_agent_runs_its_own_code_as_under_nemo_gym(agent_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(agent_tree)
    assert _collect(agent_tree) == 0
    mine = {_key(r): r for r in _lines(agent_tree / "out.jsonl")}
    failed = {_key(r): r for r in _lines(agent_tree / "out_failures.jsonl")}
    theirs = {_key(r): r for r in REFERENCE["responses"]}
    assert set(mine) | set(failed) == set(theirs) and not set(mine) & set(failed)
    for key, answer in theirs.items():
        if "_nemo_refused" in answer:  # its /run raised: NeMo Gym's failed-run sidecar row, out of the score
            row = failed[key]
            assert (row["_ng_failure_class"], row["_ng_failure_http_status"]) == ("agent_run_error", answer["_nemo_refused"])
            assert row["_ng_failure_response_body"] == answer["_nemo_detail"] and "ValueError" in row["_ng_failure_response_body"]
            assert row["_ng_failure_type"] == "ClientResponseError" and row["_ng_failure_message"].startswith("500, message='Internal Server Error'")
            continue
        row = dict(mine[key])
        for stamp in STAMPS:
            row.pop(stamp)
        row["response"] = {**row["response"], "model": ""}  # (the policy's name: NeMo Gym's side named none)
        assert differences(answer, row, str(key)) == []
    assert sorted(r["reward"] for r in mine.values()) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert mine[(2, 0)]["probed"] == {"status": 404, "body": {"detail": "Not Found"}}  # a tool route it lacks: its own status
    usage = mine[(0, 0)]["response"]["usage"]  # the two turns' usage summed, as the agent sums them
    assert (usage["input_tokens"], usage["output_tokens"]) == (17, 2)
    metrics = json.loads((agent_tree / "out_aggregate_metrics.json").read_text())
    groups = metrics[0]["group_level_metrics"]
    # the task whose every rollout failed is kept as missing here (as for any agent); NeMo Gym's metrics leave it out
    assert groups[-1]["_ng_task_index"] == 3 and groups[-1]["missing_num_rollouts"] == 2
    metrics[0]["group_level_metrics"] = groups[:-1]
    assert differences(REFERENCE["metrics"], metrics, "metrics") == []


def _collect_variant(tree: Path, monkeypatch: pytest.MonkeyPatch, impl: str, body: str, *flags: str) -> int:
    """collect --benchmark with the benchmark's agent block switched to an agent of another
    implementation (the demo agent with `body` added); its exit code."""
    folder = tree / "responses_api_agents" / impl
    folder.mkdir(parents=True)
    head = ("from gym_metrics.nemo_gym.base_responses_api_agent import Body\nfrom gym_metrics.nemo_gym.config_types import AggregateMetrics, AggregateMetricsRequest\n"
            "from responses_api_agents.demo_two_turn_agent.app import TwoTurnAgent\n\n\nclass Variant(TwoTurnAgent):\n")  # fmt: skip
    (folder / "app.py").write_text(head + body)
    config = tree / CONFIG
    config.write_text(config.read_text().replace("demo_two_turn_agent:", f"{impl}:"))
    monkeypatch.chdir(tree)
    return _collect(tree, *flags)


def test_an_agent_that_forwards_its_aggregation_gets_its_resources_servers_metrics(agent_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forwards = (
        "    async def aggregate_metrics(self, body: AggregateMetricsRequest = Body()) -> AggregateMetrics:\n"
        "        answer = await self.server_client.post(server_name=self.config.resources_server.name, url_path='/aggregate_metrics', json=body)\n"
        "        return AggregateMetrics.model_validate(await answer.json())\n"
        "\n    def compute_metrics(self, tasks):\n        return {'never': 1}\n"
    )  # fmt: skip
    assert _collect_variant(agent_tree, monkeypatch, "forwarding_agent", forwards, "--capture-model-calls") == 0
    agent_metrics = json.loads((agent_tree / "out_aggregate_metrics.json").read_text())[0]["agent_metrics"]
    assert "never" not in agent_metrics and agent_metrics["mean/reward"] == pytest.approx(4 / 6)
    assert {len(r["ng_model_call_capture"]["calls"]) for r in _lines(agent_tree / "out.jsonl")} == {2}  # each row's two turns


def test_an_agent_with_hooks_of_its_own_is_aggregated_with_them(agent_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = (
        "    def compute_metrics(self, tasks):\n        return {'tasks_seen': len(tasks), 'rows_seen': sum(map(len, tasks))}\n"
        "\n    def get_key_metrics(self, agent_metrics):\n        return {'tasks_seen': agent_metrics['tasks_seen']}\n"
    )  # fmt: skip
    assert _collect_variant(agent_tree, monkeypatch, "hooked_agent", hooks) == 0
    entry = json.loads((agent_tree / "out_aggregate_metrics.json").read_text())[0]
    assert (entry["agent_metrics"]["tasks_seen"], entry["agent_metrics"]["rows_seen"]) == (3, 6)  # the failed task's rows are not scored
    assert entry["key_metrics"] == {"tasks_seen": 3}


def test_an_agent_that_aggregates_its_own_way_is_refused_before_it_runs(agent_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    own = (
        "    async def aggregate_metrics(self, body: AggregateMetricsRequest = Body()) -> AggregateMetrics:\n"
        "        return AggregateMetrics(agent_metrics={'mine': len(body.verify_responses)})\n"
    )  # fmt: skip
    assert _collect_variant(agent_tree, monkeypatch, "own_way_agent", own) == 2
    err = capsys.readouterr().err
    assert "agent demo_agent_two_turn_agent (own_way_agent) aggregates its own way" in err and "aggregate_metrics" in err
    assert _lines(agent_tree / "out.jsonl") == []


def test_an_agent_whose_code_is_not_there_stops_the_run(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(config_tree)
    assert _collect(config_tree) == 2
    err = capsys.readouterr().err
    assert "agent demo_agent_two_turn_agent (demo_two_turn_agent) has no code here" in err
    assert "python -m gym_metrics.nemo_gym.port" in err and "responses_api_agents/demo_two_turn_agent" in err
    assert _lines(config_tree / "out.jsonl") == []


async def test_without_the_config_a_custom_agents_rows_stop_the_run_and_with_it_they_run(agent_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`collect --server` alone knows the agent's implementation (the server's config says it)
    but not its code: its rows stop the run, never run as simple_agent's; `--agent-code CONFIG`
    names it, and the same rows run as under NeMo Gym."""
    monkeypatch.chdir(agent_tree)
    rows = agent_tree / "rows.jsonl"
    shutil.copyfile(agent_tree / "benchmarks" / "demo_agent" / "data" / "demo_agent_benchmark.jsonl", rows)
    async with serve_environment(load_config_server(Path(CONFIG))) as server:
        with ScriptedPolicyServer(REFERENCE["policy"]) as policy:
            args = ["collect", "--server", server.address, "--input", str(rows), "--agent", AGENT, "--prompt-config", "benchmarks/demo_eval/prompt.yaml",
                    "--output", str(agent_tree / "plain.jsonl"), "--policy-url", policy.url, "--policy-model", "m", "--policy-api", "responses"]  # fmt: skip
            assert await asyncio.to_thread(cli_main, args) == 2
            assert policy.requests == []
    err = capsys.readouterr().err
    assert "input line 1: agent 'demo_agent_two_turn_agent' is NeMo Gym's demo_two_turn_agent" in err and "--agent-code CONFIG.yaml" in err
    async with serve_environment(load_config_server(Path(CONFIG))) as server:  # the same rows, the agent's config named
        with ScriptedPolicyServer(REFERENCE["policy"]) as policy:
            args[args.index("--policy-url") + 1], args[args.index("--server") + 1] = policy.url, server.address
            assert await asyncio.to_thread(cli_main, [*args, "--agent-code", CONFIG, "--num-repeats", "2"]) == 0
    mine = {_key(r): r for r in _lines(agent_tree / "plain.jsonl")}
    theirs = {_key(r): r for r in REFERENCE["responses"] if "_nemo_refused" not in r}
    assert {k: mine[k]["reward"] for k in theirs} == {k: r["reward"] for k, r in theirs.items()}
    assert {k: mine[k]["response"]["usage"] for k in theirs} == {k: r["response"]["usage"] for k, r in theirs.items()}


def test_the_wheels_speed_bench_agent_runs_as_under_nemo_gym(ported: Any, tmp_path: Path) -> None:
    """NeMo Gym's own speed_bench_agent (it replays a row's user turns one model call each and
    sums their usage) on its environment's recorded rollouts, replayed: each row as NeMo Gym's
    agent answered it (the rows of several user turns too) and the metrics; `gen_seconds` (the
    time since the environment's first verify) is the one field that differs, as it is a clock."""
    import zipfile

    from gym_metrics.targets import ModelTargetConfig
    from gym_metrics.testing._nemo_check import _ours, _row_differences

    sys_path = Path(__file__).parents[2] / "scripts"
    recorded = REFERENCE["wheel"]["speed_bench"]
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(tmp_path / "wheel", [m for m in wheel.namelist() if m.startswith(("resources_servers/speed_bench/", "responses_api_agents/speed_bench_agent/"))])
    import importlib.util

    spec = importlib.util.spec_from_file_location("agent_code_reference", sys_path / "make_nemo_agent_code_reference.py")
    assert spec is not None and spec.loader is not None
    recorder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recorder)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(task) + "\n" for task in recorded["tasks"]))
    with recorder.metrics_page() as page, ScriptedPolicyServer(recorder.wheel_policy(recorded["rows"])) as policy:
        root = recorder.wheel_root(tmp_path / "wheel", "speed_bench", "speed_bench_agent", tmp_path / "root", page.url)
        work = tmp_path / "work"
        work.mkdir()
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
        rows, metrics = asyncio.run(_ours(root, "speed_bench", tasks, None, work, target))
    found = _row_differences(recorded["responses"], rows, compare_response=True)
    scored = {r["agent_ref"]["name"] for r in rows if "_gm_error" not in r and not r.get("_ng_failure_class")}
    found += differences(recorded["metrics"], [m for m in metrics if m["agent_ref"]["name"] in scored], "metrics")
    assert found and all("gen_seconds" in f for f in found), [f for f in found if "gen_seconds" not in f]
    assert not any("_nemo_refused" in r for r in recorded["responses"]) and not any(r.get("_ng_failure_class") for r in rows)
    turns = {len(r["responses_create_params"]["input"]): r["response"] for r in rows}  # rows of 1, 2 and 3 user turns
    assert sorted(turns) == [1, 2, 3] and len(turns[3]["output"]) == 3  # a model call a turn, their outputs kept
    assert turns[3]["usage"]["output_tokens"] > turns[1]["usage"]["output_tokens"]


async def test_a_server_lost_mid_run_is_raised_not_scored(agent_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resources server that fails under the agent's calls (gone, its session lost) is not the
    agent's failure: `run` raises it once the agent's `/run` has answered, so the collector
    starts the episode again (as for its own loop) instead of writing a failed-run row."""
    from gym_metrics._transport.client import ServerUnavailableError
    from gym_metrics.nemo_gym import load_agents
    from gym_metrics.targets import ModelTarget, ModelTargetConfig

    monkeypatch.chdir(agent_tree)
    program = load_agents(CONFIG)[AGENT]
    row = next(r for r in REFERENCE["rows"] if r["_ng_task_index"] == 0)

    class Routes:
        def __init__(self, lose: str) -> None:
            self.lose, self.paths = lose, []

        async def post(self, path: str, body: Any) -> tuple[int, str]:
            self.paths.append(path)
            if path == self.lose:
                raise ServerUnavailableError("the server went away")
            return (200, "{}") if path == "/seed_session" else (200, json.dumps({**body, "reward": 1.0}))

    with ScriptedPolicyServer(REFERENCE["policy"]) as policy:
        target = ModelTarget(ModelTargetConfig(url=policy.url, model="m", api="responses"))
        with pytest.raises(ServerUnavailableError, match="went away"):
            await program.run(row, Routes("/verify"), target)
        routes = Routes("")
        reward, text = await program.run(row, routes, target)
        await target.aclose()
    assert routes.paths == ["/seed_session", "/verify"] and reward == 1.0 and json.loads(text)["reward"] == 1.0
