"""`collect --benchmark` run as NeMo Gym 0.7.0's `gym eval run --benchmark` runs a benchmark,
held to what NeMo Gym itself did (tests/data/nemo_gym_configs/benchmarks.json, recorded by
scripts/make_nemo_benchmark_reference.py): every benchmark config of the wheel read alike (its
dataset, agent, repeats, data file, prompt), and for the cases of the test tree the rows NeMo
Gym's rollout collection dispatched (prompt applied, repeats, task and rollout indices,
`task_source`, the agent resolved) equal to the rows collect sends and writes."""

from __future__ import annotations

import asyncio
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.cli import main as cli_main
from gym_metrics.errors import InvalidInputError
from gym_metrics.nemo_gym import benchmark_names, load_config_server
from gym_metrics.nemo_gym._benchmark import Benchmark, benchmark_config, read_benchmark
from gym_metrics.testing import ScriptedPolicyServer, serve_environment

REFERENCE = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_configs" / "benchmarks.json").read_text())
CASES = REFERENCE["cases"]
NEMO_GYM_REFUSES = {
    "benchmarks/lmarena_v2/config.yaml", "benchmarks/lmarena_v3/config.yaml", "benchmarks/ruler/config.yaml",
    "benchmarks/nemotron_3.5_super/benchmark_configs/hle_no_tools.yaml",
}  # fmt: skip
"""Read without a model, NeMo Gym's listing refuses these (a `policy_model_name` or `???` its run
would fill in); collect reads them, and its run gives them the policy."""
ANSWERS = {
    "What is 2+2?\n(Reply with the answer only.)": "4",
    "Name a primary colour.\n(Reply with the answer only.)": "blue",
    "Capital of France?\n(Reply with the answer only.)": "Paris",
    "Say yes.": "yes",
    "Say no.": "maybe",
    "Say yes!": "yes",
}


def summary(found: Benchmark, root: Path) -> dict[str, Any]:
    """Ours, in the recording's words (paths relative to where it ran)."""
    def relative(path: Path | None) -> str | None:
        return None if path is None else str(path.relative_to(root.resolve()) if path.is_absolute() else path)

    return {"name": found.name, "agent": found.agent, "num_repeats": found.num_repeats, "jsonl_fpath": relative(found.data),
            "prompt_config": relative(found.prompt_config), "prepare_script": found.prepare_script}  # fmt: skip


