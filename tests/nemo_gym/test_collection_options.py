"""NeMo Gym 0.7.0's collection options as `collect` flags, each held to what NeMo Gym's own
preprocessing did (tests/data/nemo_gym_configs/benchmarks.json): `--num-repeats-add-seed`
(each generated rollout's index as the seed in its request's `metadata.extra_body`, which a chat
endpoint then gets in its body as NeMo Gym's vLLM model server sends it), `--interleave-repeats`,
`--agent-map`, `--fan-out` and `--num-repeats AGENT=K`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gym_metrics.cli import main as cli_main
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.testing import ScriptedPolicyServer, serve_environment

SEEDED = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_configs" / "benchmarks.json").read_text())["seeded"]


async def test_each_rollout_gets_its_index_as_seed(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(config_tree)
    rows = config_tree / "benchmarks/demo_decoupled/data/rows.jsonl"
    out = config_tree / "out.jsonl"
    async with serve_environment(load_config_server(Path("benchmarks/demo_decoupled/config.yaml"))) as server:
        with ScriptedPolicyServer({"Say yes.": "yes", "Say no.": "no", "Say yes!": "yes"}) as policy:
            args = ["collect", "--server", server.address, "--input", str(rows), "--output", str(out), "--agent", "demo_env_simple_agent",
                    "--num-repeats", "2", "--num-repeats-add-seed", "--policy-url", policy.url, "--policy-model", "scripted"]  # fmt: skip
            assert await asyncio.to_thread(cli_main, args) == 0
            bad = config_tree / "bad.jsonl"  # NeMo Gym fails the run on it (a list has no "seed"); collect names the line
            bad.write_text(rows.read_text() + '{"responses_create_params": {"input": "hi", "metadata": {"extra_body": "[1]"}}}\n')
            flags = ["--input", str(bad), "--output", str(config_tree / "bad_out.jsonl"), "--on-bad-line", "skip"]
            assert await asyncio.to_thread(cli_main, [*args[:3], *flags, *args[7:]]) in (0, 1)
            said = capsys.readouterr().err
            assert "line 4" in said and "metadata.extra_body" in said and "is not a JSON object" in said, said
            sent = sorted((r.body["messages"][-1]["content"], r.body["seed"], tuple(r.body.get("stop") or ())) for r in policy.requests)
    assert sent == sorted(2 * [("Say no.", 0, ()), ("Say no.", 1, ()), ("Say yes!", 0, ("!",)), ("Say yes!", 1, ("!",)), ("Say yes.", 0, ()), ("Say yes.", 1, ())])
    written = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in map(json.loads, out.read_text().splitlines())}
    assert {k: r["responses_create_params"]["metadata"] for k, r in written.items()} == {
        (r["_ng_task_index"], r["_ng_rollout_index"]): r["responses_create_params"]["metadata"] for r in SEEDED
    }
    assert all(r["reward"] == 1.0 for r in written.values())


def test_the_seed_flag_is_refused_where_it_would_not_act(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "in.jsonl"
    rows.write_text('{"responses_create_params": {"input": "hi", "metadata": {"extra_body": "[1]"}}}\n')
    base = ["collect", "--server", "127.0.0.1:9", "--input", str(rows), "--output", str(tmp_path / "o.jsonl"), "--num-repeats-add-seed"]
    assert cli_main(base) == 2 and "need --policy-url" in capsys.readouterr().err
    assert cli_main([*base, "--policy-url", "http://127.0.0.1:9/v1", "--policy-model", "m", "--seed", "1"]) == 2
    assert "not with --num-repeats-add-seed" in capsys.readouterr().err


async def test_interleaved_repeats_start_in_nemo_gyms_order(config_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--interleave-repeats` (NeMo Gym's `interleave_repeats`): the rollouts start round by
    round in the order NeMo Gym dispatches them (a line given twice included); without it, each
    task's back to back. One generation at a time, so the policy sees the order."""
    monkeypatch.chdir(config_tree)
    order = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_configs" / "benchmarks.json").read_text())["interleaved"]
    lines = (config_tree / "benchmarks/demo_decoupled/data/rows.jsonl").read_text().splitlines(keepends=True)
    rows = config_tree / "rows.jsonl"
    rows.write_text("".join([*lines, lines[0]]))
    prompts = {0: "Say yes.", 1: "Say no.", 2: "Say yes!"}
    seen = {}
    async with serve_environment(load_config_server(Path("benchmarks/demo_decoupled/config.yaml"))) as server:
        for flags in ((), ("--interleave-repeats",)):
            with ScriptedPolicyServer({"Say yes.": "yes", "Say no.": "no", "Say yes!": "yes"}) as policy:
                out = config_tree / f"out{len(flags)}.jsonl"
                args = ["collect", "--server", server.address, "--input", str(rows), "--output", str(out), "--agent", "demo_env_simple_agent",
                        "--num-repeats", "2", "--policy-concurrency", "1", "--policy-url", policy.url, "--policy-model", "scripted", *flags]  # fmt: skip
                assert await asyncio.to_thread(cli_main, args) == 0
                seen[flags] = [r.body["messages"][-1]["content"] for r in policy.requests]
            assert sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in map(json.loads, out.read_text().splitlines())) == sorted(map(tuple, order))
    assert seen[("--interleave-repeats",)] == [prompts[task] for task, _ in order]
    assert seen[()] == [prompts[task] for task, _ in sorted(order, key=lambda k: (k[0] if k[1] < 2 else 3, k[1]))]


