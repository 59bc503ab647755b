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

from _evidence import EVIDENCE, stable

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


def test_an_observed_agents_evidence_is_recorded_as_under_nemo_gym(agent_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """collect --trajectory observes the run as NeMo Gym's collection does with
    `observability_enabled`: the agent is told (so it reports an observation bundle, or its own
    trajectory), its model calls are recorded as NeMo Gym's model server records them (its name,
    the `x-session-id` they were sent under, the body the agent sent, the answer as the server's
    typed model dumps it), the bundle is joined to them (a call adopted by its session, a reference
    unmatched, two ambiguous, a compaction's), and `ng_trajectory` and `ng_perf` are projected:
    every field equals NeMo Gym 0.7.0's on every row (recorded through its openai_model server
    and its collection's own functions), clocks and generated ids aside."""
    monkeypatch.chdir(agent_tree)
    assert _collect(agent_tree, "--trajectory") == 0
    mine = {_key(r): r for r in _lines(agent_tree / "out.jsonl")}
    theirs = {_key(r): r for r in REFERENCE["observed"]["responses"] if "_nemo_refused" not in r}
    assert set(mine) == set(theirs) and len(theirs) == 6
    for key, answer in theirs.items():
        assert [p for p in EVIDENCE if p in answer] == [p for p in EVIDENCE if p in mine[key]]
        for part in (p for p in EVIDENCE if p in answer):
            assert differences(stable(answer[part], {}), stable(mine[key][part], {}), f"{key}.{part}") == []
    bundle = mine[(0, 0)]["ng_agent_observations"]
    assert [(g["code"], g["invocation_id"]) for g in bundle["gaps"]] == [
        ("demo_partial", "critic"), ("model_call_reference_unmatched", "judge"),
        ("model_call_reference_ambiguous", "root"), ("model_call_reference_ambiguous", "root"),
    ]  # fmt: skip
    calls = mine[(0, 0)]["ng_model_call_capture"]["calls"]
    assert [c["client_session_id"] for c in calls] == ["root", "critic"] and "request" not in calls[0]  # (the trajectory holds the payloads)
    own = mine[(0, 1)]["ng_trajectory"]  # the agent's own trajectory, its task id replaced by NeMo Gym's, the mismatch a gap
    assert own["task_id"] == "0" and {"code": "producer_trajectory_identity_mismatch", "invocation_id": None, "detail": "task_id"} in own["gaps"]
    assert [t["turn_no"] for t in mine[(0, 0)]["ng_trajectory"]["turns"]] == [1, 1]  # a turn in each invocation that holds a call


def _collect_variant(tree: Path, monkeypatch: pytest.MonkeyPatch, impl: str, body: str, *flags: str) -> int:
    """collect --benchmark with the benchmark's agent block switched to an agent of another
    implementation (the demo agent with `body` added); its exit code."""
    folder = tree / "responses_api_agents" / impl
    folder.mkdir(parents=True)
    head = ("from gym_metrics.nemo_gym.base_responses_api_agent import Body\nfrom gym_metrics.nemo_gym.config_types import AggregateMetrics, AggregateMetricsRequest\n"
            "from responses_api_agents.demo_two_turn_agent import app\nfrom responses_api_agents.demo_two_turn_agent.app import TwoTurnAgent\n\n\n"
            "class Variant(TwoTurnAgent):\n")  # fmt: skip
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


def test_an_agent_reading_its_model_servers_answer_gets_every_field_nemo_gym_sends(agent_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent that posts to its model server itself and reads the answer's JSON gets what NeMo
    Gym's model server sends (its Response model dumped: every field, nulls too), not the
    policy's own shorter answer."""
    direct = (
        "    async def run(self, request: app.Request, body: TwoTurnRunRequest):\n"
        "        answer = await self.server_client.post(server_name=self.config.model_server.name, url_path='/v1/responses', json=body.responses_create_params)\n"
        "        raw = await answer.json()\n"
        "        return TwoTurnVerifyResponse(responses_create_params=body.responses_create_params, response=raw, reward=0.0, fields=sorted(raw))\n"
    )  # fmt: skip
    assert _collect_variant(agent_tree, monkeypatch, "direct_agent", direct.replace("TwoTurn", "app.TwoTurn")) == 0
    nemo_fields = sorted(next(r for r in REFERENCE["responses"] if "response" in r)["response"])  # NeMo Gym's Response, dumped
    assert {tuple(r["fields"]) for r in _lines(agent_tree / "out.jsonl")} == {tuple(nemo_fields)} and "incomplete_details" in nemo_fields


def test_a_rollout_its_agent_says_not_to_keep_is_in_neither_file_and_runs_again_on_resume(
    agent_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An answer marked `_ng_no_persist` (browsecomp_agent's harness failure, not the sample's) is
    written nowhere, as NeMo Gym's collection writes it, and said: the run's summary counts it,
    and `--resume` runs it again; a marked answer is not a silent 0 nor a dropped score."""
    flaky = (
        "    async def run(self, request: app.Request, body: app.TwoTurnRunRequest):\n"
        "        answer = await super().run(request, body)\n"
        "        if body.model_dump().get('_ng_task_index') == 1 and __import__('os').path.exists('harness_down'):\n"
        "            return app.TwoTurnVerifyResponse.model_validate(answer.model_dump() | {'reward': 0.0, '_ng_no_persist': True, '_ng_failure_class': 'kill_shaped', 'agent_error': 'TimeoutError: harness'})\n"
        "        return answer\n"
    )  # fmt: skip
    (agent_tree / "harness_down").touch()
    assert _collect_variant(agent_tree, monkeypatch, "flaky_agent", flaky) == 0
    out = capsys.readouterr()
    kept = {_key(r) for r in _lines(agent_tree / "out.jsonl")} | {_key(r) for r in _lines(agent_tree / "out_failures.jsonl")}
    assert kept == {(0, 0), (0, 1), (2, 0), (2, 1), (3, 0), (3, 1)}  # task 1's two rollouts: in neither file
    assert "2 rollouts not kept" in out.out and out.err.count("not kept (its answer says _ng_no_persist; class kill_shaped): TimeoutError: harness") == 2
    (agent_tree / "harness_down").unlink()
    assert _collect(agent_tree, "--resume") == 0
    rows = {_key(r): r for r in _lines(agent_tree / "out.jsonl")}
    assert (rows[(1, 0)]["reward"], rows[(1, 1)]["reward"]) == (0.0, 0.0) and len(rows) == 6  # run again, scored as the agent scores them


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