@pytest.mark.slow  # 10-26 s: on the default Python only (CI's time bound)
def test_the_wheels_benchmarks_read_as_nemo_gym_reads_them(ported: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All 184 benchmark configs of the wheel: the same dataset, agent, repeats, data and prompt."""
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(tmp_path, [m for m in wheel.namelist() if m.endswith(".yaml")])
    monkeypatch.chdir(tmp_path)
    differ = [name for name, expected in REFERENCE["wheel"].items()
              if name not in NEMO_GYM_REFUSES and summary(read_benchmark(Path(name)), tmp_path) != expected]  # fmt: skip
    assert not differ, differ
    assert {name for name, expected in REFERENCE["wheel"].items() if "error" in (expected or {})} == NEMO_GYM_REFUSES
    assert len(REFERENCE["wheel"]) == 184
    assert benchmark_names(tmp_path) == REFERENCE["names"]  # the names `gym list benchmarks` gives them


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_cases_read_as_nemo_gym_reads_them(case: str, config_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each case's benchmark, or its refusal: none declared (NeMo Gym: not a benchmark), two (a
    suite), two agents and no pin (NeMo Gym names both, so does collect)."""
    monkeypatch.chdir(config_tree)
    expected = CASES[case]["benchmark"]
    if expected is not None and "error" not in expected:
        assert summary(read_benchmark(Path(case)), config_tree) == expected
        return
    with pytest.raises(InvalidInputError) as refused:
        read_benchmark(Path(case))
    said = str(refused.value)
    if expected is None:
        assert ("an eval suite" if "suite" in case else "not a benchmark config") in said
    elif expected["error"] == "ServerRefNotFoundError":  # a block renamed away that another still names: NeMo Gym's words
        assert expected["message"].splitlines()[0] in said and "Available resources_servers: 'demo_dangling_resources_server'" in said, said
    else:
        assert "demo_env_second_agent" in said and "demo_env_simple_agent" in said and "pin one" in said, said


@pytest.mark.parametrize("case", ["benchmarks/demo_eval/config.yaml", "benchmarks/demo_decoupled/config.yaml", "benchmarks/demo_pinned/config.yaml"])
async def test_collect_runs_the_rows_nemo_gym_runs(case: str, config_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows collect --benchmark sends the policy and writes equal NeMo Gym's dispatched rows:
    the template applied, a legacy agent_ref dropped, `task_source` the declaring block, the
    agent resolved, each row its repeats, rows one task when NeMo Gym's collated lines are equal
    (spacing aside; key order not); the rewards are the environment's."""
    monkeypatch.chdir(config_tree)
    expected = CASES[case]["rows"]
    out = config_tree / "out.jsonl"
    spec = "demo_eval" if "demo_eval" in case else case  # by name too, as gym eval run --benchmark takes it
    async with serve_environment(load_config_server(Path(case))) as server:
        with ScriptedPolicyServer(ANSWERS) as policy:
            args = ["collect", "--server", server.address, "--benchmark", spec, "--output", str(out), "--policy-url", policy.url,
                    "--policy-model", "scripted", "--policy-api", "responses"]  # fmt: skip
            assert await asyncio.to_thread(cli_main, args) == 0
            sent = sorted(json.dumps(r.body["input"], sort_keys=True) for r in policy.requests)
    written = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: (r["_ng_task_index"], r["_ng_rollout_index"]))
    ordered = sorted(expected, key=lambda r: (r["_ng_task_index"], r["_ng_rollout_index"]))
    keys = ("_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source")
    assert [[r[k] for k in keys] + [_prompt(r)] for r in written] == [[r[k] for k in keys] + [_prompt(r)] for r in ordered]
    assert sent == sorted(json.dumps(r["responses_create_params"]["input"], sort_keys=True) for r in expected)
    rewards = [r["reward"] for r in written]
    assert rewards == [1.0 if ANSWERS[_prompt(r)] == r["expected"] else 0.0 for r in ordered] and 0.0 in rewards and 1.0 in rewards
    metrics = json.loads((config_tree / "out_aggregate_metrics.json").read_text())
    assert [m["agent_ref"]["name"] for m in metrics] == [CASES[case]["benchmark"]["agent"]]


async def test_nemo_gyms_collated_file_collects_to_its_rows(config_tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file `gym eval prepare`/`ng_prepare_data` writes (rows with `task_source`, no agent,
    each repeated) collected with --agent: NeMo Gym's tasks and rollouts; without --agent, the
    lines are named bad, saying why."""
    case = "benchmarks/demo_eval/config.yaml"
    collated = config_tree / "benchmark.jsonl"
    collated.write_text("".join(line + "\n" for line in CASES[case]["collated"]))
    out = config_tree / "out.jsonl"
    async with serve_environment(load_config_server(config_tree / case)) as server:
        with ScriptedPolicyServer(ANSWERS) as policy:
            args = ["collect", "--server", server.address, "--input", str(collated), "--output", str(out), "--policy-url", policy.url,
                    "--policy-model", "scripted", "--policy-api", "responses"]  # fmt: skip
            assert await asyncio.to_thread(cli_main, args) == 2
            assert "routes by task_source 'demo_eval_simple_agent'" in capsys.readouterr().err
            out.unlink(missing_ok=True)
            assert await asyncio.to_thread(cli_main, [*args, "--agent", "demo_eval_simple_agent"]) == 0
    keys = ("_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source")
    written = sorted([r[k] for k in keys] for r in map(json.loads, out.read_text().splitlines()))
    assert written == sorted([r[k] for k in keys] for r in CASES[case]["rows"])


def _prompt(row: dict[str, Any]) -> str:
    given = row["responses_create_params"]["input"]
    return str(given[-1]["content"])


@pytest.mark.slow  # 10-26 s: on the default Python only (CI's time bound)
async def test_two_processes_and_a_resume_give_the_same_rows(config_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--benchmark` with `--processes 2` (each shard reads the benchmark again), then `--resume`
    of a run cut short: NeMo Gym's rows each time, none twice."""
    monkeypatch.chdir(config_tree)
    case = "benchmarks/demo_eval/config.yaml"
    keys = ("_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source")
    expected = sorted([r[k] for k in keys] for r in CASES[case]["rows"])
    async with serve_environment(load_config_server(Path(case))) as server:
        with ScriptedPolicyServer(ANSWERS) as policy:
            base = ["collect", "--server", server.address, "--benchmark", "demo_eval", "--policy-url", policy.url,
                    "--policy-model", "scripted", "--policy-api", "responses"]  # fmt: skip
            sharded = config_tree / "sharded.jsonl"
            assert await asyncio.to_thread(cli_main, [*base, "--output", str(sharded), "--processes", "2"]) == 0
            resumed = config_tree / "resumed.jsonl"
            assert await asyncio.to_thread(cli_main, [*base, "--output", str(resumed), "--limit", "7"]) == 0
            assert await asyncio.to_thread(cli_main, [*base, "--output", str(resumed), "--resume"]) == 0
            asked = sum(policy.calls.values())
    for out in (sharded, resumed):
        assert sorted([r[k] for k in keys] for r in map(json.loads, out.read_text().splitlines())) == expected, out
    assert asked == 2 * len(expected)  # the resumed run asked only for the rollouts the first part had not


@pytest.mark.slow  # 10-26 s: on the default Python only (CI's time bound)
def test_without_a_server_the_benchmarks_environment_is_served_for_the_run(
    config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --server: `gym-metrics serve CONFIG` runs in a child for the run, as `gym eval run`
    starts its servers (two processes share it); one that cannot start is an error quoting it."""
    monkeypatch.chdir(config_tree)
    case = "benchmarks/demo_eval/config.yaml"
    keys = ("_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source")
    out = config_tree / "out.jsonl"
    with ScriptedPolicyServer(ANSWERS) as policy:
        args = ["collect", "--benchmark", "demo_eval", "--output", str(out), "--policy-url", policy.url, "--policy-model", "scripted",
                "--policy-api", "responses", "--processes", "2"]  # fmt: skip
        assert cli_main(args) == 0
    said = capsys.readouterr().err
    assert "collect: serving" in said and "demo_eval/config.yaml on 127.0.0.1:" in said, said
    assert said.count("collect: benchmark demo_eval (") == 1 and "3 rollouts a row, agent demo_eval_simple_agent, prompt " in said, said
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted([r[k] for k in keys] for r in written) == sorted([r[k] for k in keys] for r in CASES[case]["rows"])
    assert {r["label"] for r in written} == {"eval"}  # the benchmark's own server (its renamed block)
    assert "listening on 127.0.0.1:" in (config_tree / "out_server.log").read_text()  # all it said, kept beside the output
    app = config_tree / "resources_servers/demo_env/app.py"
    app.write_text(app.read_text().replace("        text = ", "        import os\n        os._exit(3)\n        text = "))  # dies at its first verify
    out.unlink()
    with ScriptedPolicyServer(ANSWERS) as policy:
        args = ["collect", "--benchmark", "demo_eval", "--output", str(out), "--policy-url", policy.url, "--policy-model", "scripted",
                "--policy-api", "responses", "--max-retries", "0", "--limit", "1"]  # fmt: skip
        assert cli_main(args) != 0
    said = capsys.readouterr().err
    assert "the served environment exited during the run (exit 3)" in said, said
    app.write_text("raise RuntimeError('the environment is broken')\n")
    out.unlink()
    assert cli_main(["collect", "--benchmark", "demo_eval", "--output", str(out)]) == 2
    said = capsys.readouterr().err
    assert "did not start (exit" in said and "the environment is broken" in said, said
    assert cli_main(["collect", "--benchmark", "demo_eval", "--output", str(out), "--ray"]) == 2
    assert "Ray's nodes must reach the server" in capsys.readouterr().err
    assert cli_main(["collect", "--input", str(config_tree / "benchmarks/demo_eval/data/demo_eval_benchmark.jsonl"), "--output", str(out)]) == 2
    assert "--server: give HOST:PORT" in capsys.readouterr().err


async def test_limit_counts_rollouts_as_gym_eval_run_counts_them(config_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--benchmark --limit N`: the first N lines of NeMo Gym's collated file, a rollout each (so a
    task may run fewer than its repeats, as there)."""
    monkeypatch.chdir(config_tree)
    case = "benchmarks/demo_eval/config.yaml"
    out = config_tree / "out.jsonl"
    async with serve_environment(load_config_server(Path(case))) as server:
        with ScriptedPolicyServer(ANSWERS) as policy:
            args = ["collect", "--server", server.address, "--benchmark", case, "--output", str(out), "--policy-url", policy.url,
                    "--policy-model", "scripted", "--policy-api", "responses", "--limit", "4"]  # fmt: skip
            assert await asyncio.to_thread(cli_main, args) == 0
    keys = ("_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source")
    written = sorted([r[k] for k in keys] for r in map(json.loads, out.read_text().splitlines()))
    assert written == [[r[k] for k in keys] for r in CASES[case]["rows"][:4]]


def test_the_benchmarks_flags_can_be_overridden(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--input replaces the dataset file and --num-repeats its repeats; the prompt stays the
    benchmark's unless --prompt-config names another."""
    monkeypatch.chdir(config_tree)
    mine = config_tree / "mine.jsonl"
    mine.write_text(json.dumps({"question": "Capital of France?", "expected": "Paris"}) + "\n")
    other = config_tree / "other.yaml"
    other.write_text("user: 'Q: {question}'\n")

    async def run(*flags: str) -> list[dict[str, Any]]:
        out = config_tree / "o.jsonl"
        out.unlink(missing_ok=True)
        async with serve_environment(load_config_server(Path("benchmarks/demo_eval/config.yaml"))) as server:
            with ScriptedPolicyServer({"Capital of France?\n(Reply with the answer only.)": "Paris", "Q: Capital of France?": "Lyon"}) as policy:
                args = ["collect", "--server", server.address, "--benchmark", "demo_eval", "--output", str(out), "--policy-url", policy.url,
                        "--policy-model", "scripted", "--policy-api", "responses", *flags]  # fmt: skip
                assert await asyncio.to_thread(cli_main, args) == 0, capsys.readouterr().err
        return sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["_ng_rollout_index"])  # (written as they finish)

    rows = asyncio.run(run("--input", str(mine), "--num-repeats", "2"))
    assert [(r["_ng_rollout_index"], r["reward"], r["task_source"]) for r in rows] == [(0, 1.0, "demo_eval_simple_agent"), (1, 1.0, "demo_eval_simple_agent")]
    rows = asyncio.run(run("--input", str(mine), "--prompt-config", str(other)))
    assert [(len(r["responses_create_params"]["input"]), r["reward"]) for r in rows] == [(1, 0.0)] * 3


def test_a_benchmark_that_cannot_run_is_named(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(config_tree)
    base = ["collect", "--server", "127.0.0.1:9", "--output", str(config_tree / "o.jsonl")]
    (config_tree / "benchmarks/demo_eval/data/demo_eval_benchmark.jsonl").unlink()
    cases = [
        (["--benchmark", "demo_eval"], ["not there", "from benchmarks.demo_eval.prepare import prepare", "gym eval prepare --benchmark demo_eval"]),
        (["--benchmark", "nowhere"], ["unknown benchmark", "benchmarks/nowhere/config.yaml", "demo_eval"]),
        (["--benchmark", "benchmarks/demo_suite/config.yaml"], ["the data of benchmark demo_eval is not there", "gym eval prepare --benchmark demo_eval"]),  # (a suite's too)
        (["--benchmark", "demo_decoupled", "--agent", "x"], ["--agent-map", "'x' is not an agent of", "demo_env_simple_agent"]),
        (["--benchmark", "demo_decoupled", "--output", "benchmarks/demo_decoupled/data/rows.jsonl"], ["--output"]),
    ]
    for flags, words in cases:
        code = cli_main([*base, *flags])
        err = capsys.readouterr().err
        assert code == 2 and all(w in err for w in words), (flags, err)


def test_a_name_is_looked_up_as_nemo_gym_looks_it_up(config_tree: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """NAME: benchmarks/NAME/config.yaml; NAME/FLAVOR: benchmarks/NAME/FLAVOR.yaml (or a folder's
    config.yaml); $NEMO_GYM_EXTRA_ROOTS before the working directory."""
    monkeypatch.chdir(config_tree)
    (config_tree / "benchmarks/demo_eval/other.yaml").write_text((config_tree / "benchmarks/demo_eval/config.yaml").read_text())
    assert benchmark_config("demo_eval").resolve() == (config_tree / "benchmarks/demo_eval/config.yaml").resolve()
    assert benchmark_config("demo_eval/other").resolve() == (config_tree / "benchmarks/demo_eval/other.yaml").resolve()
    extra = tmp_path_factory.mktemp("extra")
    (extra / "benchmarks/demo_eval").mkdir(parents=True)
    (extra / "benchmarks/demo_eval/config.yaml").write_text("x: 1\n")
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", str(extra))
    assert benchmark_config("demo_eval") == extra / "benchmarks/demo_eval/config.yaml"


def test_a_benchmark_is_prepared_as_gym_eval_prepare_prepares_it(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """`dataset nemo-gym-benchmark NAME`: its prepare script's prepare(), imported by module path
    from the tree's root in a process of its own, must write the dataset's file; `--cached`
    keeps a file already there; `--list` names the tree's benchmarks; failures name the script."""
    monkeypatch.chdir(config_tree)
    data = config_tree / "benchmarks/demo_eval/data/demo_eval_benchmark.jsonl"
    committed = data.read_bytes()
    data.unlink()
    assert cli_main(["dataset", "nemo-gym-benchmark", "demo_eval"]) == 0
    assert data.read_bytes() == committed and "demo_eval: 7 rows" in capfd.readouterr().err
    data.write_text("{}\n")
    assert cli_main(["dataset", "nemo-gym-benchmark", "demo_eval", "--cached"]) == 0 and data.read_text() == "{}\n"
    assert cli_main(["dataset", "nemo-gym-benchmark", "--list"]) == 0
    listed = capfd.readouterr().out.splitlines()
    assert "demo_eval\tdemo_eval\tdemo_eval_simple_agent\tx3\tprepared" in listed
    assert [line.split("\t")[0] for line in listed] == ["demo_agent", "demo_ambiguous", "demo_dangling", "demo_decoupled", "demo_eval", "demo_pinned", "demo_splits", "demo_suite_two"]
    assert "demo_suite_two\tsuite: demo_eval, demo_second\tdemo_eval_simple_agent, demo_second_simple_agent\tx3, x2\tprepared" in listed  # (its own text declares one: NeMo Gym's discovery lists it)
    script = config_tree / "benchmarks/demo_eval/prepare.py"
    for text, words in (
        ("def prepare():\n    return 'elsewhere.jsonl'\n", ["wrote elsewhere", "elsewhere.jsonl"]),
        ("def prepare():\n    raise SystemExit(3)\n", ["prepare script of demo_eval failed", "exit 3"]),
        ("x = 1\n", ["has no prepare() function", "exit 1"]),
    ):
        script.write_text(text)
        assert cli_main(["dataset", "nemo-gym-benchmark", "demo_eval"]) == 2
        said = capfd.readouterr().err
        assert all(w in said for w in words), said
    assert cli_main(["dataset", "nemo-gym-benchmark", "demo_decoupled"]) == 2 and "no prepare script" in capfd.readouterr().err