async def test_agent_map_routes_rows_as_nemo_gym_routes_them(config_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--agent-map KEY=AGENT` (NeMo Gym's agent_map; `_default` its 0.7.0 `+agent_name`): each
    row's agent_ref after it equals NeMo Gym's; with `--benchmark`, `--agent` (or a map of the
    declaring block) runs the benchmark with another agent of its config, and an unknown one is named."""
    monkeypatch.chdir(config_tree)
    mapped = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_configs" / "benchmarks.json").read_text())["mapped"]
    rows = config_tree / "mapped.jsonl"
    rows.write_text("".join(json.dumps({**r, "expected": "yes"}) + "\n" for r in mapped["rows"]))
    flags = [f"--agent-map={k}={v}" for k, v in mapped["agent_map"].items()]
    answers = {f"question {r['q']}": "yes" for r in mapped["rows"]}
    async with serve_environment(load_config_server(Path("benchmarks/demo_pinned/config.yaml"))) as server:
        with ScriptedPolicyServer({**answers, "Say yes.": "yes", "Say no.": "no", "Say yes!": "yes"}) as policy:
            base = ["collect", "--server", server.address, "--policy-url", policy.url, "--policy-model", "scripted"]
            out = config_tree / "out.jsonl"
            assert await asyncio.to_thread(cli_main, [*base, "--input", str(rows), "--output", str(out), *flags]) == 0
            written = {r["_ng_task_index"]: r["agent_ref"] for r in map(json.loads, out.read_text().splitlines())}
            assert [written[i] for i in range(len(mapped["rows"]))] == mapped["agent_refs"]
            for i, extra in enumerate((["--agent", "demo_env_simple_agent"], ["--agent-map", "demo_env=demo_env_simple_agent"])):
                out = config_tree / f"bench{i}.jsonl"
                assert await asyncio.to_thread(cli_main, [*base, "--benchmark", "demo_pinned", "--output", str(out), *extra]) == 0
                assert {(r["agent_ref"]["name"], r["task_source"]) for r in map(json.loads, out.read_text().splitlines())} == {("demo_env_simple_agent", "demo_env")}


async def test_fan_out_runs_rows_once_per_agent_as_nemo_gym(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`--fan-out KEY=A,B` (NeMo Gym's fan_out): a row keyed there (its agent_ref.name, else its
    task_source) runs once per agent, its repeats each, one task, the rollout indices counted on
    across the agents: the (task, rollout, agent) of every rollout equal NeMo Gym's."""
    monkeypatch.chdir(config_tree)
    fanned = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_configs" / "benchmarks.json").read_text())["fanned"]
    rows = config_tree / "fanned.jsonl"
    rows.write_text("".join(json.dumps({**r, "expected": "yes"}) + "\n" for r in fanned["rows"]))
    flags = [f"--fan-out={k}={','.join(v)}" for k, v in fanned["fan_out"].items()]
    out = config_tree / "out.jsonl"
    async with serve_environment(load_config_server(Path("benchmarks/demo_pinned/config.yaml"))) as server:
        with ScriptedPolicyServer({"one": "yes", "two": "yes", "three": "no"}) as policy:
            args = ["collect", "--server", server.address, "--input", str(rows), "--output", str(out), "--num-repeats", "2",
                    "--policy-url", policy.url, "--policy-model", "scripted", *flags]  # fmt: skip
            assert await asyncio.to_thread(cli_main, args) == 0
    written = sorted([r["_ng_task_index"], r["_ng_rollout_index"], r["agent_ref"]["name"]] for r in map(json.loads, out.read_text().splitlines()))
    assert written == sorted(fanned["rollouts"])
    metrics = json.loads((config_tree / "out_aggregate_metrics.json").read_text())
    assert sorted(m["agent_ref"]["name"] for m in metrics) == ["b", "x", "y", "z"]  # an agent each, side by side for compare
    for bad in ("--fan-out=a", "--fan-out=a=x,x", "--fan-out==x"):
        assert cli_main(["collect", "--server", "127.0.0.1:9", "--input", str(rows), "--output", str(out), bad]) == 2
        assert "KEY=AGENT,AGENT" in capsys.readouterr().err


async def test_num_repeats_by_agent_as_nemo_gyms_dict(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`--num-repeats AGENT=K ...` (NeMo Gym's num_repeats dict): the agent a rollout runs with
    first, else the key the row came with, else `_default` (K alone); with `--fan-out` and with
    `--agent-map` the rollouts equal NeMo Gym's; a row no entry covers is named."""
    monkeypatch.chdir(config_tree)
    reference = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_configs" / "benchmarks.json").read_text())
    rows = config_tree / "rows.jsonl"
    rows.write_text("".join(json.dumps({**r, "expected": "yes"}) + "\n" for r in reference["fanned"]["rows"]))
    repeats = reference["repeated"]["num_repeats"]
    counts = [f"--num-repeats={k}={v}" for k, v in repeats.items() if k != "_default"] + [f"--num-repeats={repeats['_default']}"]
    flags = {
        "fan_out": [f"--fan-out={k}={','.join(v)}" for k, v in reference["repeated"]["runs"]["fan_out"]["fan_out"].items()],
        "agent_map": [f"--agent-map={k}={v}" for k, v in reference["repeated"]["runs"]["agent_map"]["agent_map"].items()] + ["--agent", "sa"],
    }
    async with serve_environment(load_config_server(Path("benchmarks/demo_pinned/config.yaml"))) as server:
        with ScriptedPolicyServer({"one": "yes", "two": "yes", "three": "no"}) as policy:
            base = ["collect", "--server", server.address, "--input", str(rows), "--policy-url", policy.url, "--policy-model", "scripted", *counts]
            for run, extra in flags.items():
                out = config_tree / f"{run}.jsonl"
                assert await asyncio.to_thread(cli_main, [*base, "--output", str(out), *extra]) == 0
                written = sorted([r["_ng_task_index"], r["_ng_rollout_index"], r["agent_ref"]["name"]] for r in map(json.loads, out.read_text().splitlines()))
                assert written == sorted([t, r, a or "sa"] for t, r, a in reference["repeated"]["rollouts"][run]), run
            out = config_tree / "uncovered.jsonl"
            assert await asyncio.to_thread(cli_main, [*base[:-1], "--output", str(out), "--on-bad-line", "skip"]) in (0, 1)  # no _default
            said = capsys.readouterr().err
            assert "no --num-repeats entry for agent 'b', and no _default" in said, said
    assert cli_main(["collect", "--server", "127.0.0.1:9", "--input", str(rows), "--output", str(out), "--num-repeats", "2", "--num-repeats", "_default=3"]) == 2
    assert "--num-repeats given twice" in capsys.readouterr().err
